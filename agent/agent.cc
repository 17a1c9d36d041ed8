// The agent daemon (agent.h) on Boost.Asio C++20 coroutines: one coroutine per
// control session and one writer per session; sweeps run on their own threads
// (the senders block) and post result frames back to the io thread.
#include <utility>  // before asio: Boost 1.74's awaitable.hpp uses std::exchange

#include "weft/agent/agent.h"

#include <unistd.h>

#include <chrono>
#include <list>
#include <map>
#include <mutex>
#include <thread>

#include <boost/asio.hpp>
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "accept_each.h"
#include "agent_monitor.h"
#include "agent_session.h"

namespace weft::agent {

namespace asio = boost::asio;
using asio::ip::tcp;
using internal::Session;
using nlohmann::json;

struct Agent::Impl {
  AgentConfig cfg;
  asio::io_context io;
  tcp::acceptor acceptor{io};
  probe::KeyRing keys;
  std::unique_ptr<probe::Reflector> reflector;
  mutable std::mutex mu;  // counters, sweeps
  AgentCounters counters;
  SweepTally tally;  // what the sweeps saw, for the metrics endpoint
  struct Sweep {
    std::thread thread;
    std::shared_ptr<std::atomic<bool>> cancel;
    std::weak_ptr<Session> session;  // drain() waits until its last frames are written
    std::shared_ptr<std::atomic<bool>> finished = std::make_shared<std::atomic<bool>>(false);
  };
  std::list<Sweep> sweeps;
  // Monitor runs by id (io thread only): a watcher that lost its connection
  // (a failed link under it) reconnects and orders the same run again; the
  // newer session takes the run over and the old one is closed.
  struct MonitorRun {
    std::weak_ptr<Session> session;
    std::shared_ptr<std::atomic<bool>> finished;
    // Where the run's probe sequences stand on this host: the next monitor
    // of the run carries on from there (run_monitor_order).
    std::shared_ptr<std::atomic<uint32_t>> next_sequence = std::make_shared<std::atomic<uint32_t>>(1);
  };
  std::map<uint32_t, MonitorRun> monitors;
  static constexpr size_t kMaxKeptMonitorRuns = 256;
  // Admission (agent.h), io thread only: strangers oldest first, and per address.
  std::list<std::shared_ptr<Session>> strangers;
  std::map<asio::ip::address, int> strangers_from;

  void count(ControlReject r) {
    spdlog::debug("control: refused ({})", control_reject_name(r));
    std::lock_guard lock(mu);
    ++counters.rejected[static_cast<size_t>(r)];
  }

  // Takes a stranger out of its budget: on eviction, failure or success.
  void leave_strangers(Session& s) {
    if (!s.stranger) return;
    s.stranger = false;
    strangers.erase(s.stranger_pos);
    if (--strangers_from[s.peer] == 0) strangers_from.erase(s.peer);
    std::lock_guard lock(mu);
    counters.strangers = static_cast<int>(strangers.size());
  }

  void evict(Session& s) {
    leave_strangers(s);
    count(ControlReject::kEvicted);
    s.close();  // its pending read fails and its coroutine ends
  }

  // Gives a new connection a stranger slot, closing the oldest stranger of the
  // same address, or else the oldest of all, when a budget is full.
  void admit(const std::shared_ptr<Session>& ss) {
    if (strangers_from[ss->peer] >= cfg.max_strangers_per_source) {
      for (auto& s : strangers) {
        if (s->peer == ss->peer) {
          evict(*s);
          break;
        }
      }
    } else if (static_cast<int>(strangers.size()) >= cfg.max_strangers) {
      evict(*strangers.front());
    }
    ss->stranger = true;
    ss->stranger_pos = strangers.insert(strangers.end(), ss);
    ++strangers_from[ss->peer];
    std::lock_guard lock(mu);
    ++counters.sessions;
    counters.strangers = static_cast<int>(strangers.size());
  }

