// Plan epochs that a communicator must refuse (docs/collectives-routes.md
// "Plan epochs"): another job's, a stale one, one whose plan does not match
// the communicator (ranks, collective, a dport), garbage — each counted once,
// no call fails, the job keeps its plan; a valid epoch after them is still
// adopted. And the parser's and the match's messages.
#include <stdlib.h>

#include <chrono>
#include <filesystem>
#include <functional>
#include <thread>

#include <fmt/format.h>

#include "epoch_files.h"
#include "harness.h"
#include "plan_epochs.h"

namespace weft::coll::testing {
namespace {

using namespace std::chrono_literals;

std::vector<uint16_t> ports_from(uint16_t base, size_t k) {
  std::vector<uint16_t> p;
  for (size_t i = 0; i < k; ++i) p.push_back(static_cast<uint16_t>(base + i));
  return p;
}

routing::RoutePlan plan_of(int n, const std::string& collective = "allreduce-hd", uint16_t sport_base = 40000,
                           uint16_t dport_base = 30000) {
  return tcp_plan(n, collective, ports_from(dport_base, static_cast<size_t>(n)),
                  ports_from(sport_base, static_cast<size_t>(n * n)));
}

TEST(PlanEpochParse, ReadsTheContractFormat) {
  const routing::RoutePlan plan = plan_of(3);
  auto e = internal::parse_plan_epoch(epoch_json("job-a", 7, plan));
  ASSERT_TRUE(e) << e.status().to_string();
  EXPECT_EQ(e->job, "job-a");
  EXPECT_EQ(e->epoch, 7u);
  EXPECT_EQ(e->reason, "test");
  EXPECT_EQ(e->plan, plan);
}

// The members beside the plan are read from their JSON text: escapes and
// text beyond ASCII come through as written.
TEST(PlanEpochParse, AReasonWithEscapesAndUnicodeComesThrough) {
  const routing::RoutePlan plan = plan_of(2);
  std::string text = epoch_json("job-\u00e9", 3, plan);
  text.replace(text.find("\"test\""), 6, R"("link \"s2->l3\"\n\tdown \u00e9 \ud83d\ude80")");
  auto e = internal::parse_plan_epoch(text);
  ASSERT_TRUE(e) << e.status().to_string();
  EXPECT_EQ(e->job, "job-\u00e9");
  EXPECT_EQ(e->reason, "link \"s2->l3\"\n\tdown \u00e9 \U0001F680");
  EXPECT_EQ(e->plan, plan);
}

struct BadDoc {
  std::string name, text, message;
};

class PlanEpochParseErrors : public ::testing::TestWithParam<BadDoc> {};

TEST_P(PlanEpochParseErrors, NameTheField) {
  auto e = internal::parse_plan_epoch(GetParam().text);
  ASSERT_FALSE(e);
  EXPECT_NE(e.status().message().find(GetParam().message), std::string::npos) << e.status().message();
}

INSTANTIATE_TEST_SUITE_P(
    PlanEpochs, PlanEpochParseErrors,
    ::testing::Values(BadDoc{"garbage", "{not json", "not JSON"}, BadDoc{"array", "[1]", "/: not an object"},
                      BadDoc{"version", R"({"version": 2, "job": "j", "epoch": 1, "plan": {}})", "/version"},
                      BadDoc{"job", R"({"version": 1, "epoch": 1, "plan": {}})", "/job"},
                      BadDoc{"negative_epoch", R"({"version": 1, "job": "j", "epoch": -1, "plan": {}})", "/epoch"},
                      BadDoc{"no_plan", R"({"version": 1, "job": "j", "epoch": 1})", "/plan"},
                      BadDoc{"bad_plan", R"({"version": 1, "job": "j", "epoch": 1, "plan": {"version": 1}})", "/plan"}),
    [](const auto& p) { return p.param.name; });

TEST(PlanFits, NamesTheFirstDifference) {
  const routing::RoutePlan now = plan_of(4);
  EXPECT_TRUE(internal::plan_fits(now, plan_of(4, "allreduce-hd", 41000), {}));  // other sports only
  EXPECT_NE(internal::plan_fits(now, plan_of(5), {}).message().find("for 5 ranks"), std::string::npos);
  EXPECT_NE(internal::plan_fits(now, plan_of(4, "allreduce-ring"), {}).message().find("collective"), std::string::npos);
  EXPECT_NE(internal::plan_fits(now, plan_of(4, "allreduce-hd", 40000, 31000), {}).message().find("dport"),
            std::string::npos);
  routing::RoutePlan fewer = now;
  fewer.flows.pop_back();
  EXPECT_NE(internal::plan_fits(now, fewer, {}).message().find("flows"), std::string::npos);
  routing::RoutePlan udp = now;
  udp.flows[0].protocol = "udp";
  EXPECT_NE(internal::plan_fits(now, udp, {}).message().find("is udp"), std::string::npos);
}

// One bad (or good) file per phase, written by each rank into its own file;
// then every rank makes the same calls, and its counters must show exactly
// what the phase expects.
struct Phase {
  std::string name;
  std::function<std::string(int n)> text;
  PlanEpochCounters want;  // cumulative
};

TEST(PlanEpochRefusals, EachIsCountedOnceAndTheJobKeepsItsPlan) {
  const int n = 3;
  const routing::RoutePlan plan = plan_of(n);
  const routing::RoutePlan moved = plan_of(n, "allreduce-hd", 42000);
  routing::RoutePlan other_dport = plan_of(n);
  for (auto& f : other_dport.flows) {
    if (f.dst_rank == 0) f.dport = 31999;
  }
  std::vector<Phase> phases;
  PlanEpochCounters c;
  c.refused_job = 1;
  phases.push_back({"another job", [&](int) { return epoch_json("someone-else", 1, moved); }, c});
  c.refused_stale = 1;
  phases.push_back({"stale", [&](int) { return epoch_json("j", 0, moved); }, c});
  c.refused_mismatch = 1;
  phases.push_back({"ranks", [&](int) { return epoch_json("j", 1, plan_of(n + 1)); }, c});
  c.refused_mismatch = 2;
  phases.push_back({"collective", [&](int) { return epoch_json("j", 1, plan_of(n, "allreduce-ring")); }, c});
  c.refused_mismatch = 3;
  phases.push_back({"dport", [&](int) { return epoch_json("j", 1, other_dport); }, c});
  c.refused_unreadable = 1;
  phases.push_back({"garbage", [&](int) { return std::string("{\"version\": 1, \"job\": \"j\", \"epo"); }, c});
  c.refused_unreadable = 2;
  const std::string invalid_plan =
      R"({"version": 1, "job": "j", "epoch": 1, "plan": {"version": 1, "ranks": 3, "flows": [{"src_rank": 0}]}})";
  phases.push_back({"invalid plan", [&](int) { return invalid_plan; }, c});
  c.switches = 1;
  c.epoch = 1;
  phases.push_back({"valid", [&](int) { return epoch_json("j", 1, moved); }, c});
  c.refused_stale = 2;
  phases.push_back({"the same epoch again", [&](int) { return epoch_json("j", 1, plan_of(n, "allreduce-hd", 43000)); }, c});

  char tmpl[] = "/tmp/weft-epochs-XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  const std::string dir = tmpl;
  run_ranks(
      n,
      [&](Communicator& comm) {
        const int me = comm.rank();
        const std::string path = fmt::format("{}/rank{}.json", dir, me);
        int64_t call = 0;
        for (const Phase& p : phases) {
          ASSERT_TRUE(publish(path, p.text(n)));
          // Enough calls, 3 ms apart, for several looks (plan_poll 10 ms)
          // and agreements; the same number on every rank.
          for (int i = 0; i < 40; ++i, ++call) {
            std::vector<int64_t> v(1001, me + call);
            Status s = comm.allreduce(v.data(), v.data(), v.size(), DataType::kI64, ReduceOp::kSum);
            ASSERT_TRUE(s) << p.name << ": " << s.to_string();
            ASSERT_EQ(v[1000], n * (n - 1) / 2 + n * call) << p.name;
            std::this_thread::sleep_for(3ms);
          }
          const PlanEpochCounters got = comm.plan_epoch_counters();
          EXPECT_EQ(got.refused_job, p.want.refused_job) << "rank " << me << " after " << p.name;
          EXPECT_EQ(got.refused_stale, p.want.refused_stale) << "rank " << me << " after " << p.name;
          EXPECT_EQ(got.refused_mismatch, p.want.refused_mismatch) << "rank " << me << " after " << p.name;
          EXPECT_EQ(got.refused_unreadable, p.want.refused_unreadable) << "rank " << me << " after " << p.name;
          EXPECT_EQ(got.switches, p.want.switches) << "rank " << me << " after " << p.name;
          EXPECT_EQ(comm.plan_epoch(), p.want.epoch) << "rank " << me << " after " << p.name;
          EXPECT_EQ(*comm.route_plan(), p.want.epoch == 0 ? plan : moved) << "rank " << me << " after " << p.name;
        }
      },
      [&](CommConfig& cfg) {
        // Loopback: the refusals do not depend on the transport, and its
        // plan's ports are never bound.
        cfg.transport = "loopback";
        cfg.plan = plan;
        cfg.plan_epochs = fmt::format("{}/rank{}.json", dir, cfg.rank);
        cfg.job = "j";
        cfg.plan_poll = 10ms;
        cfg.timeout = 10s;
      });
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
}

TEST(PlanEpochSetup, EveryRankNamesAFileOrNone) {
  const routing::RoutePlan plan = plan_of(2);
  MemoryStore store;
  std::vector<std::string> errors(2);
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r) {
    threads.emplace_back([&, r] {
      CommConfig cfg;
      cfg.rank = r;
      cfg.size = 2;
      cfg.transport = "loopback";
      cfg.plan = plan;
      cfg.timeout = 500ms;
      if (r == 1) cfg.plan_epochs = "/nonexistent/epochs.json";
      auto comm = Communicator::create(cfg, store);
      if (!comm) errors[static_cast<size_t>(r)] = comm.status().message();
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_NE(errors[1].find("rank 0 reads no plan epochs file and rank 1 does"), std::string::npos) << errors[1];
}

TEST(PlanEpochSetup, AFileNeedsAPlanAndAPollInRange) {
  CommConfig cfg;
  cfg.plan_epochs = "/tmp/x.json";
  EXPECT_NE(cfg.validate().message().find("need a route plan"), std::string::npos);
  cfg.plan = plan_of(1);
  cfg.plan_poll = 0ms;
  EXPECT_NE(cfg.validate().message().find("plan_poll must be in"), std::string::npos);
}

}  // namespace
}  // namespace weft::coll::testing
