// weft agent + weft probe on netns fabrics: every observation against the
// fabric's own routes, DSCP and TTL methods against each other, inference of
// leaves, spines and a failed link, and a controller killed mid-campaign.
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <iostream>
#include <map>
#include <regex>
#include <set>
#include <thread>

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "agent_fleet.h"
#include "../scratch_name.h"

namespace weft::test {
namespace {

std::string test_dir() { return "/tmp/" + scratch_name("weft-agent-test"); }

int leaf_of(const std::string& ip) { return std::stoi(ip.substr(5, ip.find('.', 5) - 5)); }

// Compares every observation with the source leaf's FIB; returns mismatches.
int mismatches(NetnsFabric& f, const std::vector<PathRow>& rows, int proto) {
  std::vector<FiveTuple> t;
  for (const auto& r : rows) t.push_back({r.src_ip, r.dst_ip, proto, r.sport, r.dport});
  auto truth = f.ground_truth(t);
  EXPECT_TRUE(truth) << truth.status().to_string();
  if (!truth) return -1;
  int bad = 0;
  for (size_t i = 0; i < rows.size(); ++i) {
    if (rows[i].spine != (*truth)[i] || rows[i].answered == 0 || rows[i].unstable) {
      if (++bad <= 5) {
        ADD_FAILURE() << rows[i].src_ip << " -> " << rows[i].dst_ip << " sport " << rows[i].sport << ": stored spine "
                      << rows[i].spine << ", fabric routes via spine " << (*truth)[i];
      }
    }
  }
  return bad;
}

double summary_seconds(const std::string& out) {
  std::smatch m;
  return std::regex_search(out, m, std::regex(R"(in ([0-9.]+) s)")) ? std::stod(m[1]) : -1;
}

struct Size {
  int s, l, h;
};

class ProbeCampaignTest : public ::testing::TestWithParam<Size> {};

TEST_P(ProbeCampaignTest, EveryObservationMatchesTheFabricAndDscpAgreesWithTtl) {
  WEFT_SKIP_UNLESS_NETNS();
  const Size sz = GetParam();
  auto fabric = NetnsFabric::create(FabricOptions::clos(sz.s, sz.l, sz.h));
  ASSERT_TRUE(fabric) << fabric.status().to_string();
  NetnsFabric& f = **fabric;
  auto fleet = AgentFleet::start(f, test_dir());
  ASSERT_TRUE(fleet) << fleet.status().to_string();
  const int n = sz.l * sz.h;
  constexpr int kPorts = 64;

  const auto t0 = std::chrono::steady_clock::now();
  auto dscp = (*fleet)->probe(fmt::format("--ports {} --rate 20000", kPorts));
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_TRUE(dscp.ok()) << dscp.err;
  std::cout << "[figure] " << sz.s << "x" << sz.l << "x" << sz.h << " x " << kPorts << " ports, udp dscp: campaign "
            << summary_seconds(dscp.out) << " s (weft probe wall " << wall << " s)\n" << dscp.out;
  if (n == 32) {
    EXPECT_LE(summary_seconds(dscp.out), 10.0) << "all pairs of 8x8x4 x 64 ports in <= 10 s";
  }

  auto rows = load_paths((*fleet)->db_path(), 1);
  ASSERT_TRUE(rows) << rows.status().to_string();
  ASSERT_EQ(rows->size(), static_cast<size_t>(n * (n - 1) * kPorts));
  EXPECT_EQ(mismatches(f, *rows, 17), 0);

  // Inference: leaves exactly the fabric's, spines 1..S, every link up, no anomaly.
  auto db = db::Database::open((*fleet)->db_path());
  ASSERT_TRUE(db);
  auto hosts = db::list_hosts(*db);
  auto inf = db::load_inference(*db, 1);
  ASSERT_TRUE(inf && hosts);
  for (const auto& h : *hosts) EXPECT_EQ(inf->host_leaf.at(h.id), leaf_of(h.ip)) << h.name;
  std::set<int> spines;
  for (const auto& s : inf->spines) spines.insert(s.number);
  std::set<int> want;
  for (int s = 1; s <= sz.s; ++s) want.insert(s);
  EXPECT_EQ(spines, want);
  EXPECT_EQ(inf->links.size(), static_cast<size_t>(sz.s * sz.l));
  EXPECT_TRUE(db::load_anomalies(*db, 1)->empty());

  // TTL method: the ICMP source of every cross-leaf 5-tuple is the spine DSCP named.
  auto ttl = (*fleet)->probe(fmt::format("--ports {} --rate 20000 --method ttl", kPorts));
  ASSERT_TRUE(ttl.ok()) << ttl.err;
  std::cout << "[figure] udp ttl: campaign " << summary_seconds(ttl.out) << " s\n";
  auto trows = load_paths((*fleet)->db_path(), 2);
  ASSERT_TRUE(trows);
  ASSERT_EQ(trows->size(), rows->size());
  int disagree = 0;
  for (size_t i = 0; i < rows->size(); ++i) {
    const PathRow& a = (*rows)[i];
    const PathRow& b = (*trows)[i];
    ASSERT_EQ(a.sport, b.sport);
    const std::string want_hop = a.spine > 0 ? fmt::format("10.254.0.{}", a.spine) : "";
    if (a.spine != b.spine || b.hop_addr != want_hop) {
      if (++disagree <= 5) {
        ADD_FAILURE() << a.src_ip << " -> " << a.dst_ip << " sport " << a.sport << ": dscp spine " << a.spine
                      << ", ttl spine " << b.spine << " via '" << b.hop_addr << "'";
      }
    }
  }
  EXPECT_EQ(disagree, 0);
  auto tinf = db::load_inference(*db, 2);
  ASSERT_TRUE(tinf);
  EXPECT_EQ(tinf->host_leaf, inf->host_leaf);
  ASSERT_EQ(tinf->spines.size(), static_cast<size_t>(sz.s));
  EXPECT_EQ(tinf->spines.back().address, fmt::format("10.254.0.{}", sz.s));
}

INSTANTIATE_TEST_SUITE_P(Fabrics, ProbeCampaignTest, ::testing::Values(Size{4, 4, 4}, Size{8, 8, 4}),
                         [](const auto& p) { return fmt::format("s{}l{}h{}", p.param.s, p.param.l, p.param.h); });

TEST(ProbeFailureTest, AFailedLinkIsNamedExactlyAndGoneAfterRestore) {
  WEFT_SKIP_UNLESS_NETNS();
  auto fabric = NetnsFabric::create(FabricOptions::clos(3, 4, 2));
  ASSERT_TRUE(fabric) << fabric.status().to_string();
  NetnsFabric& f = **fabric;
  auto fleet = AgentFleet::start(f, test_dir());
  ASSERT_TRUE(fleet) << fleet.status().to_string();
  ASSERT_TRUE(f.fail_link(3, 2).is_ok());
  auto r1 = (*fleet)->probe("--ports 13 --rate 20000");
  ASSERT_TRUE(r1.ok()) << r1.err;
  auto db = db::Database::open((*fleet)->db_path());
  ASSERT_TRUE(db);
  auto an = db::load_anomalies(*db, 1);
  ASSERT_TRUE(an);
  ASSERT_EQ(an->size(), 1u) << r1.out;
  EXPECT_EQ((*an)[0].kind, "dead_link");
  EXPECT_EQ((*an)[0].detail, "spine 3 - leaf 2: no flow crossed it");
  auto rows = load_paths((*fleet)->db_path(), 1);
  ASSERT_TRUE(rows);
  EXPECT_EQ(mismatches(f, *rows, 17), 0);

  ASSERT_TRUE(f.restore_link(3, 2).is_ok());
  auto r2 = (*fleet)->probe("--ports 13 --rate 20000");
  ASSERT_TRUE(r2.ok()) << r2.err;
  EXPECT_NE(r2.out.find("campaign 2:"), std::string::npos) << r2.out;
  EXPECT_TRUE(db::load_anomalies(*db, 2)->empty()) << r2.out;
  auto inf2 = db::load_inference(*db, 2);
  ASSERT_TRUE(inf2);
  for (const auto& l : inf2->links) EXPECT_FALSE(l.dead) << l.spine << "-" << l.leaf;
}

int64_t count_rows(const std::string& path) {
  db::OpenOptions ro;
  ro.read_only = true;
  auto db = db::Database::open(path, ro);
  if (!db) return 0;
  auto n = db->query_int("SELECT COUNT(*) FROM observations");
  return n ? *n : 0;
}

TEST(ProbeResumeTest, KilledControllerLeavesASoundDbAndResumesWithoutDuplicates) {
  WEFT_SKIP_UNLESS_NETNS();
  auto fabric = NetnsFabric::create(FabricOptions::clos(4, 4, 2));
  ASSERT_TRUE(fabric) << fabric.status().to_string();
  NetnsFabric& f = **fabric;
  auto fleet = AgentFleet::start(f, test_dir());
  ASSERT_TRUE(fleet) << fleet.status().to_string();
  const std::string args = "--ports 64 --rate 150 --batch 200";  // 448 probes per host: ~3 s
  const pid_t ctl = (*fleet)->probe_async(args);
  ASSERT_GT(ctl, 0);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (count_rows((*fleet)->db_path()) < 400 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(30));
  }
  ASSERT_EQ(::kill(ctl, SIGKILL), 0);
  f.wait_child(ctl, 5000);

