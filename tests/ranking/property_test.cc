// Property tests over 1000 random allocations on random 2-tier Clos fabrics
// (up to 64 leaves x 32 hosts, 1-4 NICs per host):
//  - every algorithm's order is a permutation of the allocation;
//  - every rank file format reads back (NIC-carrying formats exactly,
//    host-only formats host by host; torchrun either reads back or says why
//    it cannot express the order);
//  - the checker's per-link flow and byte sums equal a brute-force count
//    made here from the routed paths, after checking each path is a real walk
//    from the source NIC to the destination NIC over links that are up.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>

#include "weft/ranking/rank_file.h"
#include "weft/routing/link_load.h"
#include "weft/topology/builders.h"

namespace weft::ranking {
namespace {

// 1000 cases in 4 shards of 250, so ctest -j spreads them over the cores.
constexpr int kShards = 4;
constexpr int kCasesPerShard = 250;

struct Brute {
  int flows = 0;
  uint64_t bytes = 0;
};

void expect_checker_matches_brute_force(const topo::Fabric& f, const RankOrder& order, routing::Collective coll,
                                        uint32_t seed, int case_no) {
  auto sched = routing::build_schedule(coll, order.size(), 1 + seed % 5000, 4);
  ASSERT_TRUE(sched);
  auto router = seed % 2 ? routing::make_ideal_router(f, order)
                         : routing::make_ecmp_router(f, order, routing::EcmpOptions{.seed = seed}).value();
  auto rep = routing::check_link_load(f, order, *sched, *router, {.keep_per_link = true, .keep_paths = true});
  ASSERT_TRUE(rep) << rep.status().message();
  ASSERT_EQ(rep->steps.size(), sched->steps.size());
  int max_seen = 0;
  for (size_t si = 0; si < sched->steps.size(); ++si) {
    const auto& step = sched->steps[si];
    const auto& sl = rep->steps[si];
    std::map<std::pair<int, int>, Brute> count;  // (from vertex, to vertex)
    for (size_t i = 0; i < step.flows.size(); ++i) {
      const auto& p = sl.paths[i].dlinks;
      int at = f.nic_vertex(order.nics[step.flows[i].src]);
      for (int dl : p) {
        const auto& lk = f.links[static_cast<size_t>(dl / 2)];
        ASSERT_EQ(lk.state, topo::LinkState::kUp);
        int from = dl % 2 == 0 ? lk.a : lk.b, to = dl % 2 == 0 ? lk.b : lk.a;
        ASSERT_EQ(from, at) << "case " << case_no << ": path is not a walk";
        auto& b = count[{from, to}];
        ++b.flows;
        b.bytes += step.flows[i].bytes;
        at = to;
      }
      ASSERT_EQ(at, f.nic_vertex(order.nics[step.flows[i].dst])) << "case " << case_no << ": path ends elsewhere";
    }
    for (size_t dl = 0; dl < sl.load.size(); ++dl) {
      const auto& lk = f.links[dl / 2];
      int from = dl % 2 == 0 ? lk.a : lk.b, to = dl % 2 == 0 ? lk.b : lk.a;
      auto it = count.find({from, to});
      Brute b = it == count.end() ? Brute{} : it->second;
      ASSERT_EQ(sl.load[dl], b.flows) << "case " << case_no << " step " << si << " link " << f.directed_name(static_cast<int>(dl));
      ASSERT_EQ(sl.bytes[dl], b.bytes) << "case " << case_no << " step " << si;
      max_seen = std::max(max_seen, b.flows);
    }
  }
  EXPECT_EQ(rep->max_load, max_seen);
}

class RankingProperties : public ::testing::TestWithParam<int> {};

TEST_P(RankingProperties, HoldOverRandomAllocations) {
  std::mt19937 rng(20261122u + static_cast<uint32_t>(GetParam()));
  auto uni = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  std::map<RankFormat, int> refused;
  for (int c = GetParam() * kCasesPerShard; c < (GetParam() + 1) * kCasesPerShard; ++c) {
    const int leaves = uni(1, 64), hosts = uni(1, 32), nics = uni(1, 4);
    auto f = topo::build_clos2({.spines = uni(1, 16), .leaves = leaves, .hosts_per_leaf = hosts, .nics_per_host = nics});
    ASSERT_TRUE(f);
    // A random subset: whole hosts or single NICs, in random order. Large
    // fabrics get a thin allocation so the suite stays fast.
    const double keep = std::min(1.0, 600.0 / static_cast<double>(f->nics.size())) * uni(10, 100) / 100.0;
    std::vector<int> alloc;
    for (const auto& h : f->hosts) {
      for (int n : h.nics) {
        if (std::uniform_real_distribution<double>(0, 1)(rng) < keep) alloc.push_back(n);
      }
    }
    if (alloc.empty()) alloc.push_back(uni(0, static_cast<int>(f->nics.size()) - 1));
    std::shuffle(alloc.begin(), alloc.end(), rng);
    std::vector<int> sorted_alloc = alloc;
    std::sort(sorted_alloc.begin(), sorted_alloc.end());

    for (auto algo : {RankAlgo::kNaive, RankAlgo::kClos, RankAlgo::kRing, RankAlgo::kAuto}) {
      auto order = rank(*f, alloc, algo);
      ASSERT_TRUE(order) << order.status().message();
      std::vector<int> got = order->nics;
      std::sort(got.begin(), got.end());
      ASSERT_EQ(got, sorted_alloc) << "case " << c << " algo " << rank_algo_name(algo) << " is not a permutation";
    }
    auto order = rank(*f, alloc, c % 3 == 0 ? RankAlgo::kNaive : RankAlgo::kClos);
    ASSERT_TRUE(order);
    for (auto fmt : {RankFormat::kOpenMpi, RankFormat::kMpich, RankFormat::kSlurm, RankFormat::kHccl,
                     RankFormat::kTorchrun, RankFormat::kCsv}) {
      // Every file written reads back to the very NICs ranked; an order a
      // format cannot carry is refused, never written to read back otherwise.
      auto text = format_rank_file(*f, *order, fmt);
      if (!text) {
        const std::string why = std::string(rank_format_name(fmt)) + " cannot express this order";
        ASSERT_FALSE(format_carries_nics(fmt) && fmt != RankFormat::kHccl) << text.status().message();
        ASSERT_EQ(text.status().message().rfind(why, 0), 0u) << text.status().message();
        ++refused[fmt];
        continue;
      }
      auto back = parse_rank_file(*f, *text, fmt);
      ASSERT_TRUE(back) << "case " << c << " " << rank_format_name(fmt) << ": " << back.status().message();
      ASSERT_EQ(back->nics, order->nics) << "case " << c << " " << rank_format_name(fmt);
    }
    expect_checker_matches_brute_force(*f, *order,
                                       c % 4 == 3 ? routing::Collective::kAllreduceRing : routing::Collective::kAllreduceHd,
                                       static_cast<uint32_t>(rng()), c);
    if (HasFatalFailure()) return;
  }
  for (const auto& [fmt, n] : refused) {
    std::printf("%s refused %d of %d orders\n", std::string(rank_format_name(fmt)).c_str(), n, kCasesPerShard);
  }
}

INSTANTIATE_TEST_SUITE_P(Shards, RankingProperties, ::testing::Range(0, kShards));

}  // namespace
}  // namespace weft::ranking