  asio::awaitable<void> accept_loop() {
    return internal::accept_each(acceptor, [this](tcp::socket s) {
      boost::system::error_code ec;
      s.set_option(tcp::no_delay(true), ec);
      auto ss = std::make_shared<Session>(std::move(s), cfg.idle_timeout_ms, cfg.max_queued_bytes);
      ss->on_stalled = [this, peer = ss->peer](const std::string& why) {
        count(ControlReject::kNotReading);
        spdlog::warn("control: {} {}; session closed", peer.to_string(), why);
      };
      admit(ss);
      asio::co_spawn(io, session(ss), asio::detached);
    });
  }


  asio::awaitable<void> session(std::shared_ptr<Session> ss) {
    asio::co_spawn(io, ss->writer(), asio::detached);
    co_await converse(ss);
    leave_strangers(*ss);  // a failed handshake frees its slot here, at once
    if (ss->authenticated) {
      std::lock_guard lock(mu);
      --counters.authenticated;
    }
    ss->close_after_flush(1000);
  }

  // Counts a frame that ends the session and tells the peer why.
  void refuse(const std::shared_ptr<Session>& ss, ControlReject why, const std::string& message) {
    count(why);
    ss->send({{"type", "error"}, {"message", message.substr(0, 200)}});
  }

  asio::awaitable<void> converse(std::shared_ptr<Session> ss) {
    const std::string nonce = probe::to_hex(probe::random_bytes(16));
    ss->send({{"type", "hello"}, {"version", kControlVersion}, {"host", cfg.name}, {"nonce", nonce}});
    ControlReject why{};
    auto first = co_await internal::read_frame(ss->sock, kMaxPreAuthFrame, cfg.handshake_timeout_ms, &why);
    if (!first) {
      if (why != ControlReject::kCount) count(why);
      co_return;
    }
    auto auth = parse_control(*first);
    if (!auth || auth->type != "auth") {
      count(!auth && auth.status().code() == StatusCode::kDataLoss ? ControlReject::kBadJson
            : auth                                                  ? ControlReject::kUnauthenticated
                                                                    : ControlReject::kBadMessage);
      co_return;
    }
    if (const int v = peer_version(auth->body); v != kControlVersion) {
      refuse(ss, ControlReject::kVersion,
             fmt::format("this agent speaks control protocol version {}, the controller {}: run the same weft "
                         "version on both",
                         kControlVersion, v));
      co_return;
    }
    const std::string client_nonce = auth->body["nonce"].get<std::string>();
    if (!proof_matches(client_proof(cfg.secret, nonce, client_nonce), auth->body["mac"].get<std::string>())) {
      count(ControlReject::kBadAuth);
      co_return;
    }
    leave_strangers(*ss);
    {
      std::lock_guard lock(mu);
      if (counters.authenticated >= cfg.max_sessions) {
        ++counters.rejected[static_cast<size_t>(ControlReject::kSessionsFull)];
        ss->send({{"type", "error"}, {"message", fmt::format("agent has {} sessions, its limit", cfg.max_sessions)}});
        co_return;
      }
      ++counters.authenticated;
    }
    ss->authenticated = true;
    ss->send({{"type", "auth_ok"}, {"mac", agent_proof(cfg.secret, client_nonce, nonce)}});
    const SessionKeys k = session_keys(cfg.secret, nonce, client_nonce);
    ss->sealer.emplace(k.to_controller, Direction::kToController);
    ss->opener.emplace(k.to_agent, Direction::kToAgent);
    for (;;) {
      auto sealed = co_await internal::read_frame(ss->sock, kMaxFrame, cfg.idle_timeout_ms, &why,
                                                  [s = ss.get(), idle = std::chrono::milliseconds(cfg.idle_timeout_ms)] {
                                                    return s->busy_within(idle);
                                                  });
      if (!sealed) {
        if (why != ControlReject::kCount) count(why);
        co_return;  // peer closed, went silent, or cut a frame
      }
      auto body = ss->opener->open(*sealed, &why);
      if (!body) {  // a strict sequence cannot skip a frame: the session ends
        refuse(ss, why, body.status().message());
        co_return;
      }
      auto msg = parse_control(*body);
      if (!msg) {
        count(msg.status().code() == StatusCode::kDataLoss ? ControlReject::kBadJson : ControlReject::kBadMessage);
        ss->send({{"type", "error"}, {"message", msg.status().message().substr(0, 200)}});
        continue;
      }
      if (!ss->hosts && msg->type != "hosts") {
        refuse(ss, ControlReject::kBadMessage, "the first frame after authentication must be 'hosts'");
        co_return;
      }
      handle(ss, *msg);
    }
  }

