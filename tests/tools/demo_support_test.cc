// The pieces of weft bench and weft demo that decide whether a run counts:
// the exact-result check, link utilisation from interface counters, and the
// allocation orders.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "bench_values.h"
#include "demo/demo_plan.h"
#include "demo/demo_report.h"
#include "demo/demo_timeline.h"
#include "demo/demo_worker.h"
#include "weft/topology/builders.h"

namespace weft::cli {
namespace {

using coll::DataType;
using coll::ReduceOp;

struct Case {
  const char* collective;
  DataType type;
  ReduceOp op;
  int ranks;
  size_t per;  // elements per rank block (reducescatter, allgather) or of the vector
};

// The output a correct collective leaves on rank `me`, element by element.
std::vector<char> reference(const Case& k, int me, size_t* elems) {
  const std::string c = k.collective;
  const size_t es = coll::dtype_size(k.type);
  const size_t n = c == "reducescatter" ? k.per : c == "allgather" ? k.per * static_cast<size_t>(k.ranks) : k.per;
  std::vector<char> out(n * es);
  for (size_t i = 0; i < n; ++i) {
    double v;
    if (c == "allgather") {
      v = input_of(c, k.op, static_cast<int>(i / k.per), i % k.per);
    } else if (c == "broadcast") {
      v = input_of(c, k.op, 0, i);
    } else {
      const size_t gi = c == "reducescatter" ? static_cast<size_t>(me) * k.per + i : i;
      v = input_of(c, k.op, 0, gi);
      for (int r = 1; r < k.ranks; ++r) v = combine(k.op, v, input_of(c, k.op, r, gi));
    }
    store_as(k.type, out.data(), i, v);
  }
  *elems = n;
  return out;
}

class CountWrong : public ::testing::TestWithParam<Case> {};

TEST_P(CountWrong, IsZeroOnTheExactResultAndCountsEveryWrongElement) {
  const Case& k = GetParam();
  const int me = k.ranks - 1;
  size_t n = 0;
  std::vector<char> out = reference(k, me, &n);
  const size_t elems = std::string(k.collective) == "allgather" ? n : k.per;
  EXPECT_EQ(count_wrong(k.collective, k.op, k.type, k.ranks, me, k.per, elems, out.data()), 0);
  // Flip the first, the last and elements either side of the 935-element period.
  const size_t es = coll::dtype_size(k.type);
  std::vector<size_t> flip = {0, n - 1};
  if (n > 936) flip.insert(flip.end(), {934, 935});
  std::sort(flip.begin(), flip.end());
  flip.erase(std::unique(flip.begin(), flip.end()), flip.end());
  for (size_t i : flip) out[i * es] = static_cast<char>(out[i * es] ^ 0x40);
  EXPECT_EQ(count_wrong(k.collective, k.op, k.type, k.ranks, me, k.per, elems, out.data()),
            static_cast<int64_t>(flip.size()));
}

INSTANTIATE_TEST_SUITE_P(
    Collectives, CountWrong,
    ::testing::Values(Case{"allreduce", DataType::kF32, ReduceOp::kSum, 13, 2003},
                      Case{"allreduce", DataType::kBF16, ReduceOp::kMax, 5, 7},
                      Case{"allreduce", DataType::kI32, ReduceOp::kProd, 7, 1023},
                      Case{"reducescatter", DataType::kF16, ReduceOp::kSum, 3, 1871},
                      Case{"allgather", DataType::kU8, ReduceOp::kSum, 5, 941},
                      Case{"broadcast", DataType::kF64, ReduceOp::kSum, 3, 2000}));

TEST(FillInput, EqualsInputOfElementByElement) {
  std::vector<float> v(2813);
  fill_input("allreduce", ReduceOp::kSum, DataType::kF32, 6, v.size(), v.data());
  for (size_t i = 0; i < v.size(); ++i) ASSERT_EQ(v[i], static_cast<float>(input_of("allreduce", ReduceOp::kSum, 6, i))) << i;
}

// 2 spines x 2 leaves x 2 hosts at 80 Mbit/s (10 MB/s): counters over 2 s.
TEST(MeasuredUtilisation, MapsSpinePortsAndLeafPortsOntoTheFabricsDirectedLinks) {
  auto f = topo::build_clos2({.spines = 2, .leaves = 2, .hosts_per_leaf = 2, .fabric_gbps = 0.08, .access_gbps = 0.08});
  ASSERT_TRUE(f);
  demo::FabricCounters c;
  for (int s = 1; s <= 2; ++s) {
    for (int l = 1; l <= 2; ++l) {
      c.spine_leaf[{s, l, true}] = static_cast<uint64_t>(1000000 * (s * 10 + l));       // leaf -> spine
      c.spine_leaf[{s, l, false}] = static_cast<uint64_t>(100000 * (s * 10 + l));       // spine -> leaf
    }
  }
  for (const char* h : {"h1-1", "h1-2", "h2-1", "h2-2"}) {
    c.host[{h, true}] = 20000000;  // host -> leaf: 100%
    c.host[{h, false}] = 5000000;  // 25%
  }
  auto u = demo::measured_utilisation(*f, c, 2.0, 80);
  ASSERT_TRUE(u) << u.status().to_string();
  auto dir = [&](const std::string& from, const std::string& to) {
    auto vf = f->find_switch(from) ? f->switch_vertex(*f->find_switch(from)) : *f->find_nic(from);
    auto vt = f->find_switch(to) ? f->switch_vertex(*f->find_switch(to)) : *f->find_nic(to);
    return (*u)[static_cast<size_t>(f->directed_from(*f->link_between(vf, vt), vf))];
  };
  EXPECT_DOUBLE_EQ(dir("l2", "s1"), 12e6 / 20e6);  // spine 1's port to leaf 2 received 12 MB
  EXPECT_DOUBLE_EQ(dir("s1", "l2"), 1.2e6 / 20e6);
  EXPECT_DOUBLE_EQ(dir("l1", "s2"), 21e6 / 20e6);  // over 100%: the counters say so
  EXPECT_DOUBLE_EQ(dir("h2-1", "l2"), 1.0);
  EXPECT_DOUBLE_EQ(dir("l2", "h2-1"), 0.25);
  c.host.erase({"h1-2", true});
  EXPECT_FALSE(demo::measured_utilisation(*f, c, 2.0, 80)) << "a link without counters is an error, not 0%";
}

TEST(AllocationOrder, InterleavedGoesRoundRobinOverLeavesSortedKeepsShuffledPermutes) {
  const std::vector<std::string> hosts = {"h1-1", "h1-2", "h1-3", "h2-1", "h2-2", "h2-3"};
  demo::DemoConfig cfg;
  cfg.leaves = 2;
  cfg.hosts_per_leaf = 3;
  cfg.order = "interleaved";
  EXPECT_EQ(demo::allocation_order(hosts, cfg),
            (std::vector<std::string>{"h1-1", "h2-1", "h1-2", "h2-2", "h1-3", "h2-3"}));
  cfg.order = "sorted";
  EXPECT_EQ(demo::allocation_order(hosts, cfg), hosts);
  cfg.order = "shuffled";
  auto s = demo::allocation_order(hosts, cfg);
  EXPECT_NE(s, hosts);
  std::sort(s.begin(), s.end());
  EXPECT_EQ(s, hosts);
  EXPECT_EQ(demo::allocation_order(hosts, cfg), demo::allocation_order(hosts, cfg)) << "seeded";
}

}  // namespace
}  // namespace weft::cli

