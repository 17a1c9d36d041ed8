// Single-failure tomography (routing/weft/routing/localise.h) on a spine-leaf
// fabric: every directed spine-leaf link failed in turn, ambiguous and
// unexplained losses, and a restored link.
#include "weft/routing/localise.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace weft::routing {
namespace {

constexpr int kSpines = 4, kLeaves = 4;

int up(int leaf, int spine) { return (leaf * kSpines + spine) * 2; }      // leaf -> spine
int down(int spine, int leaf) { return (leaf * kSpines + spine) * 2 + 1; }  // spine -> leaf

// A probed 5-tuple from leaf a to leaf b over `spine`; its reply goes back
// over `reply_spine` (the truth the prober does not know).
struct Tuple {
  int a, b, spine, reply_spine;
};

int reverse(int e) { return e ^ 1; }

ProbedPath path_of(const Tuple& t, int failed_link, int failed_too = -1) {
  ProbedPath p;
  p.forward = {up(t.a, t.spine), down(t.spine, t.b)};
  for (int s = 0; s < kSpines; ++s) {
    p.reply_may_cross.push_back(up(t.b, s));
    p.reply_may_cross.push_back(down(s, t.a));
  }
  const std::vector<int> actual = {up(t.a, t.spine), down(t.spine, t.b), up(t.b, t.reply_spine),
                                   down(t.reply_spine, t.a)};
  bool lost = false;
  for (int e : actual) lost |= e == failed_link || e == failed_too;
  p.health = lost ? PathHealth::kFailing : PathHealth::kHealthy;
  return p;
}

// One tuple per spine per ordered leaf pair, replies spread over the spines
// by a fixed rule (as a hash would: not equal to the forward spine in general).
std::vector<Tuple> one_per_spine_per_pair() {
  std::vector<Tuple> ts;
  for (int a = 0; a < kLeaves; ++a)
    for (int b = 0; b < kLeaves; ++b)
      for (int s = 0; a != b && s < kSpines; ++s) ts.push_back({a, b, s, (a * 7 + b * 3 + s * 5) % kSpines});
  return ts;
}

std::vector<ProbedPath> probe(const std::vector<Tuple>& ts, int failed_link, int failed_too = -1) {
  std::vector<ProbedPath> ps;
  for (const Tuple& t : ts) ps.push_back(path_of(t, failed_link, failed_too));
  return ps;
}

class EveryDirectedLink : public ::testing::TestWithParam<int> {};

TEST_P(EveryDirectedLink, IsLocalisedExactly) {
  const int failed = GetParam();
  const Localisation l = localise(probe(one_per_spine_per_pair(), failed));
  EXPECT_EQ(l.verdict, Verdict::kLocalised) << verdict_name(l.verdict);
  EXPECT_EQ(l.links, std::vector<int>{failed});
  EXPECT_GT(l.healthy, 0);
}

std::string link_name(const ::testing::TestParamInfo<int>& p) {
  const int leaf = p.param / 2 / kSpines, spine = p.param / 2 % kSpines;
  return p.param % 2 ? "s" + std::to_string(spine) + "_to_l" + std::to_string(leaf)
                     : "l" + std::to_string(leaf) + "_to_s" + std::to_string(spine);
}

INSTANTIATE_TEST_SUITE_P(Fabric4x4, EveryDirectedLink, ::testing::Range(0, 2 * kSpines * kLeaves), link_name);

// A cut cable drops both directions: no single directed link explains the
// losses, the cable does, and with `reverse` it is named (both directions).
class EveryCable : public ::testing::TestWithParam<int> {};

TEST_P(EveryCable, IsLocalisedAsBothDirections) {
  const int leaf = GetParam() / kSpines, spine = GetParam() % kSpines;
  const auto ps = probe(one_per_spine_per_pair(), up(leaf, spine), down(spine, leaf));
  EXPECT_EQ(localise(ps).verdict, Verdict::kUnexplained) << "directed links only";
  const Localisation l = localise(ps, reverse);
  EXPECT_EQ(l.verdict, Verdict::kLocalised) << verdict_name(l.verdict);
  EXPECT_TRUE(l.cable);
  EXPECT_EQ(l.links, (std::vector<int>{up(leaf, spine), down(spine, leaf)}));
}

INSTANTIATE_TEST_SUITE_P(Fabric4x4, EveryCable, ::testing::Range(0, kSpines * kLeaves));

TEST(Localise, ASingleDirectedLinkIsNotTakenForItsCable) {
  const Localisation l = localise(probe(one_per_spine_per_pair(), down(2, 1)), reverse);
  EXPECT_FALSE(l.cable);
  EXPECT_EQ(l.links, std::vector<int>{down(2, 1)});
}

TEST(Localise, NoFailingPathIsNoVerdict) {
  const Localisation l = localise(probe(one_per_spine_per_pair(), /*failed_link=*/-1));
  EXPECT_EQ(l.verdict, Verdict::kNone);
  EXPECT_TRUE(l.links.empty());
  EXPECT_EQ(l.failing, 0);
  EXPECT_EQ(l.healthy, kLeaves * (kLeaves - 1) * kSpines);
}

TEST(Localise, ARestoredLinkLeavesNoVerdict) {
  const auto ts = one_per_spine_per_pair();
  ASSERT_EQ(localise(probe(ts, down(2, 3))).links, std::vector<int>{down(2, 3)});
  EXPECT_EQ(localise(probe(ts, -1)).verdict, Verdict::kNone);
}

TEST(Localise, OneFailingPathAloneIsAmbiguousBetweenItsTwoLinks) {
  // A single tuple l0 -> s1 -> l2, failing: both of its links are candidates.
  const std::vector<Tuple> ts = {{0, 2, 1, 3}};
  const Localisation l = localise(probe(ts, down(1, 2)));
  EXPECT_EQ(l.verdict, Verdict::kAmbiguous);
  EXPECT_EQ(l.links, (std::vector<int>{up(0, 1), down(1, 2)}));
}

TEST(Localise, AHealthyPathOverOneOfTheLinksResolvesTheAmbiguity) {
  // l0 -> s1 -> l2 fails; l0 -> s1 -> l3 is healthy: l0 -> s1 is cleared.
  const std::vector<Tuple> ts = {{0, 2, 1, 3}, {0, 3, 1, 0}};
  const Localisation l = localise(probe(ts, down(1, 2)));
  EXPECT_EQ(l.verdict, Verdict::kLocalised);
  EXPECT_EQ(l.links, std::vector<int>{down(1, 2)});
}

TEST(Localise, TwoFailedLinksOnDisjointPathsAreUnexplained) {
  std::vector<ProbedPath> ps = probe({{0, 1, 0, 0}, {2, 3, 2, 2}, {1, 0, 1, 1}, {3, 2, 3, 3}}, -1);
  ps[0].health = PathHealth::kFailing;
  ps[1].health = PathHealth::kFailing;
  const Localisation l = localise(ps, reverse);  // not one cable either
  EXPECT_EQ(l.verdict, Verdict::kUnexplained);
  EXPECT_TRUE(l.links.empty());
  EXPECT_EQ(l.failing, 2);
  EXPECT_EQ(l.healthy, 2);
}

TEST(Localise, PathsOfUnknownHealthNeitherClearNorAccuse) {
  const auto ts = one_per_spine_per_pair();
  std::vector<ProbedPath> ps = probe(ts, up(1, 2));
  // Tuples not yet settled (a loss or two, not a streak) say nothing.
  for (size_t i = 0; i < ps.size(); i += 3) ps[i].health = PathHealth::kUnknown;
  const Localisation l = localise(ps);
  EXPECT_EQ(l.links, std::vector<int>{up(1, 2)});
}

TEST(Localise, ALossOfRepliesOnlyIsExplainedByTheLinkTheyMayCross) {
  // s1 -> l0 fails. l0 -> l1 over s2 loses only its replies (they come back
  // over s1); the healthy tuples clear every other suspect.
  const std::vector<Tuple> ts = {{1, 0, 1, 0}, {0, 1, 2, 1}, {2, 0, 2, 2}, {1, 2, 1, 0}, {0, 2, 2, 3}, {3, 1, 2, 3}};
  const std::vector<ProbedPath> ps = probe(ts, down(1, 0));
  ASSERT_EQ(ps[1].health, PathHealth::kFailing);
  const Localisation l = localise(ps);
  EXPECT_EQ(l.verdict, Verdict::kLocalised) << verdict_name(l.verdict);
  EXPECT_EQ(l.links, std::vector<int>{down(1, 0)});
  EXPECT_EQ(l.failing, 2);
  EXPECT_EQ(l.healthy, 4);
}

}  // namespace
}  // namespace weft::routing
