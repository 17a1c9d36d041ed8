// The planner's second thread (PlannerOptions::second_thread): the next
// class's candidates fetched while one is coloured, the plan judged while it
// is written. The plan and its figures must be exactly those of one thread,
// on every fabric kind the planner colours differently, and a path table
// that fails in a class fetched ahead must fail the plan with the message
// one thread gives.
#include <gtest/gtest.h>

#include <array>
#include <string>
#include <thread>

#include "weft/routing/hybrid_schedule.h"
#include "weft/routing/planner.h"
#include "weft/topology/builders.h"

namespace weft::routing {
namespace {

// Every case has classes of at least 1,024 flows (planner.cc's threshold
// for fetching ahead) and plans of more than 4,096 flows (planner_output.cc's
// for judging beside writing), so the second thread runs in each.
struct SecondThreadCase {
  const char* name;
  topo::Fabric (*fabric)();
  Collective collective;
  int classes;     // flow sets planned: more than one fetches ahead
  int max_rounds;  // the plan's, the same on either thread count
  const char* hash = "crc32";
  NcclRingShape shape{};
  const char* protocol = "udp";
};

void PrintTo(const SecondThreadCase& c, std::ostream* os) { *os << c.name; }

topo::Fabric clos2_1024() { return *topo::build_clos2({.spines = 8, .leaves = 64, .hosts_per_leaf = 16}); }
topo::Fabric clos2_1024_link_down() {  // s3 - l7 down: 16 hosts on 7 uplinks there, 3 rounds
  topo::Fabric f = clos2_1024();
  const int spine = f.switch_vertex(*f.find_switch("s3")), leaf = f.switch_vertex(*f.find_switch("l7"));
  f.links[static_cast<size_t>(*f.link_between(spine, leaf))].state = topo::LinkState::kDown;
  EXPECT_TRUE(f.finalize());
  return f;
}
topo::Fabric clos2_1100() { return *topo::build_clos2({.spines = 5, .leaves = 50, .hosts_per_leaf = 22}); }
topo::Fabric clos3_2048() {
  return *topo::build_clos3({.pods = 4, .leaves_per_pod = 4, .aggs_per_pod = 4, .cores = 16, .hosts_per_leaf = 128});
}
topo::Fabric rail_2048() {
  return *topo::build_rail({.hosts = 256, .nics_per_host = 8, .leaves_per_rail = 2, .spines = 8, .planes = 2});
}

Result<PlannedRoutes> plan(const SecondThreadCase& c, bool second_thread) {
  const topo::Fabric f = c.fabric();
  WEFT_ASSIGN_OR_RETURN(auto order, ranking::rank(f, ranking::allocation_all(f), ranking::RankAlgo::kClos));
  WEFT_ASSIGN_OR_RETURN(auto s, build_fabric_schedule(f, order, c.collective, 1 << 16, 4, c.shape));
  WEFT_ASSIGN_OR_RETURN(auto hash, make_hash(c.hash, 5));
  auto table = make_model_path_table(f, std::move(hash), 5);
  PlannerOptions opt;
  opt.second_thread = second_thread;
  opt.protocol = c.protocol;
  if (c.collective == Collective::kNcclRing) opt.ports_per_pair = nccl_ring_ports_per_pair(c.shape, 64);
  return plan_routes(f, order, s, *table, opt);
}

// With one CPU the planner never starts its second thread: nothing to compare.
bool two_cpus() { return std::thread::hardware_concurrency() > 1; }

class PlannerSecondThread : public ::testing::TestWithParam<SecondThreadCase> {};

TEST_P(PlannerSecondThread, PlansExactlyWhatOneThreadPlans) {
  if (!two_cpus()) GTEST_SKIP() << "one CPU: the planner runs no second thread";
  const auto one = plan(GetParam(), false);
  ASSERT_TRUE(one) << one.status().message();
  const auto two = plan(GetParam(), true);
  ASSERT_TRUE(two) << two.status().message();
  EXPECT_EQ(one->stats.planned_classes, GetParam().classes);
  EXPECT_EQ(one->stats.max_rounds, GetParam().max_rounds);
  EXPECT_EQ(two->plan, one->plan);
  EXPECT_EQ(two->stats.replans, one->stats.replans);
  EXPECT_EQ(two->stats.exact_classes, one->stats.exact_classes);
  EXPECT_EQ(two->stats.steps_at_bound, one->stats.steps_at_bound);
  EXPECT_EQ(two->stats.max_load, one->stats.max_load);
  EXPECT_EQ(two->stats.max_rounds, one->stats.max_rounds);
  EXPECT_EQ(two->stats.fabric_flows, one->stats.fabric_flows);
}

INSTANTIATE_TEST_SUITE_P(
    Fabrics, PlannerSecondThread,
    ::testing::Values(
        SecondThreadCase{"clos2_hd", clos2_1024, Collective::kAllreduceHd, 10, 2},
        SecondThreadCase{"clos2_hd_failed_link_rounds", clos2_1024_link_down, Collective::kAllreduceHd, 10, 3},
        SecondThreadCase{"clos2_1100_hd_folded_tcp", clos2_1100, Collective::kAllreduceHd, 12, 5, "crc32", {}, "tcp"},
        // One flow set: nothing to fetch ahead, the plan judged beside its writing.
        SecondThreadCase{"clos2_ring", clos2_1024, Collective::kAllreduceRing, 1, 1},
        SecondThreadCase{"clos2_nccl_ring_4x2", clos2_1024, Collective::kNcclRing, 1, 1, "crc32", {4, 2}},
        SecondThreadCase{"clos2_hd_eecmp", clos2_1024, Collective::kAllreduceHd, 10, 2, "crc32-qp"},
        SecondThreadCase{"clos3_hd", clos3_2048, Collective::kAllreduceHd, 11, 32},
        SecondThreadCase{"rail_dual_plane_hybrid", rail_2048, Collective::kAllreduceHybrid, 8, 16}),
    [](const auto& p) { return std::string(p.param.name); });

// A model table that fails at the n-th pair it is asked about (a class the
// worker fetched ahead, when n is past the first classes), or knows nothing
// of one pair of NICs.
class FaultyTable final : public PathTable {
 public:
  FaultyTable(std::unique_ptr<PathTable> inner, int fail_at, std::pair<int, int> unknown = {-1, -1})
      : inner_(std::move(inner)), fail_at_(fail_at), unknown_(unknown) {}
  std::string describe() const override { return inner_->describe(); }
  const topo::Fabric& fabric() const override { return inner_->fabric(); }
  Result<Route> route(const FlowKey& k) override { return inner_->route(k); }
  Status ports(const PairQuery& q, PortRange r, int max_ports, PairRoutes& out) override {
    if (++asked_ == fail_at_) return unavailable("the table's source went away at pair " + std::to_string(asked_));
    if (std::pair(q.src_nic, q.dst_nic) == unknown_) {
      out.clear();
      return ok_status();
    }
    return inner_->ports(q, r, max_ports, out);
  }