  void handle(const std::shared_ptr<Session>& ss, const ControlMessage& m) {
    if (m.type == "hosts") {
      if (ss->hosts) {
        count(ControlReject::kBadMessage);
        ss->send({{"type", "error"}, {"message", "the host list is sent once per session"}});
        return;
      }
      ss->hosts.emplace();
      for (const auto& ip : m.body["ips"]) ss->hosts->insert(ip.get<uint32_t>());
      ss->send({{"type", "ok"}, {"hosts", ss->hosts->size()}});
    } else if (m.type == "announce") {
      const uint32_t run = m.body["run"].get<uint32_t>();
      keys.set(run, campaign_key(cfg.secret, run, m.body["nonce"].get<std::string>()));
      ss->send({{"type", "ok"}, {"run", run}});
    } else if (m.type == "retire") {
      const uint32_t run = m.body["run"].get<uint32_t>();
      keys.erase(run);
      ss->send({{"type", "ok"}, {"run", run}});
    } else if (m.type == "status") {
      json rej = json::object();
      const AgentCounters c = snapshot();
      for (size_t i = 0; i < c.rejected.size(); ++i) {
        if (c.rejected[i]) rej[std::string(control_reject_name(static_cast<ControlReject>(i)))] = c.rejected[i];
      }
      ss->send({{"type", "status"}, {"host", cfg.name}, {"reflector", encode_stats(reflector->stats())},
                {"control_rejected", rej}, {"sessions", c.sessions}, {"campaigns", c.campaigns},
                {"strangers", c.strangers}, {"authenticated", c.authenticated}, {"rate_capped", c.rate_capped},
                {"keys", keys.size()}});
    } else if (m.type == "skip") {
      const uint32_t run = m.body["run"].get<uint32_t>();
      if (run != ss->skip_run) {
        ss->skip = {};
        ss->skip_frames = 0;
        ss->skip_run = run;
      }
      // A validated frame holds at most kSkipRangesPerFrame ranges, so the
      // set overshoots the limit by one frame at most before it is dropped.
      add_skip(m.body, ss->skip);
      if (ss->skip.ranges() > kMaxSkipRanges) {
        count(ControlReject::kBadMessage);
        ss->skip = {};
        ss->skip_run = 0;
        ss->send({{"type", "error"}, {"run", run}, {"message", fmt::format("skip set over {} ranges", kMaxSkipRanges)}});
        return;
      }
      ++ss->skip_frames;
    } else if (m.type == "campaign") {
      CampaignCommand cmd = *decode_campaign(m.body);
      const uint32_t got = ss->skip_run == cmd.run ? ss->skip_frames : 0;
      if (got != cmd.skip_frames) {
        count(ControlReject::kBadMessage);
        ss->send({{"type", "error"}, {"run", cmd.run},
                  {"message", fmt::format("campaign {} counts {} skip frames, {} arrived", cmd.run, cmd.skip_frames, got)}});
        return;
      }
      probe::SkipSet skip = std::move(ss->skip);
      ss->skip = {};
      ss->skip_run = 0;
      ss->skip_frames = 0;
      for (uint32_t t : cmd.plan.targets) {
        if (!ss->hosts->contains(t)) {
          count(ControlReject::kTargetRefused);
          ss->send({{"type", "error"}, {"run", cmd.run},
                    {"message", fmt::format("campaign {} refused: target {}.{}.{}.{} is not in the controller's host "
                                            "list", cmd.run, t >> 24, (t >> 16) & 0xff, (t >> 8) & 0xff, t & 0xff)}});
          return;
        }
      }
      if (cmd.plan.rate_pps == 0 || cmd.plan.rate_pps > cfg.max_rate_pps) {
        cmd.plan.rate_pps = cfg.max_rate_pps;
        std::lock_guard lock(mu);
        ++counters.rate_capped;
      }
      if (got > 0) cmd.plan.skip = std::move(skip);
      start_sweep(ss, std::move(cmd));
    } else if (m.type == "monitor") {
      MonitorCommand cmd = *decode_monitor(m.body);
      for (const auto& t : cmd.plan.tuples) {
        if (!ss->hosts->contains(t.dst_ip)) {
          count(ControlReject::kTargetRefused);
          ss->send({{"type", "error"}, {"run", cmd.run},
                    {"message", fmt::format("monitor {} refused: target {} is not in the controller's host list",
                                            cmd.run, t.dst_ip)}});
          return;
        }
      }
      if (cmd.plan.rate_pps > cfg.max_rate_pps) {
        cmd.plan.rate_pps = cfg.max_rate_pps;
        std::lock_guard lock(mu);
        ++counters.rate_capped;
      }
      if (running_here(ss, cmd.run)) {
        // Two monitors of one run would send the same sequences, which the
        // reflectors refuse as replayed: a watcher orders a run once per
        // session, and a new session takes the run over.
        count(ControlReject::kBadMessage);
        ss->send({{"type", "error"}, {"run", cmd.run},
                  {"message", fmt::format("monitor {} refused: it already runs on this session", cmd.run)}});
        return;
      }
      const probe::MacKey key = campaign_key(cfg.secret, cmd.run, cmd.nonce);
      keys.set(cmd.run, key);
      ss->send({{"type", "ok"}, {"run", cmd.run}, {"rate", cmd.plan.rate_pps}});
      const uint32_t run = cmd.run;
      std::shared_ptr<std::atomic<bool>> before = take_over_monitor(ss, run);
      auto next_sequence = monitors[run].next_sequence;  // a new run's entry starts at sequence 1
      auto finished = start_thread(ss, [this, ss, key, before, next_sequence, cmd = std::move(cmd)] {
        // The run's arrivals, probe sockets and sequence numbers belong to
        // one monitor at a time: this one starts from where the old one
        // stopped, which it publishes when it returns (its session is
        // closed: it returns at its next poll). Two at once would send the
        // same sequences, which the reflectors refuse as replayed.
        while (before && !before->load()) {
          if (ss->cancel->load()) return;
          std::this_thread::sleep_for(std::chrono::milliseconds(5));
        }
        internal::run_monitor_order(cfg, cmd, key, *reflector, [&](json j) { asio::post(io, [ss, j = std::move(j)] { ss->send(j); }); },
                                    *ss->cancel, *next_sequence);
      });
      monitors[run] = {ss, std::move(finished), std::move(next_sequence)};
    } else {
      count(ControlReject::kBadMessage);
      ss->send({{"type", "error"}, {"message", fmt::format("'{}' is not a command", m.type)}});
    }
  }

