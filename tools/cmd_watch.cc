// weft watch: watches a running job's paths through the agents' monitors and
// names the directed spine-leaf link that fails (tools/watch/, routing's
// localise()), recording it in the database and in metrics.
#include <arpa/inet.h>

#include <csignal>

#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>

#include <boost/asio/post.hpp>
#include <boost/asio/thread_pool.hpp>
#include <fmt/format.h>

#include "agent_config.h"
#include "cli_common.h"
#include "fleet_args.h"
#include "watch/watch_metrics.h"
#include "watch/watch_publish.h"
#include "watch/watch_state.h"
#include "watch/watch_tuples.h"
#include "weft/agent/control.h"
#include "weft/agent/metrics_server.h"
#include "weft/agent/watcher.h"
#include "weft/db/stores.h"
#include "weft/db/watch_store.h"
#include "weft/probe/wire.h"
#include "weft/common/ipv4.h"

namespace weft::cli {
namespace {

namespace asio = boost::asio;

// What WatchState judges by (watch_state.h on_wall_clock).
uint64_t monotonic_ns() {
  return static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
          .count());
}

struct WatchArgs {
  FleetArgs fleet;
  std::string db = "fabric.db";
  std::string plan;
  std::string metrics;
  std::string publish;
  std::string job;
  // Two source hosts per leaf pair and spine: one whose control connection
  // crosses the failed link is blind until reconnected (docs/watch.md).
  int per_spine = 2;
  int streak = 3;
  int confirm_ms = 150;
  double duration_s = 0;
  agent::WatchConfig cfg;
  const CLI::Option* silence = nullptr;  // unset: four report intervals (WatchConfig::silence_ms)
};

std::atomic<bool> g_stop{false};
void on_signal(int) { g_stop.store(true); }

int run_watch(WatchArgs& a) {
  auto fleet = load_fleet(a.fleet);
  if (!fleet) return fail(fleet.status());
  const std::vector<agent::HostEntry>* hosts = &fleet->hosts;
  const probe::MacKey* secret = &fleet->secret;
  if (a.silence != nullptr && a.silence->count() == 0 && a.cfg.report_ms > 0 && a.cfg.report_ms <= 60000) {
    a.cfg.silence_ms = 4 * a.cfg.report_ms;  // (a --report-ms out of range is validate()'s to name)
  }
  if (Status st = a.cfg.validate(); !st) return fail(st);
  if (a.streak < 1 || a.streak > 1000) return fail(invalid_argument(fmt::format("--streak {} is outside 1..1000", a.streak)));
  if (a.confirm_ms < 0 || a.confirm_ms > 60000) {
    return fail(invalid_argument(fmt::format("--confirm-ms {} is outside 0..60000", a.confirm_ms)));
  }
  auto db = db::Database::open(a.db);
  if (!db) return fail(db.status());
  auto fabric = load_watch_fabric(*db, *hosts);
  if (!fabric) return fail(fabric.status());
  std::optional<routing::RoutePlan> plan;
  if (!a.plan.empty()) {
    auto p = routing::load_plan(a.plan);
    if (!p) return fail(p.status());
    plan = std::move(*p);
  }
  std::optional<PlanPublisher> publisher;
  if (!a.publish.empty()) {
    if (!plan) return fail(invalid_argument("--publish needs the job's plan (--plan)"));
    auto p = PlanPublisher::create(*db, a.db, *plan, a.publish, a.job);
    if (!p) return fail(p.status().with_context("--publish"));
    publisher = std::move(*p);
  }
  auto tuples = choose_watch_tuples(*fabric, *hosts, plan ? &*plan : nullptr, a.per_spine);
  if (!tuples) return fail(tuples.status());
  const size_t planned = static_cast<size_t>(std::count_if(tuples->begin(), tuples->end(),
                                                           [](const WatchTuple& t) { return t.planned; }));
  std::vector<uint32_t> ips;
  for (const auto& h : *hosts) ips.push_back(ipv4_or_zero(h.ip));
  WatchState state(*tuples, ips, fabric->leaves, fabric->spines,
                   {.streak = static_cast<uint32_t>(a.streak), .stale_ms = 3 * static_cast<uint64_t>(a.cfg.report_ms),
                    .confirm_ms = static_cast<uint64_t>(a.confirm_ms), .report_ms = static_cast<uint64_t>(a.cfg.report_ms)});
  std::vector<std::vector<probe::MonitorTuple>> per_host(hosts->size());
  for (size_t h = 0; h < hosts->size(); ++h) per_host[h] = state.tuples_of(static_cast<int>(h));
  a.cfg.dport = fabric->dport;
  fmt::print("watching {} 5-tuples ({} planned) from {} hosts over {} leaves and {} spines, {} probes/s each\n",
             tuples->size(), planned, state.hosts_with_tuples(hosts->size()), fabric->leaves, fabric->spines,
             a.cfg.tuple_rate_pps);
  std::fflush(stdout);

  std::mutex mu;
  WatchTotals totals;
  std::optional<int64_t> open_event;
  std::unique_ptr<agent::MetricsServer> metrics;
  if (!a.metrics.empty()) {
    auto ep = parse_address_port(a.metrics, "--metrics");  // checked when parsed too (register_watch)
    if (!ep) return fail(ep.status());
    agent::MetricsServerConfig mc{.ip = ep->first, .port = ep->second};
    auto srv = agent::MetricsServer::start(mc, [&] {
      std::lock_guard lock(mu);
      return render_watch_metrics(state.counts(monotonic_ns()), totals);
    });
    if (!srv) return fail(srv.status());
    metrics = std::move(*srv);
  }
  // Events are recorded, published and printed on a thread of their own: a
  // database another writer holds (SQLite waits out its busy timeout) or a
  // slow plan directory must not stall the watcher's network thread, whose
  // agents would then read as silent and be reconnected. A failed write is
  // said at once; the first one also fails the exit status.
  Status db_error;
  const auto record = [&](const Status& st) {
    if (st) return;
    fmt::print(stderr, "weft watch: recording a link event in {}: {}\n", a.db, st.message());
    if (db_error) db_error = st;
  };
  struct Pending {
    LinkEvent e;
    WatchCounts c;          // at the event, taken on the network thread
    std::string unhealthy;  // for ambiguous and unexplained events
  };
  const auto act = [&](const Pending& p) {
    const LinkEvent& e = p.e;
    const WatchCounts& c = p.c;
    const auto us = [](uint64_t ns) { return static_cast<int64_t>(ns / 1000); };
    switch (e.kind) {
      case LinkEvent::Kind::kDown: {
        {
          std::lock_guard lock(mu);
          ++totals.down_events;
          totals.last_localise_seconds = static_cast<double>(e.at_ns - e.first_loss_ns) / 1e9;
        }
        db::LinkEventRow row;
        row.link = e.links[0];
        row.first_loss_us = us(e.first_loss_ns);
        row.localised_us = us(e.at_ns);
        row.tuples = static_cast<int64_t>(c.tuples);
        row.failing = static_cast<int64_t>(std::max<size_t>(1, c.failing));
        auto id = db::add_link_down(*db, row);
        if (id) open_event = *id; else record(id.status());
        // A cable (both directions) prints as "l3->s2+s2->l3"; the record
        // and the re-plan name its first direction, the one localised first
        // (a plan avoids the cable).
        fmt::print("down {} first_loss_us={} localised_us={} localise_ms={:.1f} failing={}/{}\n",
                   fmt::join(e.links, "+"), row.first_loss_us, row.localised_us, totals.last_localise_seconds * 1e3,
                   c.failing, c.tuples);
        if (publisher) {
          auto epoch = publisher->publish_without(e.links[0]);
          if (!epoch) {
            fmt::print(stderr, "weft watch: no plan published for {}: {}\n", e.links[0], epoch.status().message());
          } else {
            const int64_t at = us(probe::realtime_ns());
            if (open_event) {
              record(db::set_link_published(*db, *open_event, at));
            }
            fmt::print("published epoch {} without {} published_us={}\n", *epoch, e.links[0], at);
          }
        }
        break;
      }
      case LinkEvent::Kind::kUp:
        {
          std::lock_guard lock(mu);
          ++totals.up_events;
        }
        if (open_event) {
          record(db::set_link_restored(*db, *open_event, us(e.at_ns)));
          open_event.reset();
        }
        fmt::print("up {} restored_us={}\n", e.links[0], us(e.at_ns));
        if (publisher) {
          auto epoch = publisher->publish_full(e.links[0]);
          if (!epoch) {
            fmt::print(stderr, "weft watch: the full plan was not published: {}\n", epoch.status().message());
          } else {
            fmt::print("published epoch {} (the full plan) published_us={}\n", *epoch, us(probe::realtime_ns()));
          }
        }
        break;
      case LinkEvent::Kind::kAmbiguous:
        {
          std::lock_guard lock(mu);
          ++totals.ambiguous;
        }
        fmt::print("ambiguous {} failing={}/{}\n", fmt::join(e.links, " "), c.failing, c.tuples);
        fmt::print(stderr, "weft watch: ambiguous losses:\n{}", p.unhealthy);
        break;
      case LinkEvent::Kind::kUnexplained:
        {
          std::lock_guard lock(mu);
          ++totals.unexplained;
        }
        fmt::print("unexplained failing={}/{}: no single link explains the losses\n", c.failing, c.tuples);
        fmt::print(stderr, "weft watch: unexplained losses:\n{}", p.unhealthy);
        break;
    }
    std::fflush(stdout);
  };
  asio::thread_pool events(1);

  std::signal(SIGINT, on_signal);
  std::signal(SIGTERM, on_signal);
  std::thread timer;
  if (a.duration_s > 0) {
    timer = std::thread([d = a.duration_s] {
      const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(d);
      while (!g_stop.load() && std::chrono::steady_clock::now() < until) {
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      }
      g_stop.store(true);
    });
  }
  const Status st = agent::run_watch(
      *hosts, per_host, *secret, a.cfg,
      [&](size_t host, uint64_t, std::vector<probe::TupleTally> rows, std::vector<agent::Arrival> arrivals) {
        std::lock_guard lock(mu);
        const uint64_t now = monotonic_ns();
        state.update(static_cast<int>(host), rows, now);
        state.arrived(static_cast<int>(host), arrivals, now);
        for (LinkEvent& e : state.evaluate(now)) {
          const bool explain = e.kind == LinkEvent::Kind::kAmbiguous || e.kind == LinkEvent::Kind::kUnexplained;
          WatchCounts c = state.counts(e.at_ns);
          std::string unhealthy = explain ? state.describe_unhealthy(e.at_ns) : std::string();
          Pending p{on_wall_clock(std::move(e), now, probe::realtime_ns()), c, std::move(unhealthy)};
          asio::post(events, [&act, p = std::move(p)] { act(p); });
        }
      },
      [&](size_t host, const Status& why) {
        fmt::print(stderr, "weft watch: agent {} stopped reporting ({}); reconnecting\n", (*hosts)[host].name,
                   why.message());
      },
      [&](size_t host) {
        std::lock_guard lock(mu);
        state.restarted(static_cast<int>(host));
        fmt::print(stderr, "weft watch: agent {} reports again\n", (*hosts)[host].name);
      },
      g_stop);
  g_stop.store(true);
  if (timer.joinable()) timer.join();
  events.join();  // every event found is recorded before the summary
  if (!st) return fail(st);
  if (!db_error) return fail(db_error.with_context("recording link events"));
  const WatchCounts c = state.counts(monotonic_ns());
  fmt::print("stopped: {} probes sent, {} answered, {} lost; {} links down, {} restored\n", c.sent, c.answered, c.lost,
             totals.down_events, totals.up_events);
  return 0;
}

}  // namespace

