// E-ECMP (--hash crc32-qp) as a user meets it: weft route plans a "dqpn" per
// flow (from --qpn-pool or the default pool), weft check replays the plan,
// weft sim compares planned, ECMP (random QPNs) and ideal; bad input is one
// line, a non-zero exit and no output file.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include <nlohmann/json.hpp>

#include "cli_fixture.h"
#include "weft/routing/plan.h"

namespace {

class EecmpCli : public Cli {
 protected:
  void SetUp() override {
    Cli::SetUp();
    ASSERT_EQ(weft("topo gen clos --spines 4 --leaves 3 --hosts 4 -o " + path("f.json")).rc, 0);
    ASSERT_EQ(weft("rank --topology " + path("f.json") + " --all --algo clos -o " + path("r.csv")).rc, 0);
    // 12 ranks, rank r publishes QPNs 1000 + 10 r .. + 3.
    nlohmann::json pool = nlohmann::json::array();
    for (int r = 0; r < 12; ++r) pool.push_back({1000 + 10 * r, 1001 + 10 * r, 1002 + 10 * r, 1003 + 10 * r});
    write("pool.json", nlohmann::json{{"qpns", pool}}.dump());
  }
  std::string base() const { return "route --topology " + path("f.json") + " --ranks " + path("r.csv") + " "; }
  std::string check(const std::string& plan) const {
    return "check --topology " + path("f.json") + " --ranks " + path("r.csv") + " --routes plan --plan " + path(plan) +
           " --json";
  }
};

// Every flow that leaves its NIC names one of its destination's QPNs, no QPN
// serves two flows, and weft check replays the plan at load 1.
TEST_F(EecmpCli, RoutePlansADqpnPerFlowFromThePoolAndCheckReplaysIt) {
  for (const bool file : {true, false}) {
    CliRun r = weft(base() + "--hash crc32-qp " + (file ? "--qpn-pool " + path("pool.json") : "") + " -o " +
                    path("plan.json"));
    ASSERT_EQ(r.rc, 0) << r.err;
    EXPECT_NE(r.err.find("8 of 8 steps at the bound; wrote"), std::string::npos) << r.err;
    auto plan = weft::routing::load_plan(path("plan.json"));
    ASSERT_TRUE(plan) << plan.status().message();
    std::set<std::pair<int, uint32_t>> held;
    for (const auto& f : plan->flows) {
      // Default pool: rank r's QPNs 0x100 + 8 r + j, j < 8 (docs/route-plan.md).
      const uint32_t lo = file ? 1000u + 10u * static_cast<uint32_t>(f.dst_rank)
                               : 0x100u + 8u * static_cast<uint32_t>(f.dst_rank);
      const uint32_t n = file ? 4 : 8;
      EXPECT_GE(f.dqpn, lo) << f.src_rank << " -> " << f.dst_rank;
      EXPECT_LT(f.dqpn, lo + n) << f.src_rank << " -> " << f.dst_rank;
      EXPECT_TRUE(held.emplace(f.dst_rank, f.dqpn).second) << "QPN " << f.dqpn << " serves two flows";
    }
    CliRun c = weft(check("plan.json"));
    ASSERT_EQ(c.rc, 0) << c.err;
    EXPECT_EQ(nlohmann::json::parse(c.out)["max_load"], 1);
  }
  // Plain crc32: no dqpn in the plan file at all.
  ASSERT_EQ(weft(base() + "-o " + path("plain.json")).rc, 0);
  EXPECT_EQ(weft::read_file(path("plain.json")).value().find("dqpn"), std::string::npos);
}

TEST_F(EecmpCli, SimPrintsPlannedEcmpAndIdealForTheQpnModel) {
  CliRun r = weft("sim --topology " + path("f.json") + " --hash crc32-qp --size 1MiB --svg ''");
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.out.find("crc32-qp ECMP"), std::string::npos) << r.out;
  for (const char* row : {"(a) default", "(b) leaf sets + ECMP", "(c) weft", "(d) ideal switch"}) {
    EXPECT_NE(r.out.find(row), std::string::npos) << row << " in\n" << r.out;
  }
  CliRun j = weft("sim --topology " + path("f.json") + " --hash crc32-qp --size 1MiB --svg '' --json");
  ASSERT_EQ(j.rc, 0) << j.err;
  EXPECT_EQ(nlohmann::json::parse(j.out)[0]["cases"][2]["max_load"], 1) << "planned (sport, dqpn): load 1";
}

