// run_probe (controller.h): connect, announce, sweep, store, infer.
#include "controller_internal.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <memory>
#include <unordered_map>

#include <fmt/ranges.h>

#include "weft/common/ipv4.h"
#include "weft/probe/inference.h"

namespace weft::agent {

using namespace internal;  // NOLINT: the controller's own helpers
using Clock = std::chrono::steady_clock;

namespace {

struct Run {
  db::Database& db;
  const ProbeRunConfig& cfg;
  int64_t campaign = 0;
  std::unordered_map<uint32_t, int64_t> id_of_ip;
  std::vector<db::Observation> pending;
  db::ObservationWriter writer;
  Status failure;
  int64_t flows = 0, expected = 0;
  ProbeSummary* summary = nullptr;
  Clock::time_point start = Clock::now();
  int pairs_done = 0, pairs_total = 0;

  // Closes every session: called once, on the first failure.
  std::function<void()> stop_all;

  Run(db::Database& d, const ProbeRunConfig& c) : db(d), cfg(c), writer(d) {}

  // The first failure ends the run at once: every session is closed, so the
  // other hosts' sweeps stop (an agent cancels its sweeps when the
  // controller goes) instead of probing on, perhaps for hours, into rows
  // this run no longer stores, or towards an agent that is gone, whose
  // unanswered probes a resume would take as measured. What was stored
  // before stays; rerunning the command resumes from it.
  void fail(Status st) {
    if (!failure.is_ok()) return;
    failure = std::move(st);
    if (stop_all) stop_all();
  }

  void flush() {
    if (pending.empty() || !failure.is_ok()) return;
    auto r = writer.write_batch(campaign, pending);
    if (!r) fail(r.status().with_context("storing observations"));
    pending.clear();
  }

  void add(int64_t src_id, const probe::FlowResult& f) {
    auto dst = id_of_ip.find(f.dst_ip);
    if (dst == id_of_ip.end()) {
      fail(data_loss(fmt::format("an agent reported a probe to {}, not a host of this campaign", ipv4_str(f.dst_ip))));
      return;
    }
    db::Observation o;
    o.src_id = src_id;
    o.dst_id = dst->second;
    o.protocol = cfg.backend == "tcp-syn" ? 6 : 17;
    o.sport = f.sport;
    o.dport = cfg.dport;
    if (f.answered > 0) {
      if (f.hop_ip) o.hop_addr = ipv4_str(f.hop_ip);
      else if (f.spine >= 0 && cfg.method == "dscp") o.spine = f.spine;
      else if (cfg.method == "ttl") o.spine = 0;  // reached the destination: no spine expired it
      if (f.dscp_seen >= 0 && cfg.method == "dscp") o.dscp_seen = f.dscp_seen;
      o.rtt_us = static_cast<int64_t>(f.min_rtt_ns / 1000);
    }
    o.sent = f.sent;
    o.answered = f.answered;
    o.unstable = f.unstable;
    if (f.unstable && f.other_spine >= 0 && cfg.method == "dscp") o.other_spine = f.other_spine;
    o.observed_us = db::now_us();
    pending.push_back(std::move(o));
    ++flows;
    if (static_cast<int>(pending.size()) >= cfg.batch_rows) flush();
  }