void register_watch(CLI::App& app, Registry& reg) {
  static WatchArgs a;
  auto* cmd = app.add_subcommand(
      "watch",
      "Watch a job's paths while it runs: every host's agent probes the job's planned\n"
      "5-tuples and, for the rest of the fabric, a port on every spine of every leaf pair\n"
      "(from the newest probe campaign in --db), and reports losses every 100 ms. A\n"
      "directed spine-leaf link that fails is named (the one link every failing path may\n"
      "cross and no healthy one crosses), printed, recorded in the database (link_events)\n"
      "and exported as metrics; its restoration too. Start `weft agent` on every host first.\n"
      "  weft watch --hosts hosts.txt --secret-file secret --db fabric.db --plan plan.json");
  add_fleet_options(cmd, a.fleet);
  cmd->add_option("--db", a.db, "Probe database (paths are read, link events written)")->capture_default_str();
  cmd->add_option("--plan", a.plan, "The job's route plan (weft route -o): its flows' paths are watched");
  cmd->add_option("--rate", a.cfg.tuple_rate_pps, "Probes per second per watched 5-tuple")->capture_default_str();
  cmd->add_option("--per-spine", a.per_spine, "Watched ports per spine per ordered leaf pair")->capture_default_str();
  cmd->add_option("--streak", a.streak, "Probes lost in a row that make a 5-tuple failing")->capture_default_str();
  cmd->add_option("--timeout-ms", a.cfg.timeout_ms, "A probe unanswered this long is lost")->capture_default_str();
  cmd->add_option("--report-ms", a.cfg.report_ms, "How often each agent reports")->capture_default_str();
  a.silence = cmd->add_option("--silence-ms", a.cfg.silence_ms,
                              "An agent silent this long is reconnected on new source ports (its control "
                              "connection may cross a failed link); default: four report intervals");
  cmd->add_option("--confirm-ms", a.confirm_ms, "How long a verdict must hold before it is acted on")
      ->capture_default_str();
  // The same check as `weft agent --metrics` (cmd_agent.cc): a port that is
  // not a number 0..65535 is refused, not read as atoi(3) would (0, or 70000
  // wrapped to 4464).
  cmd->add_option("--metrics", a.metrics, "Serve Prometheus metrics on ADDR:PORT")
      ->check(CLI::Validator([](std::string& v) {
        auto ep = parse_address_port(v, "--metrics");
        return ep ? std::string() : ep.status().message();
      }, "ADDR:PORT"));
  cmd->add_option("--publish", a.publish,
                  "On a link down, re-plan the job (--plan) without it and write the plan epoch to this file; "
                  "on its restore, the job's plan as the next epoch");
  cmd->add_option("--job", a.job, "The job's id, as the job names it (CommConfig::job, WEFT_JOB): epochs carry it");
  cmd->add_option("--duration", a.duration_s, "Stop after this many seconds (0 = until SIGINT/SIGTERM)")
      ->capture_default_str();
  cmd->callback([&reg] { reg.run = [] { return run_watch(a); }; });
}

}  // namespace weft::cli
