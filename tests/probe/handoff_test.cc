// The probe -> route hand-off without root, on every small spine-leaf shape:
// the real campaign runner (targeted stop rule included) probes a fabric
// whose ECMP is the hash model, its answers go into a probe database, and
// the planner plans from that database as `weft probe` + `weft route --paths`
// and `weft demo` do. What must hold:
//   - every planned port is one the database holds answered, on the path the
//     plan claims (looked up again in the database, not in the model);
//   - every step's load is at its lower bound per round (the checker's
//     figures over the database's routes);
//   - with a share of probes lost, plans still use only answered ports, or
//     fail with a message naming the pair and what to re-probe.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <random>
#include <set>

#include <fmt/format.h>

#include "weft/db/stores.h"
#include "weft/probe/campaign.h"
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
#include "weft/common/ipv4.h"
#include "../scratch_name.h"

namespace weft::probe {
namespace {

namespace fs = std::filesystem;
constexpr uint16_t kDport = 29500;

std::string ip_of(const topo::Fabric& f, int nic) {
  return ipv4_str(routing::nic_ipv4(f, nic));
}

// One sending host on a fabric whose switches hash as the model does: a
// probe is answered with the spine id of the route the model gives its
// 5-tuple (0 inside a leaf), unless it is lost (probability `loss`, drawn
// per send, so a retry may get through).
class ModelBackend final : public SenderBackend {
 public:
  ModelBackend(const topo::Fabric& f, routing::PathTable& model, int src_nic, double loss, uint32_t seed)
      : f_(f), model_(model), src_nic_(src_nic), loss_(loss), rng_(seed) {
    for (size_t n = 0; n < f.nics.size(); ++n) nic_of_ip_[routing::nic_ipv4(f, static_cast<int>(n))] = static_cast<int>(n);
  }
  std::string_view name() const override { return "model"; }
  Status open_ports(uint16_t, uint16_t) override { return ok_status(); }
  Status send(std::span<const ProbeSend> probes) override {
    for (const ProbeSend& p : probes) {
      ++stats_.sent;
      if (std::uniform_real_distribution<double>(0, 1)(rng_) < loss_) continue;
      WEFT_ASSIGN_OR_RETURN(routing::Route r,
                            model_.route({src_nic_, nic_of_ip_.at(p.dst_ip), routing::kProtoTcp, p.sport, kDport}));
      ProbeAnswer a;
      a.sequence = p.sequence;
      a.dst_ip = p.dst_ip;
      a.sport = p.sport;
      a.spine = r.size() == 3 ? f_.switches[static_cast<size_t>(r[1])].id : 0;
      a.dscp_seen = 8 + a.spine;
      a.rtt_ns = 1000;
      queue_.push_back(a);
    }
    return ok_status();
  }
  Status poll(int, std::vector<ProbeAnswer>& out) override {
    out.insert(out.end(), queue_.begin(), queue_.end());
    queue_.clear();
    return ok_status();
  }

 private:
  const topo::Fabric& f_;
  routing::PathTable& model_;
  int src_nic_;
  double loss_;
  std::mt19937 rng_;
  std::map<uint32_t, int> nic_of_ip_;
  std::vector<ProbeAnswer> queue_;
};

struct Shape {
  int spines, leaves, hosts;
  double loss = 0;
};

std::string shape_name(const ::testing::TestParamInfo<Shape>& i) {
  return fmt::format("s{}_l{}_h{}{}", i.param.spines, i.param.leaves, i.param.hosts,
                     i.param.loss > 0 ? fmt::format("_loss{}", static_cast<int>(i.param.loss * 100)) : "");
}

class Handoff : public ::testing::TestWithParam<Shape> {
 protected:
  void SetUp() override {
    const Shape& s = GetParam();
    fabric_ = *topo::build_clos2({.spines = s.spines, .leaves = s.leaves, .hosts_per_leaf = s.hosts});
    db_path_ = (fs::temp_directory_path() / (weft::test::scratch_name("weft-handoff") + ".db")).string();
    fs::remove(db_path_);
    auto db = db::Database::open(db_path_);
    ASSERT_TRUE(db) << db.status().to_string();
    db_ = std::make_unique<db::Database>(std::move(*db));
    for (const auto& h : fabric_.hosts) {
      const int nic = h.nics.front();
      auto id = db::upsert_host(*db_, {0, h.name, ip_of(fabric_, nic), ""});
      ASSERT_TRUE(id) << id.status().to_string();
      host_id_[nic] = *id;
    }
  }
  void TearDown() override {
    db_.reset();
    if (getenv("WEFT_KEEP_DB")) return;
    for (const char* ext : {"", "-wal", "-shm"}) fs::remove(db_path_ + ext);
  }

