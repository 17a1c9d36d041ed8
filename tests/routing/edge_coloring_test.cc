#include <gtest/gtest.h>

#include <random>
#include <set>

#include "weft/routing/edge_coloring.h"

namespace weft::routing {
namespace {

class KonigColouring : public ::testing::TestWithParam<int> {};

// Random regular-ish bipartite multigraphs: max-degree colours always suffice.
TEST_P(KonigColouring, UsesMaxDegreeColoursWithNoClashAtAnyVertex) {
  std::mt19937 rng(static_cast<uint32_t>(GetParam()));
  const int n = 1 + GetParam() % 40, k = 1 + GetParam() % 9;
  std::vector<BipartiteEdge> edges;
  // k rounds of a random permutation: every vertex has degree exactly k.
  for (int round = 0; round < k; ++round) {
    std::vector<int> perm(static_cast<size_t>(n));
    for (int i = 0; i < n; ++i) perm[static_cast<size_t>(i)] = i;
    std::shuffle(perm.begin(), perm.end(), rng);
    for (int i = 0; i < n; ++i) edges.push_back({i, perm[static_cast<size_t>(i)]});
  }
  std::shuffle(edges.begin(), edges.end(), rng);
  auto c = color_bipartite_edges(n, n, edges, k);
  ASSERT_TRUE(c) << c.status().message();
  std::set<std::pair<int, int>> left, right;
  for (size_t e = 0; e < edges.size(); ++e) {
    ASSERT_GE((*c)[e], 0);
    ASSERT_LT((*c)[e], k);
    ASSERT_TRUE(left.insert({edges[e].left, (*c)[e]}).second) << "colour clash at left " << edges[e].left;
    ASSERT_TRUE(right.insert({edges[e].right, (*c)[e]}).second) << "colour clash at right " << edges[e].right;
  }
}

INSTANTIATE_TEST_SUITE_P(Seeds, KonigColouring, ::testing::Range(1, 201));

TEST(KonigColouring, RefusesAVertexWithMoreEdgesThanColours) {
  auto c = color_bipartite_edges(2, 2, {{0, 0}, {0, 1}, {0, 1}}, 2);
  ASSERT_FALSE(c);
  EXPECT_EQ(c.status().message(), "left vertex 0 has more than 2 edges");
}

}  // namespace
}  // namespace weft::routing
