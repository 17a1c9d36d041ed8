// weft agent: the per-host daemon. It runs the reflector (data plane) and an
// authenticated TCP control plane (control.h) through which a controller
// announces campaigns, starts sweeps from this host and reads statistics.
//
//   AgentConfig cfg;  cfg.secret = *load_secret("/etc/weft/secret"); ...
//   Agent agent(cfg);
//   WEFT_RETURN_IF_ERROR(agent.start());   // binds the control port, starts the reflector
//   agent.run();                           // until stop() (thread-safe) or SIGTERM
//
// Capabilities: the UDP reflector and the UDP backend need none (ports >= 1024,
// or CAP_NET_BIND_SERVICE below); the TCP-SYN backend and the pcap reflector
// need CAP_NET_RAW; the TTL method needs none (IP_RECVERR on UDP sockets).
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "weft/agent/control.h"
#include "weft/agent/sweep_tally.h"
#include "weft/probe/backend.h"
#include "weft/probe/reflector.h"

namespace weft::agent {

// Admission: strangers (connections that have not authenticated yet) and
// authenticated sessions have separate budgets, so strangers can never take
// the controller's slots. A new connection always gets a stranger slot: when
// its source address already holds max_strangers_per_source, or all
// max_strangers are taken, the oldest such stranger is closed (counted as
// "evicted"). A stranger leaves its slot the moment its handshake fails or
// succeeds. A controller that shares an address with an attacker still gets
// in unless the attacker opens max_strangers_per_source connections within
// the controller's one round trip of handshake.
struct AgentConfig {
  std::string name;                  // reported in hello; default: hostname
  std::string listen_ip = "127.0.0.1";
  uint16_t listen_port = 7400;       // 0 = any (tests)
  uint32_t probe_ip = 0;             // host order: local address probes are sent from
  probe::MacKey secret;
  probe::ReflectorConfig reflector;  // data-plane ports and DSCPs
  int handshake_timeout_ms = 5000;
  int idle_timeout_ms = 600000;
  // A sweep reports when a window of ports settles, which at a low rate takes
  // long (64 targets x 64 ports at 100 probes/s: 41 s); meanwhile an empty
  // "results" frame this often tells the controller, which gives an agent
  // silent for 30 s up, that the sweep is alive.
  int sweep_heartbeat_ms = 5000;
  int max_sessions = 64;             // authenticated sessions
  int max_strangers = 128;           // unauthenticated sessions, all sources
  int max_strangers_per_source = 8;  // unauthenticated sessions from one address
  // Bytes a session may have queued for a peer that does not read them (a
  // watcher stopped, or its path black-holed while TCP holds): beyond it the
  // session is closed and counted as not_reading, whatever the idle timeout.
  // Reports are cumulative and sealed in order, so none can be dropped
  // instead. Memory for sessions is at most max_sessions times this.
  std::size_t max_queued_bytes = std::size_t{64} << 20;
  // Probes per second a campaign may ask of this host: a faster rate, or 0
  // (unpaced), is capped to it (counted in rate_capped).
  double max_rate_pps = 100000;
  // Where sweeps get their sender; empty = probe::make_sender. Tests put a
  // synthetic backend here to drive the real agent and controller at volume.
  std::function<Result<std::unique_ptr<probe::SenderBackend>>(std::string_view backend, const probe::SenderConfig&)>
      make_sender;
  Status validate() const;
};

struct AgentCounters {
  std::array<uint64_t, static_cast<size_t>(ControlReject::kCount)> rejected{};
  uint64_t sessions = 0;        // connections admitted
  uint64_t campaigns = 0;       // sweeps started
  uint64_t rate_capped = 0;     // campaigns whose rate was capped to max_rate_pps
  int strangers = 0;            // now: unauthenticated sessions
  int authenticated = 0;        // now: authenticated sessions
};

// Everything the metrics endpoint reports (docs/metrics.md), read at one time.
struct AgentSnapshot {
  std::string name;
  AgentCounters control;
  int live_sessions = 0;
  probe::ProbeStats reflector;
  SweepTallySnapshot sweeps;
};

class Agent {
 public:
  explicit Agent(AgentConfig cfg);
  ~Agent();
  Agent(const Agent&) = delete;
  Agent& operator=(const Agent&) = delete;

  Status start();
  void run();
  void stop();
  uint16_t control_port() const;
  AgentCounters counters() const;
  probe::ProbeStats reflector_stats() const;
  AgentSnapshot snapshot() const;
  // What SIGHUP may change while the agent runs: the secret (new handshakes and
  // campaigns use it; running sweeps and authenticated sessions keep theirs)
  // and max_rate_pps (campaigns started from then on are capped to it).
  void reload(const AgentConfig& next);
  // SIGTERM: refuses new control connections and waits, for up to `grace`, until
  // the sweeps have finished and the controllers have closed their sessions
  // (other hosts' sweeps may need this reflector until then); then cancels
  // what still runs, lets its last frames go out, and stops.
  // Returns at once; run() returns when the drain is over. Thread-safe.
  void drain(std::chrono::milliseconds grace);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace weft::agent