  void draw_progress(bool final_line) {
    if (!cfg.progress) return;
    const double secs = std::chrono::duration<double>(Clock::now() - start).count();
    const int64_t total = std::max<int64_t>(expected, 1);
    const double frac = cfg.pairs ? static_cast<double>(pairs_done) / std::max(pairs_total, 1)
                                  : std::min(1.0, static_cast<double>(flows) / static_cast<double>(total));
    const int width = 30, filled = static_cast<int>(frac * width);
    const double rate = secs > 0 ? static_cast<double>(flows) / secs : 0;
    const double eta = frac > 0 ? secs * (1 - frac) / frac : 0;
    std::fprintf(stderr, "\r[%s%s] %3d%%  %lld flows  %.0f/s  ETA %.0fs ", std::string(filled, '#').c_str(),
                 std::string(width - filled, '.').c_str(), static_cast<int>(frac * 100), static_cast<long long>(flows),
                 rate, eta);
    if (final_line) std::fprintf(stderr, "\n");
    std::fflush(stderr);
  }
};

asio::awaitable<void> sweep(Conn& c, Run& run, CampaignCommand cmd, ProbeSummary& sum,
                            const std::vector<HostEntry>& hosts) {
  if (!c.opener) {  // only an authenticated session's frames are results
    run.fail(internal_error(c.where() + ": sweep on a session that is not authenticated"));
    co_return;
  }
  // Resume: the skip set goes first, in bounded frames (control.h).
  const std::vector<json> skips = encode_skip(cmd.run, cmd.plan.skip);
  cmd.skip_frames = static_cast<uint32_t>(skips.size());
  for (const auto& f : skips) {
    Status st = co_await write_msg(c, f, 10000);
    if (!st) {
      run.fail(st);
      co_return;
    }
  }
  Status st = co_await write_msg(c, encode_campaign(cmd), 10000);
  if (!st) {
    run.fail(st);
    co_return;
  }
  const int silence_ms = sweep_silence_ms(cmd.plan);
  for (;;) {
    auto m = co_await read_msg(c, silence_ms);
    if (!m) {
      run.fail(m.status().with_context("mid-campaign (rerun the same command to resume)"));
      co_return;
    }
    if (m->type == "results") {
      for (const auto& row : m->body["rows"]) run.add(c.host_id, *decode_flow(row));
    } else if (m->type == "done") {
      sum.senders += decode_stats(m->body["stats"]);
      for (const auto& s : m->body["spend"]) {
        if (!s.is_array() || s.size() != 4 || !s[0].is_number_unsigned() || !s[1].is_number_integer()) continue;
        const uint32_t dst = s[0].get<uint32_t>();
        std::string name = ipv4_str(dst);
        for (const auto& h : hosts) if (ipv4_or_zero(h.ip) == dst) name = h.name;
        sum.spend.push_back({c.host.name + "->" + name, s[1].get<int>()});
        if (s[3].is_boolean() && !s[3].get<bool>()) sum.incomplete.push_back(c.host.name + "->" + name);
        ++run.pairs_done;
      }
      c.done = true;
      co_return;
    } else {
      run.fail(data_loss(fmt::format("{}: unexpected '{}' during a campaign", c.where(), m->type)));
      co_return;
    }
  }
}

bool all_done(const std::vector<std::unique_ptr<Conn>>& conns) {
  return std::all_of(conns.begin(), conns.end(), [](const auto& c) { return c->done; });
}

asio::awaitable<void> ticker(Run& run, std::vector<std::unique_ptr<Conn>>& conns) {
  asio::steady_timer t(co_await asio::this_coro::executor);
  for (;;) {
    if (all_done(conns) || !run.failure.is_ok()) co_return;
    t.expires_after(std::chrono::milliseconds(200));
    co_await t.async_wait(asio::use_awaitable);
    run.flush();
    run.draw_progress(false);
  }
}

// Keeps `c`'s session open while other hosts still sweep (ProbeRunConfig::
// keep_open_ms): once its own sweep is done (or it has none), nothing else
// reads or writes it until phase 3, so the status exchange cannot interleave.
asio::awaitable<void> keep_open(Conn& c, Run& run, std::vector<std::unique_ptr<Conn>>& conns, int every_ms,
                                int timeout_ms) {
  asio::steady_timer t(co_await asio::this_coro::executor);
  auto last = Clock::now();
  for (;;) {
    t.expires_after(std::chrono::milliseconds(std::min(every_ms, 200)));
    co_await t.async_wait(asio::use_awaitable);
    if (all_done(conns) || !run.failure.is_ok()) co_return;
    if (!c.done) {  // its sweep's frames keep it open; its end counts as one
      last = Clock::now();
      continue;
    }
    if (Clock::now() - last < std::chrono::milliseconds(every_ms)) continue;
    auto st = co_await reflector_stats(c, timeout_ms);
    if (!st) {
      run.fail(st.status().with_context("keeping the session open while others sweep"));
      co_return;
    }
    last = Clock::now();
  }
}

// Runs every coroutine produced by make(i) to completion on a fresh io_context.
template <typename F>
void run_all(asio::io_context& io, Run& run, size_t n, F make) {
  io.restart();
  for (size_t i = 0; i < n; ++i) asio::co_spawn(io, make(i), on_exception([&run](Status st) { run.fail(st); }));
  io.run();
}

Status store_results(db::Database& db, int64_t campaign, const std::vector<db::HostRow>& hosts, bool ttl,
                     ProbeSummary& sum) {
  WEFT_ASSIGN_OR_RETURN(std::vector<db::Observation> obs, db::load_observations(db, campaign));
  std::map<int, std::string> spine_addr;
  if (ttl) {
    spine_addr = probe::number_ttl_spines(obs);
    WEFT_ASSIGN_OR_RETURN(db::Transaction tx, db.begin());
    WEFT_ASSIGN_OR_RETURN(db::Statement up, db.prepare(
        "UPDATE observations SET spine = ? WHERE campaign_id = ? AND src_id = ? AND dst_id = ? AND protocol = ? "
        "AND sport = ? AND dport = ?"));
    for (const auto& o : obs) {
      if (!o.spine) continue;
      WEFT_RETURN_IF_ERROR(up.bind_all(*o.spine, campaign, o.src_id, o.dst_id, o.protocol, o.sport, o.dport));
      WEFT_RETURN_IF_ERROR(up.step_done());
    }
    WEFT_RETURN_IF_ERROR(tx.commit());
  }
  probe::Inference inf = probe::infer_fabric(hosts, obs, spine_addr);
  WEFT_RETURN_IF_ERROR(db::save_inference(db, campaign, inf.fabric));
  WEFT_RETURN_IF_ERROR(db.exec(fmt::format("DELETE FROM anomalies WHERE campaign_id = {}", campaign)));
  WEFT_RETURN_IF_ERROR(db::add_anomalies(db, campaign, inf.anomalies));
  sum.flows_total = static_cast<int64_t>(obs.size());
  for (const auto& o : obs) {
    if (o.answered > 0) ++sum.answered_flows;
    if (o.spine) ++sum.flows_per_spine[*o.spine];
  }
  sum.leaves = inf.leaves;
  sum.spines = static_cast<int>(inf.fabric.spines.size());
  sum.anomalies = inf.anomalies;
  return ok_status();
}

}  // namespace

Result<ProbeSummary> run_probe(db::Database& db, const std::vector<HostEntry>& hosts, const probe::MacKey& secret,
                               const ProbeRunConfig& cfg) {
  WEFT_RETURN_IF_ERROR(cfg.validate());
  ProbeSummary sum;
  sum.hosts = static_cast<int>(hosts.size());
  sum.targeted = cfg.pairs.has_value();
  Run run(db, cfg);
  run.summary = &sum;
  std::vector<db::HostRow> rows;
  for (const auto& h : hosts) {
    const std::string agent = fmt::format("{}:{}", h.ip, h.control_port);
    WEFT_ASSIGN_OR_RETURN(int64_t id, db::upsert_host(db, {0, h.name, h.ip, agent}));
    rows.push_back({id, h.name, h.ip, agent});
    run.id_of_ip[ipv4_or_zero(h.ip)] = id;
  }
  const db::CampaignSpec spec = cfg.spec(hosts);
  WEFT_ASSIGN_OR_RETURN(std::optional<int64_t> resume, db::find_running_campaign(db, spec.fingerprint()));
  // Resume: what each source host recorded, as port ranges per destination.
  std::unordered_map<int64_t, probe::SkipSet> skip_of;
  int64_t recorded = 0;
  if (resume) {
    run.campaign = *resume;
    sum.resumed = true;
    std::unordered_map<int64_t, uint32_t> ip_of;
    for (const auto& r : rows) ip_of[r.id] = ipv4_or_zero(r.ip);
    WEFT_ASSIGN_OR_RETURN(recorded, db::for_each_recorded(db, run.campaign, cfg.backend == "tcp-syn" ? 6 : 17, cfg.dport,
                                                          [&](int64_t src, int64_t dst, int sport) {
                                                            auto ip = ip_of.find(dst);
                                                            if (ip == ip_of.end()) return;
                                                            skip_of[src].add(ip->second, static_cast<uint16_t>(sport));
                                                          }));
  } else {
    WEFT_ASSIGN_OR_RETURN(run.campaign, db::create_campaign(db, spec));
  }
  sum.campaign_id = run.campaign;

  // Targets per source host.
  std::vector<std::vector<int>> targets(hosts.size());
  if (cfg.pairs) {
    for (const auto& [a, b] : *cfg.pairs) {
      if (a < 0 || b < 0 || a >= sum.hosts || b >= sum.hosts || a == b) {
        return invalid_argument(fmt::format("pair ({}, {}) names no two distinct hosts of {}", a, b, sum.hosts));
      }
      targets[static_cast<size_t>(a)].push_back(b);
    }
  } else {
    for (int a = 0; a < sum.hosts; ++a)
      for (int b = 0; b < sum.hosts; ++b)
        if (a != b) targets[static_cast<size_t>(a)].push_back(b);
  }
  asio::io_context io;
  std::vector<std::unique_ptr<Conn>> conns;
  for (size_t i = 0; i < hosts.size(); ++i) {
    if (targets[i].empty() && cfg.pairs) continue;
    sum.pairs += static_cast<int>(targets[i].size());
    auto c = std::make_unique<Conn>(io);
    c->host = hosts[i];
    c->index = static_cast<int>(i);
    c->host_id = rows[i].id;
    conns.push_back(std::move(c));
  }
  // Every host reflects, also those that send nothing in a targeted campaign.
  for (size_t i = 0; i < hosts.size(); ++i) {
    bool present = false;
    for (auto& c : conns) present = present || c->index == static_cast<int>(i);
    if (present) continue;
    auto c = std::make_unique<Conn>(io);
    c->host = hosts[i];
    c->index = static_cast<int>(i);
    c->host_id = rows[i].id;
    c->done = true;
    conns.push_back(std::move(c));
  }
  run.stop_all = [&conns] {
    for (auto& c : conns) {
      boost::system::error_code ec;
      c->sock.close(ec);
    }
  };
  run.pairs_total = sum.pairs;
  run.expected = static_cast<int64_t>(sum.pairs) * cfg.sport_count - recorded;

  const uint32_t run_id = [] {
    auto b = probe::random_bytes(4);
    return (static_cast<uint32_t>(b[0]) << 24 | b[1] << 16 | b[2] << 8 | b[3]) | 1u;
  }();
  const std::string nonce = probe::to_hex(probe::random_bytes(16));
  const int to = cfg.connect_timeout_ms;
  std::vector<uint32_t> host_ips;
  for (const auto& h : hosts) host_ips.push_back(ipv4_or_zero(h.ip));

  // 1. connect, authenticate, announce the key, read reflector counters.
  run_all(io, run, conns.size(), [&](size_t i) -> asio::awaitable<void> {  // NOLINT
    Conn& c = *conns[i];
    Status st = co_await connect_and_auth(c, secret, host_ips, to);
    const json announce = {{"type", "announce"}, {"run", run_id}, {"nonce", nonce}};
    if (st) st = co_await write_msg(c, announce, to);
    if (st) st = (co_await expect(c, "ok", to)).status();
    if (st) {
      auto before = co_await reflector_stats(c, to);
      if (before) c.reflector_before = *before;
      st = before.status();
    }
    if (!st) run.fail(st);
  });
  WEFT_RETURN_IF_ERROR(run.failure);

  // 2. sweep from every source host at once; the ticker flushes and draws.
  const auto t0 = Clock::now();
  run.start = t0;
  io.restart();
  for (auto& cp : conns) {
    Conn& c = *cp;
    if (c.done) continue;
    CampaignCommand cmd;
    cmd.run = run_id;
    cmd.nonce = nonce;
    cmd.method = cfg.method;
    cmd.backend = cfg.backend;
    cmd.dport = cfg.dport;
    cmd.probe_dscp = cfg.probe_dscp;
    auto& p = cmd.plan;
    for (int t : targets[static_cast<size_t>(c.index)]) p.targets.push_back(ipv4_or_zero(hosts[static_cast<size_t>(t)].ip));
    p.sport_first = cfg.sport_first;
    p.sport_count = cfg.sport_count;
    p.probes_per_port = cfg.probes_per_port;
    p.rate_pps = cfg.rate_pps;
    p.timeout_ms = cfg.timeout_ms;
    p.retries = cfg.retries;
    p.port_window = cfg.port_window;
    p.stop_at_spines = cfg.stop_at_spines;
    p.ports_per_spine = cfg.ports_per_spine > 0
                            ? cfg.ports_per_spine
                            : std::max<int>(1, static_cast<int>(targets[static_cast<size_t>(c.index)].size()));
    if (auto sk = skip_of.find(c.host_id); sk != skip_of.end()) p.skip = std::move(sk->second);
    asio::co_spawn(io, sweep(c, run, std::move(cmd), sum, hosts), on_exception([&run](Status st) { run.fail(st); }));
  }
  for (auto& cp : conns) {
    asio::co_spawn(io, keep_open(*cp, run, conns, cfg.keep_open_ms, to),
                   on_exception([&run](Status st) { run.fail(st); }));
  }
  asio::co_spawn(io, ticker(run, conns), on_exception([&run](Status st) { run.fail(st); }));
  io.run();
  run.flush();
  run.draw_progress(true);
  sum.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  sum.flows = run.flows;
  WEFT_RETURN_IF_ERROR(run.failure);

  // 3. reflector counters after, retire the key.
  run_all(io, run, conns.size(), [&](size_t i) -> asio::awaitable<void> {  // NOLINT
    Conn& c = *conns[i];
    auto after = co_await reflector_stats(c, to);
    if (!after) {
      run.fail(after.status());
      co_return;
    }
    c.reflector_after = *after;
    const json retire = {{"type", "retire"}, {"run", run_id}};
    Status st = co_await write_msg(c, retire, to);
    if (st) st = (co_await expect(c, "ok", to)).status();
    if (!st) run.fail(st);
  });
  WEFT_RETURN_IF_ERROR(run.failure);
  for (auto& c : conns) sum.reflectors += minus(c->reflector_after, c->reflector_before);

  // 4. rejections, inference, done.
  std::map<std::string, int64_t> rejected = sum.senders.rejected_by_name();
  for (const auto& [k, v] : sum.reflectors.rejected_by_name()) rejected[k] += v;
  WEFT_RETURN_IF_ERROR(db::add_rejections(db, run.campaign, rejected));
  WEFT_RETURN_IF_ERROR(store_results(db, run.campaign, rows, cfg.method == "ttl", sum));
  WEFT_RETURN_IF_ERROR(db::finish_campaign(db, run.campaign, "done"));
  return sum;
}

std::string format_summary(const ProbeSummary& s) {
  std::string out = fmt::format("campaign {}{}: {} hosts, {} directed pairs, {} 5-tuples ({} answered) in {:.2f} s\n",
                                s.campaign_id, s.resumed ? " (resumed)" : "", s.hosts, s.pairs, s.flows_total,
                                s.answered_flows, s.seconds);
  out += fmt::format("probes: {} sent, {} answered, {} timed out, {} retried, {} rejected\n", s.senders.sent,
                     s.senders.answered, s.senders.timed_out, s.senders.retried,
                     s.senders.rejected_total() + s.reflectors.rejected_total());
  std::map<std::string, int64_t> rejected = s.senders.rejected_by_name();
  for (const auto& [k, v] : s.reflectors.rejected_by_name()) rejected[k] += v;
  if (!rejected.empty()) {
    out += "rejected:";
    for (const auto& [k, v] : rejected) out += fmt::format("  {} {}", k, v);
    out += "\n";
  }
  out += fmt::format("fabric: {} leaves, {} spines\n", s.leaves, s.spines);
  out += "paths per spine:";
  for (const auto& [spine, n] : s.flows_per_spine) {
    out += spine == 0 ? fmt::format("  same-leaf {}", n) : fmt::format("  s{} {}", spine, n);
  }
  out += "\n";
  if (s.targeted && !s.spend.empty()) {
    int64_t total = 0;
    for (const auto& [pair, n] : s.spend) total += n;
    out += fmt::format("targeted: {} probes over {} pairs ({:.1f} per pair)\n", total, s.spend.size(),
                       static_cast<double>(total) / static_cast<double>(s.spend.size()));
    if (!s.incomplete.empty()) {
      // A failed link makes a spine unreachable for some pairs: expected then.
      out += fmt::format("targeted: {} pair(s) ran out of ports before every spine had enough answered ports "
                         "(a dead link, lost probes, or too few --ports): {}\n",
                         s.incomplete.size(), fmt::join(s.incomplete, " "));
    }
  }
  out += fmt::format("anomalies: {}\n", s.anomalies.size());
  for (const auto& a : s.anomalies) out += fmt::format("  {}: {}\n", a.kind, a.detail);
  return out;
}

}  // namespace weft::agent