// A dqpn on a tcp flow (a hand-edited plan) is refused when read.
TEST_F(EecmpCli, CheckRefusesAPlanWithADqpnOnATcpFlow) {
  ASSERT_EQ(weft(base() + "--protocol tcp -o " + path("tcp.json")).rc, 0);
  auto j = nlohmann::json::parse(weft::read_file(path("tcp.json")).value());
  j["flows"][0]["dqpn"] = 300;
  write("bad.json", j.dump());
  CliRun c = weft(check("bad.json"));
  EXPECT_NE(c.rc, 0);
  EXPECT_EQ(c.err, "weft: error: " + path("bad.json") +
                       ": route plan /flows/0/dqpn: a destination QP on a tcp flow (QPs are RoCE's: udp flows only)\n");
}

struct BadEecmp {
  const char* name;
  const char* args;   // $F = f.json, $R = r.csv, $P = pool.json, $D = bad.json
  const char* pool;   // written to bad.json
  const char* error;  // the stderr line ($D: bad.json's path)
};

class EecmpCliBad : public EecmpCli, public ::testing::WithParamInterface<BadEecmp> {};

TEST_P(EecmpCliBad, PrintsOneLineExitsNonZeroAndWritesNothing) {
  write("bad.json", GetParam().pool);
  auto expand = [&](std::string s) {
    for (auto [key, file] : {std::pair{"$F", "f.json"}, {"$R", "r.csv"}, {"$P", "pool.json"}, {"$D", "bad.json"}}) {
      for (auto at = s.find(key); at != std::string::npos; at = s.find(key)) s.replace(at, 2, path(file));
    }
    return s;
  };
  const std::string args = expand(GetParam().args);
  CliRun r = weft(args.starts_with("route") ? args + " -o " + path("out.json") : args);
  EXPECT_NE(r.rc, 0);
  EXPECT_EQ(r.err, "weft: error: " + expand(GetParam().error) + "\n");
  EXPECT_FALSE(fs::exists(path("out.json")));
}

INSTANTIATE_TEST_SUITE_P(
    Cases, EecmpCliBad,
    ::testing::Values(
        BadEecmp{"pool_with_a_model_blind_to_qpns", "route --topology $F --ranks $R --qpn-pool $P", "",
                 "a QPN pool needs a fabric whose switches hash the destination QP (--hash crc32-qp); model crc32 "
                 "does not, so QPNs cannot change a path"},
        BadEecmp{"qpn_model_over_tcp", "route --topology $F --ranks $R --hash crc32-qp --protocol tcp", "",
                 "model crc32-qp hashes the RoCEv2 destination QP, but protocol tcp has none: plan udp (RoCEv2) "
                 "flows, or use a model without QPNs"},
        BadEecmp{"pool_of_other_ranks", "route --topology $F --ranks $R --hash crc32-qp --qpn-pool $D",
                 R"({"qpns": [[5], [6]]})", "--qpn-pool: $D: QPN pool /qpns: 2 lists for 12 ranks (one per rank)"},
        BadEecmp{"pool_qpn_wider_than_24_bits", "route --topology $F --ranks $R --hash crc32-qp --qpn-pool $D",
                 R"({"qpns": [[5],[6],[7],[8],[9],[10],[11],[12],[13],[14],[15],[16777216]]})",
                 "--qpn-pool: $D: QPN pool /qpns/11/0: 16777216 is not a data QP number (2..16777215)"},
        BadEecmp{"pool_too_small", "route --topology $F --ranks $R --hash crc32-qp --qpn-pool $D",
                 R"({"qpns": [[5],[6],[7],[8],[9],[10],[11],[12],[13],[14],[15],[16]]})",
                 "no free QPN for rank 1 (h1-2:eth0) -> rank 3 (h1-4:eth0): each of rank 3's 1 QPN serves another "
                 "flow into it (an RC QP connects to one remote QP), and 4 flows come into it: publish at least 4 "
                 "QPNs per rank (--qpn-pool)"},
        BadEecmp{"check_ecmp_unknown_hash", "check --topology $F --ranks $R --routes ecmp --hash NOPE", "",
                 "unknown hash model 'NOPE' (crc32, crc32-qp, linux-l4, linux-l3)"}),
    [](const auto& p) { return std::string(p.param.name); });

}  // namespace
