// The watcher's side of monitoring (`weft watch`): connects to every host's
// agent, announces one key for the monitor's probes to every reflector, then
// orders each host to probe its 5-tuples (control.h "monitor") and hands every
// "monitor_report" to a callback, until told to stop.
//
//   std::atomic<bool> stop = false;
//   Status st = run_watch(hosts, tuples_per_host, secret, WatchConfig{},
//                         [&](size_t host, uint64_t t_ns, std::vector<probe::TupleTally> rows,
//                             std::vector<Arrival> arrivals) { ... },
//                         [&](size_t host, const Status& why) { ... },   // fell silent: reconnecting
//                         [&](size_t host) { ... },                      // reporting again
//                         stop);
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <vector>

#include "weft/agent/control.h"
#include "weft/agent/controller.h"
#include "weft/probe/mac.h"
#include "weft/probe/monitor.h"

namespace weft::agent {

struct WatchConfig {
  uint16_t dport = 4791;     // the reflectors' UDP port
  uint8_t probe_dscp = 8;
  // Probes per second per watched 5-tuple: a host with N tuples sends N times
  // this (its agent caps the total to its --max-rate).
  double tuple_rate_pps = 20;
  int timeout_ms = 150;      // a probe unanswered this long is lost
  int report_ms = 100;       // how often each agent reports
  int connect_timeout_ms = 5000;
  // An agent that sends no report for this long has lost its connection (a
  // failed link may carry it): it is reconnected, on new source ports. Four
  // report intervals (`weft watch` keeps that ratio for any --report-ms):
  // longer than one TCP retransmission of a report (Linux's least RTO,
  // TCP_RTO_MIN, is 200 ms) plus an interval, and short enough that a watcher
  // whose connections all crossed the failed link still names it within the
  // bound tests/integration/watch_netns_test.cc holds it to.
  int silence_ms = 400;
  Status validate() const;
};

using WatchReport = std::function<void(size_t host, uint64_t t_ns, std::vector<probe::TupleTally> rows,
                                       std::vector<Arrival> arrivals)>;
using WatchFailure = std::function<void(size_t host, const Status& why)>;
using WatchRecovery = std::function<void(size_t host)>;

// tuples[i] are host i's 5-tuples (empty: the host only reflects, and
// reports what arrived). Returns
// when `stop` is set (OK) or at once when an agent cannot be reached or
// refuses the key or its order at the start (the error names it). An agent
// that fails or falls silent later is handed to on_failure and reconnected
// (two sockets racing per attempt, backing off up to silence_ms between
// attempts) until it reports again
// (on_recovery) or `stop` is set; the others go on meanwhile.
Status run_watch(const std::vector<HostEntry>& hosts, const std::vector<std::vector<probe::MonitorTuple>>& tuples,
                 const probe::MacKey& secret, const WatchConfig& cfg, const WatchReport& on_report,
                 const WatchFailure& on_failure, const WatchRecovery& on_recovery, const std::atomic<bool>& stop);

}  // namespace weft::agent
