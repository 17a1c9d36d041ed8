// `weft agent` as a service: levelled logs on stderr (journald reads their
// priority), the metrics endpoint, and the signals a service manager sends:
//   SIGHUP          re-read the configuration (what changes live: docs/agent.md)
//   SIGTERM/SIGINT  drain: refuse new sessions, let running sweeps finish for up
//                   to the drain timeout, then exit 0; a second one stops at once
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include "weft/agent/agent.h"
#include "weft/agent/metrics_server.h"
#include "weft/common/status.h"

namespace weft::cli {

// trace, debug, info, warn, error, critical, off. Under systemd (stderr is the
// journal stream named by $JOURNAL_STREAM) each line starts with its syslog
// priority, "<6>" and so on (sd-daemon(3)); elsewhere with a time and level.
Status set_log_level(const std::string& level);

// Serves render_metrics(agent.snapshot()) on "ADDR:PORT".
Result<std::unique_ptr<agent::MetricsServer>> start_metrics(const std::string& address, const agent::Agent& ag);

// Handles the signals above until `ag` stops; `reload` re-reads the
// configuration. Call with SIGHUP, SIGINT and SIGTERM blocked in every thread.
class SignalLoop {
 public:
  SignalLoop(agent::Agent& ag, std::function<void()> reload, std::chrono::milliseconds drain_grace);
  ~SignalLoop();  // call after ag.run() returned
  SignalLoop(const SignalLoop&) = delete;
  SignalLoop& operator=(const SignalLoop&) = delete;

  static void block_signals();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace weft::cli
