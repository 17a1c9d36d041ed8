// Fewer ports first (planner.h, 2): a class planned from first_ports ports
// per pair is kept only where nothing better exists, so every figure the
// link-load checker gives — over where a fresh model table sends the planned
// ports — equals the plan from all ports_per_pair at once (first_ports 0),
// however few ports the try has.
#include <gtest/gtest.h>

#include "weft/routing/link_load.h"
#include "weft/routing/plan_router.h"
#include "weft/routing/planner.h"
#include "weft/topology/builders.h"

namespace weft::routing {
namespace {

struct FirstPortsCase {
  const char* name;
  int spines, leaves, hosts;
  const char* down;  // "s2-l3": that spine-leaf link down; "" for none
  Collective collective;
  bool rounds;
  int first_ports;
};

void PrintTo(const FirstPortsCase& c, std::ostream* os) { *os << c.name; }

struct Figures {
  int steps = 0, at_bound = 0, max_load = 0, max_rounds = 0, rounds = 0, fabric_above = 0;
  bool operator==(const Figures&) const = default;
};

void PrintTo(const Figures& g, std::ostream* os) {
  *os << "steps " << g.steps << " at bound " << g.at_bound << " max load " << g.max_load << " max rounds "
      << g.max_rounds << " rounds " << g.rounds << " fabric above its bound " << g.fabric_above;
}

Figures plan_and_check(const FirstPortsCase& c, int first_ports) {
  auto f = topo::build_clos2({.spines = c.spines, .leaves = c.leaves, .hosts_per_leaf = c.hosts}).value();
  if (std::string down = c.down; !down.empty()) {
    const auto dash = down.find('-');
    auto l = f.link_between(f.switch_vertex(*f.find_switch(down.substr(0, dash))),
                            f.switch_vertex(*f.find_switch(down.substr(dash + 1))));
    f.links[static_cast<size_t>(*l)].state = topo::LinkState::kDown;
    EXPECT_TRUE(f.finalize());
  }
  auto order = ranking::rank(f, ranking::allocation_all(f), ranking::RankAlgo::kClos).value();
  auto s = build_schedule(c.collective, order.size(), 1 << 16).value();
  auto table = make_model_path_table(f, make_hash("crc32", 3).value(), 3);
  PlannerOptions opt;
  opt.rounds = c.rounds;
  opt.first_ports = first_ports;
  auto planned = plan_routes(f, order, s, *table, opt);
  EXPECT_TRUE(planned) << planned.status().message();
  if (!planned) return {};
  auto fresh = make_model_path_table(f, make_hash("crc32", 3).value(), 3);
  auto router = make_table_router(f, order, planned->plan, *fresh);
  EXPECT_TRUE(router) << router.status().message();
  Schedule with_rounds = s;
  EXPECT_TRUE(apply_plan_rounds(planned->plan, with_rounds));
  auto rep = check_link_load(f, order, with_rounds, **router);
  EXPECT_TRUE(rep) << rep.status().message();
  if (!rep) return {};
  Figures g;
  g.max_load = rep->max_load, g.max_rounds = rep->max_rounds;
  for (const StepLoad& sl : rep->steps) {
    ++g.steps;
    g.at_bound += sl.max_load == sl.lower_bound;
    g.rounds += sl.rounds;
    g.fabric_above += sl.rounds == 1 && sl.max_fabric_load > sl.fabric_lower_bound;
  }
  return g;
}

class PlannerFirstPorts : public ::testing::TestWithParam<FirstPortsCase> {};

TEST_P(PlannerFirstPorts, CheckerFiguresEqualThePlanFromAllPorts) {
  const FirstPortsCase& c = GetParam();
  const Figures all = plan_and_check(c, 0);
  EXPECT_EQ(all.at_bound, all.steps);  // the premise: from all ports every step is at its bound
  EXPECT_EQ(plan_and_check(c, c.first_ports), all);
}

// One port per pair reaches one spine: a class of many leaves cannot keep
// load 1 from it, so those classes must be planned again (break the fallback
// and these fail).
INSTANTIATE_TEST_SUITE_P(
    Cases, PlannerFirstPorts,
    ::testing::Values(FirstPortsCase{"hd_8x8x8_one_port", 8, 8, 8, "", Collective::kAllreduceHd, true, 1},
                      FirstPortsCase{"hd_8x8x8_no_rounds_one_port", 8, 8, 8, "", Collective::kAllreduceHd, false, 1},
                      FirstPortsCase{"hd_8x8x8_sixteen", 8, 8, 8, "", Collective::kAllreduceHd, true, 16},
                      FirstPortsCase{"ring_8x6x5_two", 8, 6, 5, "", Collective::kAllreduceRing, true, 2},
                      FirstPortsCase{"hd_failed_link_rounds_one_port", 4, 4, 4, "s2-l3", Collective::kAllreduceHd,
                                     true, 1},
                      FirstPortsCase{"hd_failed_link_no_rounds_one_port", 4, 4, 4, "s2-l3",
                                     Collective::kAllreduceHd, false, 1}),
    [](const auto& p) { return std::string(p.param.name); });

TEST(PlannerFirstPorts, NegativeIsRefused) {
  auto f = topo::build_clos2({.spines = 2, .leaves = 2, .hosts_per_leaf = 2}).value();
  auto order = ranking::rank(f, ranking::allocation_all(f), ranking::RankAlgo::kClos).value();
  auto s = build_schedule(Collective::kAllreduceHd, order.size(), 1000).value();
  auto table = make_model_path_table(f, make_hash("crc32", 1).value());
  PlannerOptions opt;
  opt.first_ports = -1;
  auto planned = plan_routes(f, order, s, *table, opt);
  ASSERT_FALSE(planned);
  EXPECT_EQ(planned.status().message(), "first ports must be >= 0 (got -1)");
}

}  // namespace
}  // namespace weft::routing
