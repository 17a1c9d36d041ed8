// The planner's second thread over a probe database (probe/db_path_table.h):
// sets of 1,024 flows and more are fetched from the database on a worker
// thread (routing/planner.cc) while the planner's thread colours the set
// before, so the SQLite connection is used from two threads, one at a time
// (its multi-thread mode allows that: https://sqlite.org/threads.html). The
// plan must be exactly the one-thread plan, and every planned port one the
// database holds answered, on the planned path.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <future>
#include <optional>
#include <set>
#include <thread>

#include <fmt/format.h>

#include "weft/common/ipv4.h"
#include "weft/db/stores.h"
#include "weft/probe/db_path_table.h"
#include "weft/ranking/rank_order.h"
#include "weft/routing/ecmp.h"
#include "weft/routing/link_load.h"
#include "weft/routing/path_table.h"
#include "weft/routing/plan.h"
#include "weft/routing/plan_router.h"
#include "weft/routing/planner.h"
#include "weft/routing/router.h"
#include "weft/routing/schedule.h"
#include "weft/topology/builders.h"
#include "../scratch_name.h"

namespace weft::probe {
namespace {

namespace fs = std::filesystem;
constexpr uint16_t kDport = 29500;
constexpr int kPortsPerPair = 24;  // every port from 49152 up answered, as a bring-up sweep would leave them

struct DbCase {
  const char* name;
  topo::Clos2Spec spec;
  bool failed_link;  // s3 - l7 down: rounds where l7's hosts outnumber its uplinks
  int classes;       // HD's flow sets
  int max_rounds;
};

void PrintTo(const DbCase& c, std::ostream* os) { *os << c.name; }

class DbSecondThread : public ::testing::TestWithParam<DbCase> {
 protected:
  void SetUp() override {
    path_ = (fs::temp_directory_path() / (weft::test::scratch_name("weft-db2t") + ".db")).string();
    fs::remove(path_);
  }
  void TearDown() override {
    for (const char* ext : {"", "-wal", "-shm"}) fs::remove(path_ + ext);
  }

  // A finished TCP campaign holding kPortsPerPair answered ports of every
  // pair HD's schedule has, each with the spine the hash model gives it.
  void write_campaign(const topo::Fabric& f, const ranking::RankOrder& order, const routing::Schedule& s) {
    auto db = db::Database::open(path_);
    ASSERT_TRUE(db) << db.status().to_string();
    std::vector<int64_t> host_id(f.nics.size());
    for (const auto& h : f.hosts) {
      const int nic = h.nics.front();
      auto id = db::upsert_host(*db, {0, h.name, ipv4_str(routing::nic_ipv4(f, nic)), ""});
      ASSERT_TRUE(id) << id.status().to_string();
      host_id[static_cast<size_t>(nic)] = *id;
    }
    db::CampaignSpec spec;
    spec.backend = "tcp-syn";
    spec.protocol = routing::kProtoTcp;
    spec.dport = kDport;
    spec.sport_count = kPortsPerPair;
    auto c = db::create_campaign(*db, spec);
    ASSERT_TRUE(c) << c.status().to_string();
    auto model = routing::make_model_path_table(f, *routing::make_hash("linux-l4", 3));
    std::set<std::pair<int, int>> pairs;
    for (const auto& st : s.steps) {
      for (const auto& fl : st.flows) {
        pairs.insert({order.nics[static_cast<size_t>(fl.src)], order.nics[static_cast<size_t>(fl.dst)]});
      }
    }
    std::vector<db::Observation> rows;
    rows.reserve(pairs.size() * kPortsPerPair);
    for (const auto& [src, dst] : pairs) {
      for (int k = 0; k < kPortsPerPair; ++k) {
        const auto sport = static_cast<uint16_t>(49152 + k);
        auto r = model->route({src, dst, routing::kProtoTcp, sport, kDport});
        ASSERT_TRUE(r) << r.status().to_string();
        db::Observation o;
        o.src_id = host_id[static_cast<size_t>(src)];
        o.dst_id = host_id[static_cast<size_t>(dst)];
        o.protocol = routing::kProtoTcp;
        o.sport = sport;
        o.dport = kDport;
        o.answered = 1;
        o.spine = r->size() == 3 ? f.switches[static_cast<size_t>((*r)[1])].id : 0;
        rows.push_back(o);
      }
    }
    auto added = db::ObservationWriter(*db).write_batch(*c, rows);
    ASSERT_TRUE(added) << added.status().to_string();
    ASSERT_EQ(*added, rows.size());
    ASSERT_TRUE(db::finish_campaign(*db, *c, "done").is_ok());
  }