  // Drain (Agent::drain): no new sessions; the open ones may finish their
  // campaign (the controller closes them when it is done: until then other
  // hosts' sweeps may still probe this reflector). Once `grace` has passed,
  // running sweeps are cancelled, their last frames written, and the agent stops.
  asio::awaitable<void> drain(std::chrono::milliseconds grace) {
    boost::system::error_code ec;
    acceptor.close(ec);
    asio::steady_timer tick(io);
    const auto now = [] { return std::chrono::steady_clock::now(); };
    const auto cancel_at = now() + grace;
    constexpr std::chrono::seconds kCancelWait(10);  // ample for a window's retries after the cancel
    const auto give_up = cancel_at + kCancelWait;
    bool expired = false, settled_before = false;
    for (;;) {
      bool running = false, flushing = false;
      int open = 0;
      {
        std::lock_guard lock(mu);
        open = counters.strangers + counters.authenticated;
        for (const Sweep& sw : sweeps) {
          running |= !sw.finished->load();
          if (auto ss = sw.session.lock()) flushing |= !ss->closed && !ss->out.empty();
        }
        if (!expired && now() >= cancel_at && (running || open > 0)) {
          spdlog::warn("drain: {} ms passed with {} sweeps running and {} sessions open; cancelling", grace.count(),
                       running ? "some" : "no", open);
          for (Sweep& sw : sweeps) sw.cancel->store(true);
          expired = true;
        }
      }
      // A sweep posts its last frames before it sets its flag; they reach the
      // session's queue by the next pass, so "finished" must be seen twice.
      if (!running && settled_before && (open == 0 || (expired && !flushing))) break;
      settled_before = !running;
      if (now() >= give_up) {
        spdlog::error("drain: sweeps still running {} s after their cancel; stopping", kCancelWait.count());
        break;
      }
      tick.expires_after(std::chrono::milliseconds(20));
      co_await tick.async_wait(asio::redirect_error(asio::use_awaitable, ec));
    }
    io.stop();
    if (reflector) reflector->stop();
  }