  std::vector<db::Observation> before;
  {
    auto db = db::Database::open((*fleet)->db_path());
    ASSERT_TRUE(db) << db.status().to_string();
    auto ic = db->prepare("PRAGMA integrity_check");
    ASSERT_TRUE(ic);
    ASSERT_TRUE(*ic->step());
    EXPECT_EQ(ic->column_text(0), "ok");
    EXPECT_EQ(db::get_campaign(*db, 1)->state, "running");
    before = *db::load_observations(*db, 1);
  }
  const size_t total = 8 * 7 * 64;
  ASSERT_GE(before.size(), 400u);
  ASSERT_LT(before.size(), total) << "the controller finished before it was killed: slow it down";
  std::cout << "[figure] killed with " << before.size() << " of " << total << " observations committed\n";

  auto r = (*fleet)->probe(args);
  ASSERT_TRUE(r.ok()) << r.err;
  EXPECT_NE(r.out.find("campaign 1 (resumed)"), std::string::npos) << r.out;
  auto db = db::Database::open((*fleet)->db_path());
  EXPECT_EQ(*db->query_int("SELECT COUNT(*) FROM observations"), static_cast<int64_t>(total));
  EXPECT_EQ(*db->query_int("SELECT COUNT(*) FROM (SELECT DISTINCT campaign_id, src_id, dst_id, protocol, sport, dport "
                           "FROM observations)"),
            static_cast<int64_t>(total));
  EXPECT_EQ(*db->query_int("SELECT COUNT(*) FROM campaigns"), 1);
  auto after = db::load_observations(*db, 1);
  ASSERT_TRUE(after);
  std::map<std::tuple<int64_t, int64_t, int>, db::Observation> by_key;
  for (const auto& o : *after) by_key[{o.src_id, o.dst_id, o.sport}] = o;
  for (const auto& o : before) EXPECT_EQ(by_key.at({o.src_id, o.dst_id, o.sport}), o) << "a committed row changed";
  auto rows = load_paths((*fleet)->db_path(), 1);
  ASSERT_TRUE(rows);
  EXPECT_EQ(mismatches(f, *rows, 17), 0);
}

}  // namespace
}  // namespace weft::test

