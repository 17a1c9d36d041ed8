// weft route --collective nccl-ring as the NCCL plugin's user meets it: a
// plan in which the plugin's lookup (RoutePlan::find_qp) finds every QP of
// every channel of every ring edge on a port of its own, replayed by weft
// check at its lower bound; and weft sim comparing it with ECMP.
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "cli_fixture.h"
#include "weft/routing/plan.h"

namespace {

// 4 spines x 3 leaves x 4 hosts, every NIC with an address, ranked in leaf
// sets: the ring leaves each leaf once, so each leaf's 2 x 4 QPs that cross
// go over its 4 uplinks (2 per uplink, the switch-link bound) and every
// access link carries its host's 8 QPs (the checker's bound).
class NcclRouteCli : public Cli {
 protected:
  void SetUp() override {
    Cli::SetUp();
    ASSERT_EQ(weft("topo gen clos --spines 4 --leaves 3 --hosts 4 -o " + path("f.json")).rc, 0);
    auto j = nlohmann::json::parse(weft::read_file(path("f.json")).value());
    int i = 0;
    for (auto& h : j["hosts"]) {
      for (auto& n : h["nics"]) {
        n["address"] = "10.0.0." + std::to_string(++i);
        address_[h["name"].get<std::string>()] = n["address"];
      }
    }
    write("f.json", j.dump());
    ASSERT_EQ(weft("rank --topology " + path("f.json") + " --all --algo clos -o " + path("r.csv")).rc, 0);
    // rank,host,nic,switch
    std::istringstream in(weft::read_file(path("r.csv")).value());
    std::string line;
    std::getline(in, line);
    while (std::getline(in, line)) rank_host_.push_back(line.substr(line.find(',') + 1, line.find(',', line.find(',') + 1) - line.find(',') - 1));
    ASSERT_EQ(rank_host_.size(), 12u);
  }
  std::string files() const { return "--topology " + path("f.json") + " --ranks " + path("r.csv") + " "; }
  std::map<std::string, std::string> address_;  // host -> its NIC's address
  std::vector<std::string> rank_host_;
};

TEST_F(NcclRouteCli, PlanHasEveryQpThePluginLooksUpAndCheckFindsItAtTheBound) {
  CliRun r = weft("route " + files() + "--collective nccl-ring --channels 2 --qps 4 -o " + path("plan.json"));
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.err.find("96 flows (24 cross leaves), max load 8 (lower bound 8), 2 of 2 steps at the bound; wrote"),
            std::string::npos)
      << r.err;
  auto plan = weft::routing::load_plan(path("plan.json"));
  ASSERT_TRUE(plan) << plan.status().message();
  EXPECT_EQ(plan->collective, "nccl-ring");
  ASSERT_EQ(plan->flows.size(), 12u * 2 * 4);
  std::set<std::pair<std::string, int>> host_ports;
  for (int rank = 0; rank < 12; ++rank) {
    const std::string& from = address_.at(rank_host_[static_cast<size_t>(rank)]);
    const std::string& to = address_.at(rank_host_[static_cast<size_t>((rank + 1) % 12)]);
    for (int conn = 0; conn < 2; ++conn) {
      std::set<int> ports;
      for (int qp = 0; qp < 4; ++qp) {
        const weft::routing::PlanFlow* f = plan->find_qp(from, to, conn, qp);
        ASSERT_NE(f, nullptr) << from << " -> " << to << " conn " << conn << " qp " << qp;
        EXPECT_EQ(f->src_rank, rank);
        EXPECT_EQ(f->protocol, "udp");
        EXPECT_EQ(f->dport, 4791);
        EXPECT_GE(f->sport, 49153) << "a flow label expresses ports 0xC001..0xFFFF";
        ports.insert(f->sport);
        EXPECT_TRUE(host_ports.emplace(f->src_host, f->sport).second) << f->src_host << " reuses " << f->sport;
      }
      EXPECT_EQ(ports.size(), 4u) << "four planned ports per connection";
    }
  }
  CliRun c = weft("check " + files() + "--collective nccl-ring --channels 2 --qps 4 --routes plan --plan " +
                  path("plan.json") + " --json");
  ASSERT_EQ(c.rc, 0) << c.err;
  auto j = nlohmann::json::parse(c.out);
  EXPECT_EQ(j["max_load"], 8);
  EXPECT_EQ(j["max_lower_bound"], 8);
  ASSERT_EQ(j["steps"].size(), 2u);
  for (const auto& st : j["steps"]) {
    EXPECT_EQ(st["flows"], 96);
    EXPECT_EQ(st["max_fabric_load"], 2) << st;
    EXPECT_EQ(st["fabric_lower_bound"], 2) << st;
  }
  // Without --channels / --qps the plan's shape is checked.
  CliRun same = weft("check " + files() + "--collective nccl-ring --routes plan --plan " + path("plan.json") + " --json");
  ASSERT_EQ(same.rc, 0) << same.err;
  EXPECT_EQ(nlohmann::json::parse(same.out)["max_load"], 8);
  // A shape that is not the plan's is refused naming both.
  for (std::string shape : {"--channels 4 --qps 4", "--channels 2 --qps 1", "--qps 2"}) {
    CliRun other = weft("check " + files() + "--collective nccl-ring " + shape + " --routes plan --plan " +
                        path("plan.json"));
    EXPECT_EQ(other.rc, 1) << shape;
    EXPECT_EQ(other.err, "weft: error: " + path("plan.json") + ": the plan has 2 channel(s) of 4 QP(s) per connection; " +
                             shape + (shape == "--qps 2" ? " differs" : " differ") +
                             " (leave them out to check the plan's)\n");
  }
}