  AgentCounters snapshot() const {
    std::lock_guard lock(mu);
    return counters;
  }

  // Whether `ss` itself runs a monitor of `run` that has not ended.
  bool running_here(const std::shared_ptr<Session>& ss, uint32_t run) const {
    auto it = monitors.find(run);
    return it != monitors.end() && it->second.session.lock() == ss && it->second.finished &&
           !it->second.finished->load();
  }

  // A monitor order for a run another session still holds: that session is
  // the same watcher's, cut off (control.h "monitor"); it is closed and the
  // caller's monitor starts once the old one's thread has finished (returned).
  std::shared_ptr<std::atomic<bool>> take_over_monitor(const std::shared_ptr<Session>& ss, uint32_t run) {
    // Ended runs are kept (a watcher may come back to one) up to a bound: as
    // many as the key ring holds, since a run without its key is not probed.
    for (auto it = monitors.begin(); it != monitors.end() && monitors.size() > kMaxKeptMonitorRuns;) {
      it = it->second.session.expired() && it->second.finished->load() ? monitors.erase(it) : std::next(it);
    }
    auto it = monitors.find(run);
    if (it == monitors.end()) return nullptr;
    auto old = it->second.session.lock();
    if (old == ss) return nullptr;  // its monitor of the run has ended (running_here)
    if (old) {
      spdlog::info("monitor {}: ordered again on a new session; closing the old one", run);
      old->close();
    }
    return it->second.finished;
  }

  // Runs `body` on a thread of its own that the session's cancel flag stops
  // and drain() waits for (a sweep or a monitor).
  std::shared_ptr<std::atomic<bool>> start_thread(const std::shared_ptr<Session>& ss, std::function<void()> body) {
    std::lock_guard lock(mu);
    for (auto it = sweeps.begin(); it != sweeps.end();) {  // reap finished sweeps
      if (it->finished->load()) {
        it->thread.join();
        it = sweeps.erase(it);
      } else {
        ++it;
      }
    }
    sweeps.push_back({});
    Sweep& sw = sweeps.back();
    sw.cancel = ss->cancel;
    sw.session = ss;
    sw.thread = std::thread([body = std::move(body), finished = sw.finished] {
      struct Done {
        std::atomic<bool>& f;
        ~Done() { f.store(true); }
      } done{*finished};
      body();
    });
    return sw.finished;
  }

  // While the session's sweeps run: an empty "results" frame of `run` every
  // sweep_heartbeat_ms (AgentConfig), which the controller reads as a sign of
  // life and adds nothing from.
  // `over` is set, on the io thread, with the sweep's last frame.
  asio::awaitable<void> heartbeat(std::shared_ptr<Session> ss, uint32_t run, std::shared_ptr<const bool> over) {
    asio::steady_timer t(io);
    for (;;) {
      t.expires_after(std::chrono::milliseconds(cfg.sweep_heartbeat_ms));
      boost::system::error_code ec;
      co_await t.async_wait(asio::redirect_error(asio::use_awaitable, ec));
      if (ss->closed || *over) co_return;
      ss->send({{"type", "results"}, {"run", run}, {"rows", json::array()}});
    }
  }