namespace weft::test {
namespace {

// The path from the probe database drives the route planner: every planned
// cross-leaf flow's spine is the one the fabric really takes for that sport.
TEST(ProbeToRouteTest, PlanFromTheProbeDbUsesTheSpinesTheFabricTakes) {
  WEFT_SKIP_UNLESS_NETNS();
  auto fabric = NetnsFabric::create(FabricOptions::clos(4, 4, 2));
  ASSERT_TRUE(fabric) << fabric.status().to_string();
  NetnsFabric& f = **fabric;
  const std::string dir = test_dir();
  auto fleet = AgentFleet::start(f, dir, {"--tcp-port", "5201"});
  ASSERT_TRUE(fleet) << fleet.status().to_string();

  // TCP SYN probes of the data port (pcap on the reflectors) match the fabric too.
  auto tcp = (*fleet)->probe("--ports 16 --rate 20000 --backend tcp-syn --dport 5201");
  ASSERT_TRUE(tcp.ok()) << tcp.err;
  auto trows = load_paths((*fleet)->db_path(), 1);
  ASSERT_TRUE(trows);
  ASSERT_EQ(trows->size(), 8u * 7 * 16);
  EXPECT_EQ(mismatches(f, *trows, 6), 0);

  auto udp = (*fleet)->probe("--ports 64 --rate 20000");
  ASSERT_TRUE(udp.ok()) << udp.err;
  const std::string w = (*fleet)->weft();
  auto gen = run_shell(fmt::format("{} topo gen clos --spines 4 --leaves 4 --hosts 2 -o {}/t.json && "
                                   "{} rank --topology {}/t.json --all --format csv -o {}/ranks.csv && "
                                   "{} route --topology {}/t.json --ranks {}/ranks.csv --paths {} -o {}/plan.json 2>&1",
                                   w, dir, w, dir, dir, w, dir, dir, (*fleet)->db_path(), dir));
  ASSERT_TRUE(gen) << gen.status().to_string();
  EXPECT_NE(gen->find("max load 1"), std::string::npos) << *gen;
  auto text = run_shell(fmt::format("cat {}/plan.json", dir));
  ASSERT_TRUE(text);
  const auto plan = nlohmann::json::parse(*text);
  std::vector<FiveTuple> tuples;
  std::vector<int> planned;
  for (const auto& fl : plan["flows"]) {
    if (fl["path"].size() != 3) continue;  // same leaf
    const std::string src = fl["src_host"], dst = fl["dst_host"];
    tuples.push_back({f.host(src).ip, f.host(dst).ip, 17, fl["sport"].get<int>(), fl["dport"].get<int>()});
    planned.push_back(std::stoi(fl["path"][1].get<std::string>().substr(1)));  // "s3" -> 3
  }
  ASSERT_FALSE(tuples.empty());
  auto truth = f.ground_truth(tuples);
  ASSERT_TRUE(truth);
  EXPECT_EQ(*truth, planned) << "the plan's spines are the fabric's";

  // Targeted: only the HD pairs (8 ranks: r^1, r^2, r^4 = 24 directed pairs),
  // each stopping once it has a port on all 4 spines.
  auto tg = (*fleet)->probe("--ports 256 --rate 20000 --targeted allreduce-hd --spines 4");
  ASSERT_TRUE(tg.ok()) << tg.err;
  std::cout << "[figure] targeted 4x4x2 hd: " << tg.out;
  EXPECT_NE(tg.out.find("over 24 pairs"), std::string::npos) << tg.out;
  auto rows = load_paths((*fleet)->db_path(), 3);
  ASSERT_TRUE(rows);
  EXPECT_EQ(mismatches(f, *rows, 17), 0);
  std::map<std::pair<std::string, std::string>, std::set<int>> spines;
  std::map<std::pair<std::string, std::string>, int> ports;
  for (const auto& r : *rows) {
    spines[{r.src_ip, r.dst_ip}].insert(r.spine);
    ++ports[{r.src_ip, r.dst_ip}];
  }
  ASSERT_EQ(spines.size(), 24u);
  for (const auto& [pair, s] : spines) {
    const bool same_leaf = leaf_of(pair.first) == leaf_of(pair.second);
    EXPECT_EQ(s.size(), same_leaf ? 1u : 4u) << pair.first << " -> " << pair.second;
    EXPECT_LT(ports[pair], 256) << "stopped early";
    EXPECT_EQ(ports[pair] % 4, 0) << "windows of S ports";
  }
}

}  // namespace
}  // namespace weft::test