namespace weft::cli {
namespace {

using demo::SeriesCall;

// busbw of a phase is its calls' bytes over their time, by start: calls of
// 2 s at 10 MB/s and 1 s at 40 MB/s move 20 + 40 MB in 3 s = 20 MB/s.
TEST(PhaseBusbw, IsTheBytesOfTheCallsThatStartedInThePhaseOverTheirTime) {
  const std::vector<SeriesCall> calls = {{0.0, 2.0, 10e6, 0}, {2.0, 1.0, 40e6, 0}, {3.0, 4.0, 5e6, 0},
                                         {7.0, 0.5, 40e6, 0}};
  EXPECT_DOUBLE_EQ(demo::phase_busbw(calls, 0, 3), 20e6);
  EXPECT_DOUBLE_EQ(demo::phase_busbw(calls, 3, 7), 5e6);
  EXPECT_DOUBLE_EQ(demo::phase_busbw(calls, 7, 1e300), 40e6);
  EXPECT_DOUBLE_EQ(demo::phase_busbw(calls, 2.5, 3), 0) << "no call started in it";
  EXPECT_DOUBLE_EQ(demo::phase_busbw(calls, 0, 1e300), (20e6 + 40e6 + 20e6 + 20e6) / 7.5);
}

TEST(Timeline, TableSvgAndJsonSayWhatHappenedWhen) {
  demo::DemoConfig cfg;
  cfg.fail_during = demo::DemoConfig::FaultDuring{2, 3, 3.0, 6.0};
  cfg.call_bytes = 4 << 20;
  demo::TimelineRun run{"(a) ECMP",
                        {{0.0, 1.0, 25e6, 0}, {1.0, 2.5, 10e6, 0}, {3.5, 3.0, 1e6, 0}, {6.5, 1.0, 25e6, 0}},
                        {{3.0, 3.01, "cut"}, {3.5, 3.52, "withdrawn"}, {6.0, 6.0, "restored"}}};
  const std::string table = demo::timeline_table(cfg, {run});
  EXPECT_NE(table.find("(a) ECMP"), std::string::npos) << table;
  // before: (25 + 25) MB in 3.5 s; during: 1 MB/s; after: 25 MB/s; longest 3 s.
  EXPECT_NE(table.find(fmt::format("{:>11.1f} {:>11.1f} {:>11.1f} {:>11.2f} s", 50e6 / 3.5 * 8 / 1e6, 8.0, 200.0, 3.0)),
            std::string::npos)
      << table;
  EXPECT_NE(table.find("cut at 3.0 s, withdrawn at 3.5 s, restored at 6.0 s"), std::string::npos) << table;
  const std::string svg = demo::timeline_svg(cfg, {run});
  EXPECT_NE(svg.find(">withdrawn</text>"), std::string::npos);
  EXPECT_NE(svg.find("spine 2 - leaf 3 fails mid-job"), std::string::npos);
  const auto j = nlohmann::json::parse(demo::timeline_json(cfg, {run}));
  ASSERT_EQ(j["runs"][0]["calls"].size(), 4u);
  EXPECT_DOUBLE_EQ(j["runs"][0]["calls"][2]["busbw_mbit"].get<double>(), 8.0);
  EXPECT_DOUBLE_EQ(j["runs"][0]["events"][1]["at_s"].get<double>(), 3.52);
}

// Each worker holds the data, a scratch buffer of the same size and 16 MiB
// besides; a demo whose workers do not fit is refused with the figures.
TEST(WorkersMemory, IsTwoBuffersAndTheOverheadPerWorkerAndRefusesWhatDoesNotFit) {
  EXPECT_EQ(demo::workers_memory_bytes(16, 64ull << 20), 16 * (128ull << 20) + 16 * (16ull << 20));
  EXPECT_EQ(demo::workers_memory_bytes(3, 4), 3 * (8 + (16ull << 20)));
  const uint64_t need = 16 * ((2ull << 30) + (16ull << 20));  // 16 workers of a 1 GiB demo: 32.2 GiB
  EXPECT_TRUE(demo::check_workers_memory("--size", 16, 1ull << 30, need));
  const Status st = demo::check_workers_memory("--size", 16, 1ull << 30, need - 1);
  EXPECT_EQ(st.message(),
            "--size 1.0 GiB needs about 32.2 GiB of memory for 16 rank workers (each holds the data and a scratch "
            "buffer of that size); 32.2 GiB is available");
  EXPECT_EQ(demo::check_workers_memory("--call-size", 16, 5ull << 30, 23ull << 30).message(),
            "--call-size 5.0 GiB needs about 160.2 GiB of memory for 16 rank workers (each holds the data and a "
            "scratch buffer of that size); 23.0 GiB is available");
  const auto available = demo::mem_available_bytes();
  ASSERT_TRUE(available.has_value()) << "/proc/meminfo has MemAvailable since Linux 3.14";
  EXPECT_GT(*available, 0u);
}

}  // namespace
}  // namespace weft::cli