  // A campaign of (src NIC -> its targets) under the model with `hash_seed`,
  // as `weft probe` runs it: all ports up to sport_count, or targeted.
  void campaign(const std::map<int, std::vector<int>>& targets, uint32_t hash_seed, int sport_count, bool targeted) {
    auto model = routing::make_model_path_table(fabric_, *routing::make_hash("linux-l4", hash_seed));
    db::CampaignSpec spec;
    spec.backend = "tcp-syn";
    spec.protocol = routing::kProtoTcp;
    spec.dport = kDport;
    spec.sport_count = sport_count;
    spec.targeted = targeted;
    auto c = db::create_campaign(*db_, spec);
    ASSERT_TRUE(c);
    db::ObservationWriter writer(*db_);
    for (const auto& [src, dsts] : targets) {
      ModelBackend be(fabric_, *model, src, GetParam().loss, hash_seed * 7919u + static_cast<uint32_t>(src));
      CampaignPlan plan;
      for (int d : dsts) plan.targets.push_back(routing::nic_ipv4(fabric_, d));
      plan.sport_first = 49152;
      plan.sport_count = static_cast<uint16_t>(sport_count);
      plan.rate_pps = 0;
      plan.timeout_ms = 5;  // the model answers at once; only lost probes wait it out
      plan.retries = 1;
      if (targeted) {
        plan.stop_at_spines = GetParam().spines;
        plan.ports_per_spine = static_cast<int>(dsts.size());  // what the controller asks for (controller.h)
      }
      std::vector<db::Observation> rows;
      auto out = run_campaign(be, plan, [&](const FlowResult& f) {
        db::Observation o;
        o.src_id = host_id_.at(src);
        for (int d : dsts) {
          if (routing::nic_ipv4(fabric_, d) == f.dst_ip) o.dst_id = host_id_.at(d);
        }
        o.protocol = routing::kProtoTcp;
        o.sport = f.sport;
        o.dport = kDport;
        if (f.answered > 0) o.spine = f.spine;
        o.sent = f.sent;
        o.answered = f.answered;
        o.unstable = f.unstable;
        rows.push_back(o);
      });
      ASSERT_TRUE(out) << out.status().to_string();
      ASSERT_TRUE(writer.write_batch(*c, rows));
    }
    ASSERT_TRUE(db::finish_campaign(*db_, *c, "done").is_ok());
  }