  // Runs the sweep on its own thread; results reach the session through the io thread.
  void start_sweep(const std::shared_ptr<Session>& ss, CampaignCommand cmd) {
    // Derived here, on the io thread: reload() may replace cfg.secret while the sweep runs.
    const probe::MacKey key = campaign_key(cfg.secret, cmd.run, cmd.nonce);
    keys.set(cmd.run, key);
    {
      std::lock_guard lock(mu);
      ++counters.campaigns;
    }
    ++ss->sweeps_running;
    auto over = std::make_shared<bool>(false);
    asio::co_spawn(io, heartbeat(ss, cmd.run, over), asio::detached);
    start_thread(ss, [this, ss, key, over, cmd = std::move(cmd)] {
      // The sweep's last frame ("done" or "error") is queued in the same io
      // handler that counts the sweep out, so no heartbeat follows it (the
      // controller's next command expects its own answer). Should the
      // thread end any other way, it is counted out all the same.
      struct Running {
        asio::io_context& io;
        std::shared_ptr<Session> ss;
        std::shared_ptr<bool> over;
        bool counted_out = false;
        void last(json j) {
          counted_out = true;
          asio::post(io, [s = ss, o = over, j = std::move(j)] {
            s->send(j);
            *o = true;
            s->sweep_ended();
          });
        }
        ~Running() {
          if (!counted_out) asio::post(io, [s = ss, o = over] {
            *o = true;
            s->sweep_ended();
          });
        }
      } running{io, ss, over};
      SweepTally::Sweep tallied = tally.start(planned_flows(cmd.plan));
      spdlog::info("campaign {}: sweep to {} hosts x {} ports started", cmd.run, cmd.plan.targets.size(),
                   cmd.plan.sport_count);
      auto post = [&](json j) { asio::post(io, [ss, j = std::move(j)] { ss->send(j); }); };
      probe::SenderConfig sc;
      sc.method = *probe::parse_method(cmd.method);
      sc.local_ip = cfg.probe_ip;
      sc.dport = cmd.dport;
      sc.probe_dscp = cmd.probe_dscp;
      sc.run = cmd.run;
      sc.key = key;
      auto be = cfg.make_sender ? cfg.make_sender(cmd.backend, sc) : probe::make_sender(cmd.backend, sc);
      if (!be) {
        spdlog::error("campaign {}: {}", cmd.run, be.status().message());
        running.last({{"type", "error"}, {"run", cmd.run}, {"message", be.status().message()}});
        return;
      }
      json rows = json::array();
      auto last = std::chrono::steady_clock::now();
      auto out = probe::run_campaign(**be, cmd.plan, [&](const probe::FlowResult& f) {
        tallied.flow(f);
        rows.push_back(encode_flow(f));
        const auto now = std::chrono::steady_clock::now();
        if (rows.size() >= 1024 || now - last > std::chrono::milliseconds(100)) {
          post({{"type", "results"}, {"run", cmd.run}, {"rows", std::move(rows)}});
          rows = json::array();
          last = now;
        }
      }, ss->cancel.get());
      if (!rows.empty()) post({{"type", "results"}, {"run", cmd.run}, {"rows", std::move(rows)}});
      if (!out) {
        spdlog::error("campaign {}: {}", cmd.run, out.status().message());
        running.last({{"type", "error"}, {"run", cmd.run}, {"message", out.status().message()}});
        return;
      }
      tallied.finish(out->stats);
      spdlog::info("campaign {}: sweep {}: {} probes sent, {} answered, {} timed out", cmd.run,
                   out->cancelled ? "cancelled" : "done", out->stats.sent, out->stats.answered, out->stats.timed_out);
      json spend = json::array();
      for (const auto& s : out->spend) spend.push_back({s.dst_ip, s.probes, s.spines_found, s.complete});
      running.last({{"type", "done"}, {"run", cmd.run}, {"stats", encode_stats(out->stats)}, {"spend", spend},
                    {"cancelled", out->cancelled}});
    });
  }
};

Agent::Agent(AgentConfig cfg) : impl_(std::make_unique<Impl>()) {
  impl_->cfg = std::move(cfg);
  if (impl_->cfg.name.empty()) {
    char host[256] = {};
    ::gethostname(host, sizeof host - 1);
    impl_->cfg.name = host;
  }
}

Agent::~Agent() {
  stop();
  std::lock_guard lock(impl_->mu);
  for (auto& s : impl_->sweeps) {
    s.cancel->store(true);
    if (s.thread.joinable()) s.thread.join();
  }
}

Status AgentConfig::validate() const {
  if (max_sessions < 1) return invalid_argument(fmt::format("max sessions must be >= 1, got {}", max_sessions));
  if (max_strangers < 1) return invalid_argument(fmt::format("max strangers must be >= 1, got {}", max_strangers));
  if (max_strangers_per_source < 1 || max_strangers_per_source > max_strangers) {
    return invalid_argument(fmt::format("max strangers per source must be 1..{}, got {}", max_strangers,
                                        max_strangers_per_source));
  }
  if (!(max_rate_pps > 0 && max_rate_pps <= 1e9)) {
    return invalid_argument(fmt::format("max rate must be > 0 and <= 1e9 probes/s, got {}", max_rate_pps));
  }
  if (handshake_timeout_ms < 1 || idle_timeout_ms < 1 || sweep_heartbeat_ms < 1) {
    return invalid_argument("timeouts must be >= 1 ms");
  }
  if (max_queued_bytes < kMaxFrame) {
    return invalid_argument(fmt::format("max queued bytes must be >= {} (one frame), got {}", kMaxFrame,
                                        max_queued_bytes));
  }
  return ok_status();
}

Status Agent::start() {
  Impl& m = *impl_;
  WEFT_RETURN_IF_ERROR(m.cfg.validate());
  m.reflector = std::make_unique<probe::Reflector>(m.keys, m.cfg.reflector);
  WEFT_RETURN_IF_ERROR(m.reflector->start().with_context("agent reflector"));
  boost::system::error_code ec;
  const auto addr = asio::ip::make_address(m.cfg.listen_ip, ec);
  if (ec) return invalid_argument(fmt::format("bad listen address '{}'", m.cfg.listen_ip));
  const tcp::endpoint ep(addr, m.cfg.listen_port);
  m.acceptor.open(ep.protocol(), ec);
  if (!ec) m.acceptor.set_option(tcp::acceptor::reuse_address(true), ec);
  if (!ec) m.acceptor.bind(ep, ec);
  if (!ec) m.acceptor.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) return unavailable(fmt::format("agent control port {}:{}: {}", m.cfg.listen_ip, m.cfg.listen_port, ec.message()));
  asio::co_spawn(m.io, m.accept_loop(), asio::detached);
  return ok_status();
}

