// The ECMP baseline router hashes with the fabric's model (EcmpOptions::hash):
// every flow takes the path its connection's 5-tuple walks when each switch
// picks by make_hash(model, seed) — the model the planner and the path table
// use — and an unknown model is an error naming it.
#include <gtest/gtest.h>

#include <string>

#include "weft/ranking/rank_order.h"
#include "weft/routing/router.h"
#include "weft/topology/builders.h"

namespace weft::routing {
namespace {

// A 3-tier fabric of awkward sizes, so a path takes up to three hashed
// decisions (leaf, aggregation, core) among 3 or 2 next hops.
topo::Fabric fabric() {
  return topo::build_clos3({.pods = 3, .leaves_per_pod = 2, .aggs_per_pod = 3, .cores = 6, .hosts_per_leaf = 2})
      .value();
}

// Every ordered pair of ranks, one step.
Step all_pairs(int ranks) {
  Step s;
  for (int a = 0; a < ranks; ++a) {
    for (int b = 0; b < ranks; ++b) {
      if (a != b) s.flows.push_back({.src = a, .dst = b, .bytes = 4});
    }
  }
  return s;
}

// The path of `fl` walked with `model`'s hash at every switch.
Path walked(const topo::Fabric& f, const ranking::RankOrder& order, const EcmpOptions& opt, const std::string& model,
            const Flow& fl) {
  auto hash = make_hash(model, opt.seed).value();
  const int s = order.nics[static_cast<size_t>(fl.src)], d = order.nics[static_cast<size_t>(fl.dst)];
  const FiveTuple t = ecmp_tuple(f, opt, hash->hashes_qpn(), fl, s, d);
  if (hash->hashes_qpn()) {
    EXPECT_GE(t.dqpn, kMinDataQpn);
    EXPECT_LE(t.dqpn, kMaxQpn);
  }
  PathFinder pf(f);
  return pf.route(s, d, [&](int sw, std::span<const int> c) { return hash->pick(t, sw, c.size()); }).value();
}

class EcmpRouterModel : public ::testing::TestWithParam<const char*> {};

TEST_P(EcmpRouterModel, RoutesEveryFlowAsTheModelsHashWalksIt) {
  const std::string model = GetParam();
  const topo::Fabric f = fabric();
  const ranking::RankOrder order{ranking::allocation_all(f)};
  const EcmpOptions opt{.hash = model, .seed = 11, .port_lo = 40001, .port_hi = 40777};
  auto router = make_ecmp_router(f, order, opt);
  ASSERT_TRUE(router) << router.status().message();
  EXPECT_EQ((*router)->name(), "ecmp");
  const Step step = all_pairs(order.size());
  ASSERT_EQ(step.flows.size(), 12u * 11u);
  std::vector<Path> paths(step.flows.size());
  ASSERT_TRUE((*router)->route_step(step, 0, paths));
  int unlike_crc32 = 0;
  for (size_t i = 0; i < step.flows.size(); ++i) {
    const Flow& fl = step.flows[i];
    EXPECT_EQ(paths[i], walked(f, order, opt, model, fl)) << model << ": rank " << fl.src << " -> " << fl.dst;
    if (paths[i] != walked(f, order, opt, "crc32", fl)) ++unlike_crc32;
  }
  // Without this the test could not tell the model from a router that always
  // hashes crc32 (the other models move 91-94 of the 132 flows here).
  if (model != "crc32") {
    EXPECT_GT(unlike_crc32, 66) << model << " routes like crc32 on this fabric";
  }
}

INSTANTIATE_TEST_SUITE_P(Models, EcmpRouterModel, ::testing::Values("crc32", "crc32-qp", "linux-l4", "linux-l3"),
                         [](const auto& p) {
                           std::string n = p.param;
                           for (char& c : n) c = c == '-' ? '_' : c;
                           return n;
                         });

TEST(EcmpRouter, UnknownModelIsAnErrorNamingIt) {
  const topo::Fabric f = fabric();
  const ranking::RankOrder order{ranking::allocation_all(f)};
  auto router = make_ecmp_router(f, order, {.hash = "jenkins"});
  ASSERT_FALSE(router);
  EXPECT_EQ(router.status().message(), "unknown hash model 'jenkins' (crc32, crc32-qp, linux-l4, linux-l3)");
}

}  // namespace
}  // namespace weft::routing