  std::string path_;
};

TEST_P(DbSecondThread, PlansExactlyWhatOneThreadPlansAndOnlyAnsweredPorts) {
  if (std::thread::hardware_concurrency() < 2) GTEST_SKIP() << "one CPU: the planner runs no second thread";
  const DbCase& c = GetParam();
  topo::Fabric f = *topo::build_clos2(c.spec);
  if (c.failed_link) {
    const int spine = f.switch_vertex(*f.find_switch("s3")), leaf = f.switch_vertex(*f.find_switch("l7"));
    f.links[static_cast<size_t>(*f.link_between(spine, leaf))].state = topo::LinkState::kDown;
    ASSERT_TRUE(f.finalize());
  }
  auto order = ranking::rank(f, ranking::allocation_all(f), ranking::RankAlgo::kClos);
  ASSERT_TRUE(order) << order.status().to_string();
  auto s = routing::build_schedule(routing::Collective::kAllreduceHd, order->size(), 1 << 16);
  ASSERT_TRUE(s);
  write_campaign(f, *order, *s);
  if (HasFatalFailure()) return;

  routing::PlannerOptions opt;
  opt.protocol = "tcp";
  opt.tcp_dport = kDport;
  std::optional<routing::PlannedRoutes> plans[2];
  for (bool second_thread : {false, true}) {
    // A table of its own per plan, as `weft route --paths fabric.db` opens it.
    auto table = open_db_path_table(f, path_);
    ASSERT_TRUE(table) << table.status().to_string();
    opt.second_thread = second_thread;
    auto planned = routing::plan_routes(f, *order, *s, **table, opt);
    ASSERT_TRUE(planned) << (second_thread ? "two threads: " : "one thread: ") << planned.status().to_string();
    plans[second_thread] = std::move(*planned);
  }
  const routing::PlannedRoutes& one = *plans[0];
  const routing::PlannedRoutes& two = *plans[1];
  EXPECT_EQ(one.stats.planned_classes, c.classes);
  // HD on 1,024 ranks: every set has 1,024 flows, so each set after the
  // first is fetched ahead on the worker.
  EXPECT_EQ(one.stats.flows, c.classes * 1024);
  EXPECT_EQ(one.stats.max_rounds, c.max_rounds);
  EXPECT_EQ(one.stats.steps_at_bound, one.stats.steps);
  EXPECT_EQ(two.plan, one.plan);
  EXPECT_EQ(two.stats.replans, one.stats.replans);
  EXPECT_EQ(two.stats.steps_at_bound, one.stats.steps_at_bound);

  // Every planned port is one the database holds, on the path the plan says.
  auto table = open_db_path_table(f, path_);
  ASSERT_TRUE(table) << table.status().to_string();
  for (const auto& fl : two.plan.flows) {
    const int src = order->nics[static_cast<size_t>(fl.src_rank)], dst = order->nics[static_cast<size_t>(fl.dst_rank)];
    ASSERT_GE(fl.sport, 49152);
    ASSERT_LT(fl.sport, 49152 + kPortsPerPair);
    auto r = (*table)->route({src, dst, routing::kProtoTcp, fl.sport, fl.dport});
    ASSERT_TRUE(r) << fmt::format("rank {} -> {} sport {}: {}", fl.src_rank, fl.dst_rank, fl.sport, r.status().to_string());
    std::vector<std::string> names;
    for (int sw : *r) names.push_back(f.switches[static_cast<size_t>(sw)].name);
    ASSERT_EQ(names, fl.path) << fmt::format("rank {} -> {} sport {}", fl.src_rank, fl.dst_rank, fl.sport);
  }
  // And as `weft route` checks a plan: the ports looked up again, from a
  // thread other than the one that opened the table, and judged per round.
  routing::Schedule with_rounds = *s;
  auto judged = std::async(std::launch::async, [&]() -> Result<routing::LoadReport> {
    WEFT_RETURN_IF_ERROR(routing::apply_plan_rounds(two.plan, with_rounds));
    WEFT_ASSIGN_OR_RETURN(auto router, routing::make_table_router(f, *order, two.plan, **table));
    return routing::check_link_load(f, *order, with_rounds, *router);
  });
  const auto rep = judged.get();
  ASSERT_TRUE(rep) << rep.status().to_string();
  ASSERT_EQ(rep->steps.size(), two.plan.steps.size());
  for (size_t i = 0; i < rep->steps.size(); ++i) {
    EXPECT_EQ(rep->steps[i].max_load, two.plan.steps[i].max_load) << "step " << i;
    EXPECT_EQ(rep->steps[i].max_load, rep->steps[i].lower_bound) << "step " << i;
  }
}

// 1,024 ranks: HD's flow sets have 1,024 flows each, the size from which
// the next set is fetched on the worker.
INSTANTIATE_TEST_SUITE_P(
    Clos2, DbSecondThread,
    ::testing::Values(DbCase{"s8_l64_h16", {.spines = 8, .leaves = 64, .hosts_per_leaf = 16}, false, 10, 2},
                      DbCase{"s8_l64_h16_failed_link", {.spines = 8, .leaves = 64, .hosts_per_leaf = 16}, true, 10, 3}),
    [](const auto& p) { return std::string(p.param.name); });

}  // namespace
}  // namespace weft::probe