  topo::Fabric fabric_;
  std::string db_path_;
  std::unique_ptr<db::Database> db_;
  std::map<int, int64_t> host_id_;  // NIC -> host row
};

// Bring-up (every pair, 32 ports), weft's order, then per trial a targeted
// campaign of the HD pairs under a new hash seed, and a plan from it.
TEST_P(Handoff, PlansUseOnlyAnsweredPortsAndMeetTheBoundPerRoundOnEveryTrial) {
  const Shape& s = GetParam();
  std::map<int, std::vector<int>> all;
  for (size_t a = 0; a < fabric_.nics.size(); ++a) {
    for (size_t b = 0; b < fabric_.nics.size(); ++b) {
      if (a != b) all[static_cast<int>(a)].push_back(static_cast<int>(b));
    }
  }
  campaign(all, 1, 32, false);
  std::vector<int> alloc;
  for (size_t n = 0; n < fabric_.nics.size(); ++n) alloc.push_back(static_cast<int>(n));
  std::shuffle(alloc.begin(), alloc.end(), std::mt19937(static_cast<uint32_t>(s.spines * 100 + s.leaves * 10 + s.hosts)));
  auto order = ranking::rank(fabric_, alloc, ranking::RankAlgo::kAuto);
  ASSERT_TRUE(order) << order.status().to_string();
  auto sched = routing::build_schedule(routing::Collective::kAllreduceHd, order->size(), 1 << 16, 4);
  ASSERT_TRUE(sched);
  std::map<int, std::vector<int>> hd_pairs;
  for (const auto& st : sched->steps) {
    for (const auto& f : st.flows) {
      auto& t = hd_pairs[order->nics[static_cast<size_t>(f.src)]];
      const int d = order->nics[static_cast<size_t>(f.dst)];
      if (std::find(t.begin(), t.end(), d) == t.end()) t.push_back(d);
    }
  }
  for (uint32_t trial = 1; trial <= 3; ++trial) {
    SCOPED_TRACE(fmt::format("trial {}", trial));
    if (trial > 1) campaign(hd_pairs, trial, 256, true);
    auto table = open_db_path_table(fabric_, db_path_);
    ASSERT_TRUE(table) << table.status().to_string();
    routing::PlannerOptions opt;
    opt.protocol = "tcp";
    opt.tcp_dport = kDport;
    auto planned = routing::plan_routes(fabric_, *order, *sched, **table, opt);
    if (!planned && s.loss > 0) {
      // Lost answers may leave a pair short: then the message names it and says what to re-probe.
      const std::string m = planned.status().message();
      EXPECT_NE(m.find(" -> rank "), std::string::npos) << m;
      EXPECT_TRUE(m.find("re-probe") != std::string::npos || m.find("widen") != std::string::npos ||
                  m.find("ask for more") != std::string::npos) << m;
      continue;
    }
    ASSERT_TRUE(planned) << planned.status().to_string();
    // Every planned port, looked up again in the database: answered, stable, on the planned path.
    for (const auto& fl : planned->plan.flows) {
      const int src = order->nics[static_cast<size_t>(fl.src_rank)], dst = order->nics[static_cast<size_t>(fl.dst_rank)];
      auto r = (*table)->route({src, dst, routing::kProtoTcp, fl.sport, fl.dport});
      ASSERT_TRUE(r) << fmt::format("rank {} -> {} sport {}: {}", fl.src_rank, fl.dst_rank, fl.sport, r.status().to_string());
      std::vector<std::string> names;
      for (int sw : *r) names.push_back(fabric_.switches[static_cast<size_t>(sw)].name);
      EXPECT_EQ(names, fl.path) << fmt::format("rank {} -> {} sport {}", fl.src_rank, fl.dst_rank, fl.sport);
      EXPECT_TRUE(opt.sports.contains(fl.sport));
    }
    // One source port per flow of a host.
    std::set<std::pair<std::string, int>> used;
    for (const auto& fl : planned->plan.flows) {
      EXPECT_TRUE(used.insert({fl.src_host, fl.sport}).second) << fl.src_host << " sport " << fl.sport << " twice";
    }
    // The checker over the database's routes and the plan's rounds: every step at its bound.
    routing::Schedule with_rounds = *sched;
    ASSERT_TRUE(routing::apply_plan_rounds(planned->plan, with_rounds).is_ok());
    auto router = routing::make_table_router(fabric_, *order, planned->plan, **table);
    ASSERT_TRUE(router) << router.status().to_string();
    auto rep = routing::check_link_load(fabric_, *order, with_rounds, **router);
    ASSERT_TRUE(rep);
    for (const auto& st : rep->steps) {
      EXPECT_EQ(st.max_load, st.lower_bound) << "step " << st.step << " (" << st.phase << ")";
    }
  }
}

std::vector<Shape> every_small_shape() {
  std::vector<Shape> out;
  for (int s = 2; s <= 4; ++s)
    for (int l = 2; l <= 4; ++l)
      for (int h = 2; h <= 4; ++h) out.push_back({s, l, h});
  return out;
}
INSTANTIATE_TEST_SUITE_P(EverySmallShape, Handoff, ::testing::ValuesIn(every_small_shape()), shape_name);

// A share of probes lost (after one retry): 10% and 40%, on shapes with
// fewer spines than hosts per leaf and on non-blocking ones.
INSTANTIATE_TEST_SUITE_P(LostProbes, Handoff,
                         ::testing::Values(Shape{2, 3, 4, 0.1}, Shape{3, 2, 4, 0.1}, Shape{4, 4, 4, 0.1},
                                           Shape{2, 2, 3, 0.4}, Shape{3, 4, 4, 0.4}, Shape{4, 3, 2, 0.4}),
                         shape_name);

// A host's flows each need their own source port. Here h1-1 sends to h1-2
// (same leaf) and h2-1 (across), and the database holds one answered port,
// the same number, for each: one flow gets it, and the other's message names
// its pair and asks for 2 answered ports per spine, as many as the host has
// flows. With the range cut to that one port, it asks to widen the range.
TEST(HandoffShortOfPorts, TheStarvedPairIsNamedWithWhatToReprobeOrWidenAndByHowMuch) {
  const topo::Fabric f = *topo::build_clos2({.spines = 1, .leaves = 2, .hosts_per_leaf = 2});
  const std::string path = (fs::temp_directory_path() / fmt::format("weft-handoff-short-{}.db", ::getpid())).string();
  fs::remove(path);
  {
    auto db = db::Database::open(path);
    ASSERT_TRUE(db);
    std::map<std::string, int64_t> id;
    for (const auto& h : f.hosts) {
      id[h.name] = *db::upsert_host(*db, {0, h.name, ip_of(f, h.nics.front()), ""});
    }
    db::CampaignSpec spec;
    spec.protocol = routing::kProtoTcp;
    spec.dport = kDport;
    const int64_t c = *db::create_campaign(*db, spec);
    std::vector<db::Observation> rows;
    auto add = [&](const char* a, const char* b, int spine) {
      db::Observation o;
      o.src_id = id[a];
      o.dst_id = id[b];
      o.protocol = routing::kProtoTcp;
      o.sport = 49152;
      o.dport = kDport;
      o.answered = 1;
      o.spine = spine;
      rows.push_back(o);
    };
    // HD on 4 ranks in NIC order: distance 1 inside the leaves, distance 2 across.
    for (auto [a, b, spine] : {std::tuple{"h1-1", "h1-2", 0}, {"h1-2", "h1-1", 0}, {"h2-1", "h2-2", 0},
                               {"h2-2", "h2-1", 0}, {"h1-1", "h2-1", 1}, {"h2-1", "h1-1", 1}, {"h1-2", "h2-2", 1},
                               {"h2-2", "h1-2", 1}}) {
      add(a, b, spine);
    }
    ASSERT_TRUE(db::ObservationWriter(*db).write_batch(c, rows));
    ASSERT_TRUE(db::finish_campaign(*db, c, "done").is_ok());
  }
  auto table = open_db_path_table(f, path);
  ASSERT_TRUE(table);
  const ranking::RankOrder order = ranking::rank_naive({0, 1, 2, 3});
  auto sched = routing::build_schedule(routing::Collective::kAllreduceHd, 4, 1024, 4);
  ASSERT_TRUE(sched);
  routing::PlannerOptions opt;
  opt.protocol = "tcp";
  opt.tcp_dport = kDport;
  auto planned = routing::plan_routes(f, order, *sched, **table, opt);
  ASSERT_FALSE(planned);
  const std::string m = planned.status().message();
  EXPECT_EQ(planned.status().code(), StatusCode::kFailedPrecondition) << m;
  EXPECT_NE(m.find("no free source port for rank "), std::string::npos) << m;
  EXPECT_NE(m.find("sends 2 flows"), std::string::npos) << m;
  EXPECT_NE(m.find("re-probe this pair until each spine it uses has 2 answered ports"), std::string::npos) << m;
  EXPECT_NE(m.find("--ports-per-spine 2"), std::string::npos) << m;
  opt.sports = routing::PortRange{49152, 49152};
  opt.tcp_dport = 29500;
  auto narrow = routing::plan_routes(f, order, *sched, **table, opt);
  ASSERT_FALSE(narrow);
  EXPECT_NE(narrow.status().message().find("the source port range 49152-49152 holds 1 ports: widen it by at least 1"),
            std::string::npos)
      << narrow.status().message();
  for (const char* ext : {"", "-wal", "-shm"}) fs::remove(path + ext);
}

}  // namespace
}  // namespace weft::probe