TEST_F(NcclRouteCli, HelpTeachesTheCommandLine) {
  CliRun r = weft("route --help");
  ASSERT_EQ(r.rc, 0);
  EXPECT_NE(r.out.find("--collective nccl-ring"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("--channels 2 --qps 4 -o plan.json"), std::string::npos) << r.out;
}

TEST_F(NcclRouteCli, SimComparesThePlannedRingWithEcmp) {
  CliRun r = weft("sim --topology " + path("f.json") +
                  " --collective nccl-ring --channels 2 --qps 4 --size 4MiB --latency-us 0 --svg '' --json");
  ASSERT_EQ(r.rc, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j[0]["cases"].size(), 4u);
  const auto& ecmp = j[0]["cases"][0];
  const auto& planned = j[0]["cases"][2];
  const auto& ideal = j[0]["cases"][3];
  EXPECT_EQ(planned["case"], "(c) weft");
  EXPECT_EQ(planned["max_load"], 8) << "each access link carries its host's 8 QPs";
  EXPECT_GT(planned["busbw_GBps"].get<double>(), ecmp["busbw_GBps"].get<double>());
  // Without per-hop latency the planned ring is as fast as a crossbar: only
  // the access links, each with its host's 8 QPs, limit it.
  EXPECT_NEAR(planned["busbw_GBps"].get<double>(), ideal["busbw_GBps"].get<double>(),
              1e-6 * ideal["busbw_GBps"].get<double>());
}

// weft rank refuses an order that weft route --collective of the same job
// would refuse, in route's words, and writes no file.
struct UnroutableOrder {
  const char* name;
  const char* hosts;  // the allocation file
  const char* collective;
  const char* error;
};

class RankForRoute : public Cli, public ::testing::WithParamInterface<UnroutableOrder> {};

TEST_P(RankForRoute, AnOrderRouteWouldRefuseIsRefusedByRank) {
  ASSERT_EQ(weft("topo gen clos --spines 2 --leaves 2 --hosts 2 --nics 2 -o " + path("f.json")).rc, 0);
  write("alloc", GetParam().hosts);
  CliRun r = weft("rank --topology " + path("f.json") + " --hosts " + path("alloc") + " --collective " +
                  GetParam().collective + " -o " + path("r.txt"));
  EXPECT_NE(r.rc, 0);
  // Its last line (auto may say first which order it took).
  const std::string want = std::string("weft: error: --collective ") + GetParam().collective +
                           ": weft route would refuse this order: " + GetParam().error + "\n";
  ASSERT_GE(r.err.size(), want.size()) << r.err;
  EXPECT_EQ(r.err.substr(r.err.size() - want.size()), want);
  EXPECT_TRUE(r.err.size() == want.size() || r.err[r.err.size() - want.size() - 1] == '\n') << r.err;
  EXPECT_FALSE(std::filesystem::exists(path("r.txt")));
}

INSTANTIATE_TEST_SUITE_P(
    Cases, RankForRoute,
    ::testing::Values(
        UnroutableOrder{"nccl_ring_two_nics_of_a_host", "h1-1\nh2-1\n", "nccl-ring",
                        "nccl-ring needs one rank per host: ranks 0 and 1 both run on 'h1-1' (NCCL joins the GPUs of "
                        "one host inside it; rank each host's NIC once)"},
        UnroutableOrder{"hybrid_host_given_in_part", "h1-1\nh2-1:eth1\n", "allreduce-hybrid",
                        "hybrid allreduce needs the same number of ranks on every host: 'h1-1' has 2, 'h2-1' has 1"}),
    [](const auto& p) { return std::string(p.param.name); });

TEST_F(NcclRouteCli, SimRefusesChannelsForOtherCollectives) {
  CliRun r = weft("sim --topology " + path("f.json") + " --collective allreduce-hybrid --qps 2 --svg ''");
  EXPECT_NE(r.rc, 0);
  EXPECT_EQ(r.err, "weft: error: --qps is for --collective nccl-ring only, not allreduce-hybrid\n");
}

}  // namespace