 private:
  std::unique_ptr<PathTable> inner_;
  int fail_at_, asked_ = 0;
  std::pair<int, int> unknown_;
};

// The message HD planning on clos2_1024 fails with, from a FaultyTable
// failing at pair `fail_at` and knowing nothing of ranks `unknown`'s NICs:
// [0] on one thread, [1] on two. Empty where planning did not fail.
std::array<std::string, 2> failure_messages(int fail_at, std::pair<int, int> unknown, int first_ports) {
  // Both runs on one fabric object: the table must describe the one planned.
  const topo::Fabric f = clos2_1024();
  auto order = *ranking::rank(f, ranking::allocation_all(f), ranking::RankAlgo::kClos);
  auto s = *build_schedule(Collective::kAllreduceHd, order.size(), 1 << 16);
  std::pair<int, int> nics{-1, -1};
  if (unknown.first >= 0) {
    nics = {order.nics[static_cast<size_t>(unknown.first)], order.nics[static_cast<size_t>(unknown.second)]};
  }
  std::array<std::string, 2> messages;
  for (bool second_thread : {false, true}) {
    FaultyTable table(make_model_path_table(f, *make_hash("crc32", 5), 5), fail_at, nics);
    PlannerOptions opt;
    opt.second_thread = second_thread;
    opt.first_ports = first_ports;
    auto planned = plan_routes(f, order, s, table, opt);
    if (!planned) messages[second_thread] = std::string(planned.status().message());
  }
  return messages;
}

class PlannerSecondThreadFailure : public ::testing::TestWithParam<int> {};

TEST_P(PlannerSecondThreadFailure, TableFailureEndsThePlanWithOneThreadsMessage) {
  if (!two_cpus()) GTEST_SKIP() << "one CPU: the planner runs no second thread";
  const auto messages = failure_messages(GetParam(), {-1, -1}, PlannerOptions{}.first_ports);
  EXPECT_EQ(messages[0], "the table's source went away at pair " + std::to_string(GetParam()));
  EXPECT_EQ(messages[1], messages[0]);
}

// Pair 1: the first class (fetched here); later ones: classes of 1,024
// pairs, fetched ahead.
INSTANTIATE_TEST_SUITE_P(AtPair, PlannerSecondThreadFailure, ::testing::Values(1, 1500, 4097, 9001));

// A class that fails while colouring (a pair the table knows nothing of, at
// distance 32, a class in the middle of HD's ten) ends the plan while the
// next class is being fetched: the fetch ends before its buffers go
// (AddressSanitizer sees it write freed memory otherwise), and the message
// is one thread's. No try from fewer ports, which would wait for the fetch
// before failing.
TEST(PlannerSecondThread, AClassThatFailsWhileTheNextIsFetchedEndsThePlanWithOneThreadsMessage) {
  if (!two_cpus()) GTEST_SKIP() << "one CPU: the planner runs no second thread";
  const auto messages = failure_messages(-1, {0, 32}, 0);
  EXPECT_EQ(messages[0].rfind("no usable route for rank 0 (", 0), 0u) << messages[0];
  EXPECT_EQ(messages[1], messages[0]);
}

}  // namespace
}  // namespace weft::routing
