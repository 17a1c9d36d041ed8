// Topology inference on synthetic observations from a known L x H x S fabric.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include "weft/probe/inference.h"

namespace weft::probe {
namespace {

struct Shape {
  int spines, leaves, hosts;
};

// Observations of a full sweep: host (l,h) has id l*100+h; the spine of a
// cross-leaf 5-tuple is (src + dst + sport) % S + 1 unless that crosses a dead link.
struct Synth {
  std::vector<db::HostRow> hosts;
  std::vector<db::Observation> obs;
};

Synth synth(Shape s, int ports, std::pair<int, int> dead = {0, 0}) {
  Synth out;
  for (int l = 1; l <= s.leaves; ++l)
    for (int h = 1; h <= s.hosts; ++h)
      out.hosts.push_back({l * 100 + h, fmt::format("h{}-{}", l, h), fmt::format("10.0.{}.{}", l, h), ""});
  for (const auto& a : out.hosts)
    for (const auto& b : out.hosts) {
      if (a.id == b.id) continue;
      for (int p = 0; p < ports; ++p) {
        db::Observation o;
        o.src_id = a.id;
        o.dst_id = b.id;
        o.sport = 1000 + p;
        o.dport = 4791;
        o.answered = 1;
        const int la = static_cast<int>(a.id / 100), lb = static_cast<int>(b.id / 100);
        if (la == lb) {
          o.spine = 0;
        } else {
          int sp = static_cast<int>((a.id + b.id + p) % s.spines) + 1;
          while (sp == dead.first && (la == dead.second || lb == dead.second)) sp = sp % s.spines + 1;
          o.spine = sp;
        }
        out.obs.push_back(o);
      }
    }
  return out;
}

class InferenceTest : public ::testing::TestWithParam<Shape> {};

TEST_P(InferenceTest, RecoversLeavesAndSpinesOfAHealthyFabric) {
  const Shape s = GetParam();
  Synth d = synth(s, 16);
  Inference inf = infer_fabric(d.hosts, d.obs);
  EXPECT_EQ(inf.leaves, s.leaves);
  for (const auto& h : d.hosts) EXPECT_EQ(inf.fabric.host_leaf.at(h.id), h.id / 100) << h.name;
  ASSERT_EQ(inf.fabric.spines.size(), static_cast<size_t>(s.spines));
  EXPECT_EQ(inf.fabric.links.size(), static_cast<size_t>(s.spines * s.leaves));
  for (const auto& l : inf.fabric.links) EXPECT_FALSE(l.dead);
  EXPECT_TRUE(inf.anomalies.empty()) << inf.anomalies.front().detail;
}

TEST_P(InferenceTest, NamesExactlyTheDeadLink) {
  const Shape s = GetParam();
  const std::pair<int, int> dead = {s.spines, s.leaves - 1};
  Synth d = synth(s, 16, dead);
  Inference inf = infer_fabric(d.hosts, d.obs);
  ASSERT_EQ(inf.anomalies.size(), 1u);
  EXPECT_EQ(inf.anomalies[0].kind, "dead_link");
  EXPECT_EQ(inf.anomalies[0].detail, fmt::format("spine {} - leaf {}: no flow crossed it", dead.first, dead.second));
  int dead_links = 0;
  for (const auto& l : inf.fabric.links) dead_links += l.dead;
  EXPECT_EQ(dead_links, 1);
}

INSTANTIATE_TEST_SUITE_P(Fabrics, InferenceTest,
                         ::testing::Values(Shape{2, 3, 2}, Shape{3, 5, 3}, Shape{4, 4, 4}, Shape{7, 3, 1}));

TEST(InferenceTest2, UnstableAndUnreachableBecomeAnomalies) {
  Synth d = synth({3, 2, 1}, 2);
  d.obs[0].unstable = true;
  d.obs[0].other_spine = 3;
  for (auto& o : d.obs)
    if (o.src_id == 201) {
      o.answered = 0;
      o.spine.reset();
    }
  Inference inf = infer_fabric(d.hosts, d.obs);
  ASSERT_EQ(inf.anomalies.size(), 2u);
  EXPECT_EQ(inf.anomalies[0].kind, "unstable");
  EXPECT_EQ(inf.anomalies[0].detail,
            fmt::format("h1-1 -> h2-1 udp sport 1000 dport 4791: spines {} and 3", d.obs[0].spine.value()));
  EXPECT_EQ(inf.anomalies[1].kind, "unreachable");
  EXPECT_EQ(inf.anomalies[1].detail, "h2-1 -> h1-1: no probe answered on any port");
}

// Two NICs of one host ("h:a", "h:b") reach each other inside the host: the
// kernel delivers locally, the probe crosses no spine, and yet they sit on
// different leaves (rails). Only hosts named alike up to the colon count.
TEST(InferenceTest2, FlowsBetweenNicsOfOneHostSayNothingAboutLeaves) {
  Synth d = synth({2, 2, 2}, 4);
  d.hosts[0].name = "x:eth0";  // leaf 1
  d.hosts[2].name = "x:eth1";  // leaf 2
  d.hosts[1].name = "x";       // leaf 1: not a NIC name
  d.hosts[3].name = "y:eth0";  // leaf 2
  for (auto& o : d.obs) {
    const bool x_nics = (o.src_id == 101 && o.dst_id == 201) || (o.src_id == 201 && o.dst_id == 101);
    if (x_nics) o.spine = 0;  // delivered inside host x
  }
  Inference inf = infer_fabric(d.hosts, d.obs);
  EXPECT_EQ(inf.leaves, 2);
  for (const auto& h : d.hosts) EXPECT_EQ(inf.fabric.host_leaf.at(h.id), h.id / 100) << h.name;
  EXPECT_EQ(nic_host("x:eth0"), "x");
  for (const char* not_nic : {"x", ":eth0", "x:", "x:a:b"}) EXPECT_EQ(nic_host(not_nic), "") << not_nic;
}

// Two planes: leaves 1, 2 and spines 1, 2 on one, leaves 3, 4, 5 and spines
// 3, 4 on the other; hosts of different planes never answer each other. Only
// the link that is really gone (spine 4 - leaf 3) is named.
TEST(InferenceTest2, PlanesAreNeitherDeadLinksNorUnreachablePairs) {
  Synth d;
  for (int l = 1; l <= 5; ++l) {
    for (int h = 1; h <= 2; ++h) d.hosts.push_back({l * 100 + h, fmt::format("h{}-{}", l, h), "", ""});
  }
  for (const auto& a : d.hosts) {
    for (const auto& b : d.hosts) {
      if (a.id == b.id) continue;
      const int la = static_cast<int>(a.id / 100), lb = static_cast<int>(b.id / 100);
      for (int p = 0; p < 8; ++p) {
        db::Observation o;
        o.src_id = a.id;
        o.dst_id = b.id;
        o.sport = 1000 + p;
        o.answered = (la <= 2) == (lb <= 2) ? 1 : 0;
        if (o.answered && la != lb) {
          o.spine = (la <= 2 ? 1 : 3) + p % 2;
          if (*o.spine == 4 && (la == 3 || lb == 3)) o.spine = 3;
        } else if (o.answered) {
          o.spine = 0;
        }
        d.obs.push_back(o);
      }
    }
  }
  Inference inf = infer_fabric(d.hosts, d.obs);
  EXPECT_EQ(inf.leaves, 5);
  ASSERT_EQ(inf.anomalies.size(), 1u) << (inf.anomalies.empty() ? "" : inf.anomalies.back().detail);
  EXPECT_EQ(inf.anomalies[0].detail, "spine 4 - leaf 3: no flow crossed it");
  EXPECT_EQ(inf.fabric.links.size(), 10u) << "2 spines x 2 leaves, 2 spines x 3 leaves";
}

// Hosts x, y with a NIC on each of 6 leaves: plane A (leaves 1-3; spines
// 1, 2) and plane B (leaves 4-6; spines 3, 4), every uplink of leaf 6 cut.
// The planes hold (leaf 6's hosts are a plane-B NIC short): no link between
// the planes is named dead, only leaf 6's pairs in plane B are unreachable.
TEST(InferenceTest2, ALeafWithEveryUplinkCutKeepsThePlanes) {
  Synth d;
  const char* port[] = {"", "a0", "a1", "a2", "b0", "b1", "b2"};
  for (int l = 1; l <= 6; ++l) {
    for (int h = 0; h < 2; ++h) d.hosts.push_back({l * 100 + h, fmt::format("{}:{}", h ? "y" : "x", port[l]), "", ""});
  }
  for (const auto& a : d.hosts) {
    for (const auto& b : d.hosts) {
      if (a.id == b.id) continue;
      const int la = static_cast<int>(a.id / 100), lb = static_cast<int>(b.id / 100);
      const bool same_plane = (la <= 3) == (lb <= 3);
      for (int p = 0; p < 8; ++p) {
        db::Observation o;
        o.src_id = a.id;
        o.dst_id = b.id;
        o.sport = 1000 + p;
        o.answered = la == lb || (same_plane && la != 6 && lb != 6) ? 1 : 0;
        if (o.answered) o.spine = la == lb ? 0 : (la <= 3 ? 1 : 3) + p % 2;
        d.obs.push_back(o);
      }
    }
  }
  Inference inf = infer_fabric(d.hosts, d.obs);
  EXPECT_EQ(inf.leaves, 6);
  std::vector<std::string> anomalies;
  for (const auto& a : inf.anomalies) anomalies.push_back(a.kind + ": " + a.detail);
  std::vector<std::string> want;
  for (const char* pair : {"x:b0 -> y:b2", "y:b0 -> x:b2", "x:b1 -> y:b2", "y:b1 -> x:b2", "x:b2 -> y:b0",
                           "x:b2 -> y:b1", "y:b2 -> x:b0", "y:b2 -> x:b1"}) {
    want.push_back(fmt::format("unreachable: {}: no probe answered on any port", pair));
  }
  EXPECT_EQ(anomalies, want);
  EXPECT_EQ(inf.fabric.links.size(), 10u) << "spines 1, 2 x leaves 1-3; spines 3, 4 x leaves 4, 5";
}

TEST(InferenceTest2, TtlHopAddressesAreNumberedInNumericOrder) {
  std::vector<db::Observation> obs(4);
  obs[0].hop_addr = "10.254.0.10";
  obs[1].hop_addr = "10.254.0.2";
  obs[2].hop_addr.reset();  // reached the destination: same leaf
  obs[3].hop_addr = "10.254.0.10";
  for (auto& o : obs) o.answered = 1;
  auto names = number_ttl_spines(obs);
  EXPECT_EQ(names, (std::map<int, std::string>{{1, "10.254.0.2"}, {2, "10.254.0.10"}}));
  EXPECT_EQ(obs[0].spine, 2);
  EXPECT_EQ(obs[1].spine, 1);
  EXPECT_EQ(obs[2].spine, 0);
  EXPECT_EQ(obs[3].spine, 2);
}

}  // namespace
}  // namespace weft::probe
