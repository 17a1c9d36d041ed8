// Monitoring: the same probes as a campaign (wire.h, v2 and MAC'd, answered by
// the same reflectors), sent without end on a fixed set of 5-tuples so that a
// watcher sees a path lose packets within a fraction of a second.
//
// Each round sends one probe on every tuple, all at once, then reads answers
// until the next round; rounds start every tuples/rate_pps seconds, so the
// average rate is rate_pps. A probe unanswered timeout_ms after it left is
// lost. Every report_ms the tallies (cumulative since the start) go to
// `report`; `streak` is the number of this tuple's newest probes lost in a row
// (0 once one is answered), which is what tells a path that fails from one
// that dropped a packet.
//
//   MonitorPlan plan{.tuples = {{dst, 49153}, ...}, .rate_pps = 200};
//   run_monitor(*backend, plan, [&](uint64_t t_ns, std::span<const TupleTally> t) { ... }, &cancel);
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "weft/probe/backend.h"

namespace weft::probe {

struct MonitorTuple {
  uint32_t dst_ip = 0;  // host order
  uint16_t sport = 0;
};

// Source ports a monitor may hold open at once (one socket each, backend.h).
inline constexpr int kMaxMonitorPortSpan = 4096;
inline constexpr size_t kMaxMonitorTuples = 4096;

struct MonitorPlan {
  std::vector<MonitorTuple> tuples;
  double rate_pps = 200;  // probes per second from this host, all tuples together
  int timeout_ms = 150;
  int report_ms = 100;
  uint32_t first_sequence = 1;
  // No tuples is a monitor that only reports (its host's reflector counts
  // arrivals, reflector.h). Refuses more than kMaxMonitorTuples, a tuple twice, source
  // ports spanning more than kMaxMonitorPortSpan, and rates or times out of
  // range, naming the value.
  Status validate() const;
};

struct TupleTally {
  uint32_t dst_ip = 0;
  uint16_t sport = 0;
  uint64_t sent = 0;
  uint64_t answered = 0;
  uint64_t lost = 0;      // unanswered after timeout_ms
  uint32_t streak = 0;    // newest probes lost in a row
  int spine = -1;         // the spine the newest answered probe crossed (-1: none yet)
  uint64_t rtt_ns = 0;    // its round trip
};

using MonitorReport = std::function<void(uint64_t time_ns, std::span<const TupleTally> tallies)>;

// Runs until *cancel; the backend must be fresh (this opens its ports).
// When it returns, *next_sequence (if given) is the sequence after the last
// one sent: a monitor that carries on this run from the same host starts
// there, since the reflectors' replay guard drops every sequence seen before
// (replay_guard.h).
Status run_monitor(SenderBackend& backend, const MonitorPlan& plan, const MonitorReport& report,
                   const std::atomic<bool>& cancel, uint32_t* next_sequence = nullptr);

}  // namespace weft::probe
