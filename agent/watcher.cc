// run_watch (watcher.h) on Boost.Asio coroutines, one per agent, over the
// controller's connection helpers (controller_internal.h).
#include "controller_internal.h"
#include "weft/agent/watcher.h"

#include <memory>

#include <spdlog/spdlog.h>

namespace weft::agent {

using namespace internal;

Status WatchConfig::validate() const {
  if (!(tuple_rate_pps > 0 && tuple_rate_pps <= 10000)) {
    return invalid_argument(fmt::format("watch rate {} probes/s per 5-tuple is outside (0, 10000]", tuple_rate_pps));
  }
  if (timeout_ms < 1 || timeout_ms > 10000) return invalid_argument(fmt::format("probe timeout {} ms is outside 1..10000", timeout_ms));
  if (report_ms < 10 || report_ms > 60000) return invalid_argument(fmt::format("report interval {} ms is outside 10..60000", report_ms));
  if (silence_ms <= report_ms) return invalid_argument(fmt::format("silence {} ms must exceed the report interval {} ms", silence_ms, report_ms));
  return Status::ok();
}

namespace {

struct Shared {
  asio::io_context io;
  std::vector<std::unique_ptr<Conn>> conns;
  size_t announced = 0;
  Status first_error;
  bool started = false;  // every agent has the key: the monitors may begin
};

asio::awaitable<void> sleep_ms(asio::io_context& io, int ms) {
  asio::steady_timer t(io, std::chrono::milliseconds(ms));
  boost::system::error_code ec;
  co_await t.async_wait(asio::redirect_error(asio::use_awaitable, ec));
}

// Connects, announces the key, waits until every agent has it (a probe that
// reaches a reflector without the key would be counted lost), orders the
// monitor and reads its reports.
asio::awaitable<void> watch_one(Shared& sh, Conn& c, const probe::MacKey& secret, std::vector<uint32_t> host_ips,
                                MonitorCommand cmd, const WatchConfig& cfg, const WatchReport& on_report,
                                const WatchFailure& on_failure) {
  auto setup_failed = [&](const Status& st) {
    if (sh.first_error.is_ok()) sh.first_error = st;
    sh.io.stop();
  };
  Status st = co_await connect_and_auth(c, secret, host_ips, cfg.connect_timeout_ms);
  if (!st) {
    setup_failed(st);
    co_return;
  }
  const json announce = {{"type", "announce"}, {"run", cmd.run}, {"nonce", cmd.nonce}};
  st = co_await write_msg(c, announce, cfg.connect_timeout_ms);
  if (st) st = (co_await expect(c, "ok", cfg.connect_timeout_ms)).status();
  if (!st) {
    setup_failed(st);
    co_return;
  }
  ++sh.announced;
  while (!sh.started) co_await sleep_ms(sh.io, 5);
  const json order = encode_monitor(cmd);
  st = co_await write_msg(c, order, cfg.connect_timeout_ms);
  if (!st) {
    setup_failed(st);
    co_return;
  }
  auto ok = co_await expect(c, "ok", cfg.connect_timeout_ms);
  if (!ok) {
    setup_failed(ok.status());
    co_return;
  }
  if (ok->body.value("rate", cmd.plan.rate_pps) < cmd.plan.rate_pps) {
    spdlog::warn("{}: rate capped to {} probes/s by the agent's --max-rate", c.where(), ok->body["rate"].get<double>());
  }
  for (;;) {
    auto m = co_await read_msg(c, cfg.silence_ms);
    if (!m) {
      on_failure(static_cast<size_t>(c.index), m.status());
      co_return;
    }
    if (m->type != "monitor_report") continue;  // a keep-alive's "status"
    std::vector<probe::TupleTally> rows;
    for (const auto& r : m->body["rows"]) rows.push_back(*decode_tally(r));
    std::vector<Arrival> arrivals;
    if (m->body.contains("arrivals")) {
      for (const auto& a : m->body["arrivals"]) arrivals.push_back(*decode_arrival(a));
    }
    on_report(static_cast<size_t>(c.index), m->body["t_ns"].get<uint64_t>(), std::move(rows), std::move(arrivals));
  }
}

// The agent closes a session silent for its idle timeout (10 min by
// default): a status request now and then keeps the watcher's open.
asio::awaitable<void> keep_alive(Shared& sh, Conn& c, const WatchConfig& cfg) {
  for (;;) {
    co_await sleep_ms(sh.io, 30000);
    if (!c.sock.is_open()) co_return;
    const json req = {{"type", "status"}};
    if (!co_await write_msg(c, req, cfg.connect_timeout_ms)) co_return;
  }
}

asio::awaitable<void> supervise(Shared& sh, const std::atomic<bool>& stop) {
  for (;;) {
    if (!sh.started && sh.announced == sh.conns.size()) sh.started = true;
    if (stop.load()) {
      for (auto& c : sh.conns) {
        boost::system::error_code ec;
        c->sock.close(ec);
      }
      sh.io.stop();
      co_return;
    }
    co_await sleep_ms(sh.io, 10);
  }
}

}  // namespace

Status run_watch(const std::vector<HostEntry>& hosts, const std::vector<std::vector<probe::MonitorTuple>>& tuples,
                 const probe::MacKey& secret, const WatchConfig& cfg, const WatchReport& on_report,
                 const WatchFailure& on_failure, const std::atomic<bool>& stop) {
  WEFT_RETURN_IF_ERROR(cfg.validate());
  if (tuples.size() != hosts.size()) {
    return invalid_argument(fmt::format("{} tuple lists for {} hosts", tuples.size(), hosts.size()));
  }
  std::vector<uint32_t> ips;
  for (const auto& h : hosts) ips.push_back(parse_ip(h.ip));
  MonitorCommand base;
  const std::vector<uint8_t> id = probe::random_bytes(4);
  base.run = (uint32_t{id[0]} << 24 | uint32_t{id[1]} << 16 | uint32_t{id[2]} << 8 | id[3]) | 1u;  // not 0
  base.nonce = probe::to_hex(probe::random_bytes(16));
  base.dport = cfg.dport;
  base.probe_dscp = cfg.probe_dscp;
  base.plan.timeout_ms = cfg.timeout_ms;
  base.plan.report_ms = cfg.report_ms;
  Shared sh;
  for (size_t i = 0; i < hosts.size(); ++i) {
    auto c = std::make_unique<Conn>(sh.io);
    c->host = hosts[i];
    c->index = static_cast<int>(i);
    MonitorCommand cmd = base;
    cmd.plan.tuples = tuples[i];
    cmd.plan.rate_pps = std::max(1.0, static_cast<double>(tuples[i].size()) * cfg.tuple_rate_pps);
    WEFT_RETURN_IF_ERROR(cmd.plan.validate().with_context(c->where()));
    asio::co_spawn(sh.io, watch_one(sh, *c, secret, ips, std::move(cmd), cfg, on_report, on_failure), asio::detached);
    asio::co_spawn(sh.io, keep_alive(sh, *c, cfg), asio::detached);
    sh.conns.push_back(std::move(c));
  }
  asio::co_spawn(sh.io, supervise(sh, stop), asio::detached);
  sh.io.run();
  return sh.first_error;
}

}  // namespace weft::agent
