// run_watch (watcher.h) on Boost.Asio coroutines, one per agent, over the
// controller's connection helpers (controller_internal.h).
#include "controller_internal.h"
#include "weft/agent/watcher.h"

#include <algorithm>
#include <memory>
#include <utility>

#include <spdlog/spdlog.h>

#include "weft/common/ipv4.h"

namespace weft::agent {

using namespace internal;

Status WatchConfig::validate() const {
  if (!(tuple_rate_pps > 0 && tuple_rate_pps <= 10000)) {
    return invalid_argument(fmt::format("watch rate {} probes/s per 5-tuple is outside (0, 10000]", tuple_rate_pps));
  }
  if (timeout_ms < 1 || timeout_ms > 10000) return invalid_argument(fmt::format("probe timeout {} ms is outside 1..10000", timeout_ms));
  if (report_ms < 10 || report_ms > 60000) return invalid_argument(fmt::format("report interval {} ms is outside 10..60000", report_ms));
  if (silence_ms <= report_ms) return invalid_argument(fmt::format("silence {} ms must exceed the report interval {} ms", silence_ms, report_ms));
  if (silence_ms > 600000) return invalid_argument(fmt::format("silence {} ms is over 10 minutes", silence_ms));
  return ok_status();
}

namespace {

struct Shared {
  asio::io_context io;
  std::vector<std::unique_ptr<Conn>> conns;
  size_t announced = 0;
  Status first_error;
  bool started = false;  // every agent has the key: the monitors may begin
  bool stopping = false;
  std::vector<bool> live;  // per agent: a session is up and reporting
};

// Ends the watch with `st` (the first error wins): the other agents' waits
// for every session to start would otherwise spin on.
void stop_with(Shared& sh, Status st) {
  if (sh.first_error.is_ok()) sh.first_error = std::move(st);
  sh.io.stop();
}

asio::awaitable<void> sleep_ms(asio::io_context& io, int ms) {
  asio::steady_timer t(io, std::chrono::milliseconds(ms));
  boost::system::error_code ec;
  co_await t.async_wait(asio::redirect_error(asio::use_awaitable, ec));
}

// One session with an agent: connects, announces the key, (the first time)
// waits until every agent has it (a probe that reaches a reflector without
// the key would be counted lost) and orders the monitor.
// `retry` counts a reconnection's attempts from 1 (0: the first session).
asio::awaitable<Status> open_session(Shared& sh, Conn& c, const probe::MacKey& secret,
                                     const std::vector<uint32_t>& host_ips, const MonitorCommand& cmd,
                                     const WatchConfig& cfg, int retry) {
  const bool first = retry == 0;
  c.sealer.reset();  // a new connection starts unsealed
  c.opener.reset();
  if (first) {
    WEFT_CO_RETURN_IF_ERROR(co_await connect_and_auth(c, secret, host_ips, cfg.connect_timeout_ms));
  } else {
    // A reconnection's SYN may hash onto the failed link its old connection
    // crossed: two race from two source ports (connect_first), and a SYN
    // unanswered for half the silence is taken as lost there (a SYN is resent
    // only after the initial RTO of 1 s: RFC 6298 section 2.1), the next
    // attempt's ports hashing afresh. Each retry waits twice as long for the
    // SYN and for the handshake, so a slow but healthy path or a busy agent
    // still gets through.
    const int backoff = std::min(retry - 1, 8);
    const int connect_ms = std::min(cfg.connect_timeout_ms, (cfg.silence_ms / 2) << backoff);
    const int handshake_ms = std::min(cfg.connect_timeout_ms, cfg.silence_ms << backoff);
    WEFT_CO_RETURN_IF_ERROR(co_await connect_and_auth(c, secret, host_ips, handshake_ms, 2, connect_ms));
  }
  const json announce = {{"type", "announce"}, {"run", cmd.run}, {"nonce", cmd.nonce}};
  WEFT_CO_RETURN_IF_ERROR(co_await write_msg(c, announce, cfg.connect_timeout_ms));
  WEFT_CO_RETURN_IF_ERROR((co_await expect(c, "ok", cfg.connect_timeout_ms)).status());
  if (first) {
    ++sh.announced;
    while (!sh.started) co_await sleep_ms(sh.io, 5);
  }
  const json order = encode_monitor(cmd);
  WEFT_CO_RETURN_IF_ERROR(co_await write_msg(c, order, cfg.connect_timeout_ms));
  auto ok = co_await expect(c, "ok", cfg.connect_timeout_ms);
  if (!ok) co_return ok.status();
  if (first && ok->body.value("rate", cmd.plan.rate_pps) < cmd.plan.rate_pps) {
    spdlog::warn("{}: rate capped to {} probes/s by the agent's --max-rate", c.where(), ok->body["rate"].get<double>());
  }
  co_return ok_status();
}

// Hands the session's reports on until it fails or stays silent for
// cfg.silence_ms; `reporting` is called at its first report.
asio::awaitable<Status> read_reports(Conn& c, const WatchConfig& cfg, const WatchReport& on_report,
                                     const std::function<void()>& reporting) {
  for (bool first = true;;) {
    auto m = co_await read_msg(c, cfg.silence_ms);
    if (!m) co_return m.status();
    if (m->type != "monitor_report") continue;  // a keep-alive's "status"
    std::vector<probe::TupleTally> rows;
    for (const auto& r : m->body["rows"]) rows.push_back(*decode_tally(r));
    std::vector<Arrival> arrivals;
    if (m->body.contains("arrivals")) {
      for (const auto& a : m->body["arrivals"]) arrivals.push_back(*decode_arrival(a));
    }
    if (std::exchange(first, false)) reporting();
    on_report(static_cast<size_t>(c.index), m->body["t_ns"].get<uint64_t>(), std::move(rows), std::move(arrivals));
  }
}

// An agent's whole watch. Setup failures end the watch (a wrong secret or
// host list is the user's to fix); a session that fails later, or falls
// silent, is reported and replaced: the control connection shares the fabric
// with the links being watched, and a new connection (a new source port)
// hashes onto other paths, so the agent comes back while its old path is
// still down. The agent hands the run to the new session (control.h).
asio::awaitable<void> watch_one(Shared& sh, Conn& c, const probe::MacKey& secret, std::vector<uint32_t> host_ips,
                                MonitorCommand cmd, const WatchConfig& cfg, const WatchReport& on_report,
                                const WatchFailure& on_failure, const WatchRecovery& on_recovery) {
  const size_t index = static_cast<size_t>(c.index);
  if (Status st = co_await open_session(sh, c, secret, host_ips, cmd, cfg, 0); !st) {
    stop_with(sh, std::move(st));
    co_return;
  }
  // The first attempt at once (the agent has been silent long enough); then
  // backing off from 50 ms up to the silence. The back-off holds until a
  // session reports: one the agent accepts and then ends at once (its monitor
  // cannot open its probe socket) is retried no faster than one that fails
  // to connect.
  int retry = 1, delay_ms = 0;
  const auto back_off = [&] {
    retry = std::min(retry + 1, 9);
    delay_ms = std::min(std::max(2 * delay_ms, 50), cfg.silence_ms);
  };
  for (bool lost = false;;) {
    sh.live[index] = true;
    const Status why = co_await read_reports(c, cfg, on_report, [&] {
      retry = 1;
      delay_ms = 0;
      if (std::exchange(lost, false)) on_recovery(index);
    });
    sh.live[index] = false;
    if (sh.stopping) co_return;
    if (!lost) on_failure(index, why);
    lost = true;
    for (;; back_off()) {
      boost::system::error_code ec;
      c.sock.close(ec);
      if (delay_ms > 0) co_await sleep_ms(sh.io, delay_ms);
      if (sh.stopping) co_return;
      if (co_await open_session(sh, c, secret, host_ips, cmd, cfg, retry)) break;
    }
    back_off();  // the next reconnection, if this session ends before it reports
  }
}

// The agent closes a session silent for its idle timeout (10 min by
// default): a status request now and then keeps the watcher's open.
asio::awaitable<void> keep_alive(Shared& sh, Conn& c, const WatchConfig& cfg) {
  for (;;) {
    co_await sleep_ms(sh.io, 30000);
    if (sh.stopping) co_return;
    if (!sh.live[static_cast<size_t>(c.index)]) continue;  // reconnecting: the handshake owns the socket
    const json req = {{"type", "status"}};
    (void)co_await write_msg(c, req, cfg.connect_timeout_ms);  // a failure shows in the reports' silence
  }
}

asio::awaitable<void> supervise(Shared& sh, const std::atomic<bool>& stop) {
  for (;;) {
    if (!sh.started && sh.announced == sh.conns.size()) sh.started = true;
    if (stop.load()) {
      sh.stopping = true;
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
                 const WatchFailure& on_failure, const WatchRecovery& on_recovery, const std::atomic<bool>& stop) {
  WEFT_RETURN_IF_ERROR(cfg.validate());
  if (tuples.size() != hosts.size()) {
    return invalid_argument(fmt::format("{} tuple lists for {} hosts", tuples.size(), hosts.size()));
  }
  std::vector<uint32_t> ips;
  for (const auto& h : hosts) ips.push_back(ipv4_or_zero(h.ip));
  MonitorCommand base;
  const std::vector<uint8_t> id = probe::random_bytes(4);
  base.run = (uint32_t{id[0]} << 24 | uint32_t{id[1]} << 16 | uint32_t{id[2]} << 8 | id[3]) | 1u;  // not 0
  base.nonce = probe::to_hex(probe::random_bytes(16));
  base.dport = cfg.dport;
  base.probe_dscp = cfg.probe_dscp;
  base.plan.timeout_ms = cfg.timeout_ms;
  base.plan.report_ms = cfg.report_ms;
  Shared sh;
  sh.live.assign(hosts.size(), false);
  for (size_t i = 0; i < hosts.size(); ++i) {
    auto c = std::make_unique<Conn>(sh.io);
    c->host = hosts[i];
    c->index = static_cast<int>(i);
    MonitorCommand cmd = base;
    cmd.plan.tuples = tuples[i];
    cmd.plan.rate_pps = std::max(1.0, static_cast<double>(tuples[i].size()) * cfg.tuple_rate_pps);
    WEFT_RETURN_IF_ERROR(cmd.plan.validate().with_context(c->where()));
    asio::co_spawn(sh.io, watch_one(sh, *c, secret, ips, std::move(cmd), cfg, on_report, on_failure, on_recovery),
                   on_exception([&sh](Status st) { stop_with(sh, std::move(st)); }));
    asio::co_spawn(sh.io, keep_alive(sh, *c, cfg), on_exception([&sh](Status st) { stop_with(sh, std::move(st)); }));
    sh.conns.push_back(std::move(c));
  }
  asio::co_spawn(sh.io, supervise(sh, stop), on_exception([&sh](Status st) { stop_with(sh, std::move(st)); }));
  sh.io.run();
  return sh.first_error;
}

}  // namespace weft::agent