void Agent::run() {
  auto guard = asio::make_work_guard(impl_->io);
  impl_->io.run();
}

void Agent::stop() {
  asio::post(impl_->io, [this] {
    boost::system::error_code ec;
    impl_->acceptor.close(ec);
    impl_->io.stop();
  });
  if (impl_->reflector) impl_->reflector->stop();
}

uint16_t Agent::control_port() const { return impl_->acceptor.local_endpoint().port(); }

AgentCounters Agent::counters() const { return impl_->snapshot(); }

probe::ProbeStats Agent::reflector_stats() const {
  return impl_->reflector ? impl_->reflector->stats() : probe::ProbeStats{};
}

AgentSnapshot Agent::snapshot() const {
  AgentSnapshot s;
  s.name = impl_->cfg.name;  // fixed after construction
  {
    std::lock_guard lock(impl_->mu);
    s.control = impl_->counters;
    s.live_sessions = s.control.strangers + s.control.authenticated;
  }
  s.reflector = reflector_stats();
  s.sweeps = impl_->tally.snapshot();
  return s;
}

void Agent::reload(const AgentConfig& next) {
  // On the io thread, where the handshake reads the secret and a campaign
  // its rate cap; a running sweep keeps the key and rate it started with.
  asio::post(impl_->io, [this, secret = next.secret, rate = next.max_rate_pps] {
    impl_->cfg.secret = secret;
    impl_->cfg.max_rate_pps = rate;
  });
}

void Agent::drain(std::chrono::milliseconds grace) {
  asio::co_spawn(impl_->io, impl_->drain(grace), asio::detached);
}

}  // namespace weft::agent
