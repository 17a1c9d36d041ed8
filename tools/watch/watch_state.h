// The watcher's view of the fabric between reports: each watched tuple's
// health from its agent's tallies, the directed spine-leaf links, and the
// events that routing::localise's verdicts turn into once they hold.
//
// Health of a tuple's round trip: failing when its newest `streak` probes
// were all lost, healthy when its newest probe was answered, unknown otherwise
// (a loss or two, no report for stale_ms, nothing answered yet). A failing
// round trip is split by what the destination's reflector received
// (reflector.h arrivals): requests that stopped arriving when the losses
// began make the *forward* path failing; requests that still arrive a report
// interval after the losses began make only the reply failing (its spine is
// unknown: any spine's links towards the source may be the one) and the
// forward path healthy. Until the destination has reported since the losses
// began, the tuple is unknown; without arrivals at all (an agent that does not
// count them) the whole round trip is failing. Its forward path is the spine
// its newest answer crossed (the probe's DSCP, measured now), else the probe
// database's. A link is declared down when the same single link (or cable:
// both directions of one spine-leaf link) has been localised for confirm_ms,
// and up again when, after that, a healthy probe crosses it and no tuple has
// failed for confirm_ms. A link that grows into its cable while it is
// confirmed keeps the time it has held (the other direction's evidence comes
// later from hosts whose reports crossed the cable), and the direction that
// held from the start is the one declared down.
#pragma once

#include <cstdint>
#include <map>
#include <tuple>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "watch/watch_tuples.h"
#include "weft/agent/control.h"
#include "weft/probe/monitor.h"
#include "weft/routing/localise.h"

namespace weft::cli {

struct WatchRules {
  uint32_t streak = 3;
  // A host whose reports stop this long says nothing about its tuples: its
  // control connection to the watcher may itself cross the failed link, and
  // TCP resends only after a retransmission timeout (>= 200 ms on Linux,
  // RFC 6298), so its last report may praise a path that is already dead.
  uint64_t stale_ms = 300;
  uint64_t confirm_ms = 150;
  uint64_t report_ms = 100;  // the agents' report interval
};

struct LinkEvent {
  enum class Kind { kDown, kUp, kAmbiguous, kUnexplained };
  Kind kind = Kind::kDown;
  std::vector<std::string> links;  // kDown/kUp: the link; kAmbiguous: the candidates
  uint64_t first_loss_ns = 0;      // kDown: the earliest report of a loss on a failing tuple
  uint64_t at_ns = 0;              // when the verdict was reached
};

// WatchState judges intervals (a stale report, a confirmed loss) on
// CLOCK_MONOTONIC (clock_gettime(2)), which no step of the realtime clock
// moves: a step back made every report read as stale and a link localised
// before its first loss, which the database refuses. An event's times
// become wall-clock stamps (unix ns) here, both from one reading of the two
// clocks, so their difference is the monotonic one; 0 stays 0 (none).
LinkEvent on_wall_clock(LinkEvent e, uint64_t monotonic_now_ns, uint64_t realtime_now_ns);

struct WatchCounts {
  size_t tuples = 0, healthy = 0, failing = 0, unknown = 0;
  uint64_t sent = 0, answered = 0, lost = 0;
  std::optional<std::string> down;  // the link now down, if any
  routing::Verdict verdict = routing::Verdict::kNone;
};

class WatchState {
 public:
  // host_ips: the hosts' addresses (host order), by host index.
  WatchState(std::vector<WatchTuple> tuples, std::vector<uint32_t> host_ips, int leaves, int spines,
             WatchRules rules = {});

  // "l3->s2" (leaf 3 towards spine 2) or "s2->l3".
  std::string link_name(int id) const;
  // The tuples host h probes, in the order its monitor order lists them.
  std::vector<probe::MonitorTuple> tuples_of(int host) const;
  size_t hosts_with_tuples(size_t hosts) const;

  // A report from host h: rows in the order of tuples_of(h). Rows that do not
  // match (another order) are ignored.
  void update(int host, std::span<const probe::TupleTally> rows, uint64_t now_ns);
  // Host h's monitor was ordered again (its agent reconnected): its new
  // reports count from zero, so what the old one counted is kept aside and
  // counts() stays cumulative (Prometheus reads a counter that falls as a
  // reset of the whole series).
  void restarted(int host);
  // What host h's reflector received of the watched tuples towards it.
  void arrived(int host, std::span<const agent::Arrival> arrivals, uint64_t now_ns);
  // Localises now; returns the events this evaluation makes.
  std::vector<LinkEvent> evaluate(uint64_t now_ns);
  WatchCounts counts(uint64_t now_ns) const;
  // One line per tuple not healthy (host indices, its state, its counts), for logs.
  std::string describe_unhealthy(uint64_t now_ns) const;

 private:
  struct Live {
    probe::TupleTally last;
    uint64_t sent_before = 0, answered_before = 0, lost_before = 0;  // by the monitors before `last`'s
    uint64_t report_ns = 0;
    uint64_t loss_since_ns = 0;  // report time of the current streak's first loss; 0 = none
    uint64_t arrivals = 0;       // requests the destination received
    uint64_t arrivals_report_ns = 0;  // its newest report; 0 = none yet
    uint64_t arrivals_grew_ns = 0;    // the report at which `arrivals` last grew
  };
  enum class State { kUnknown, kHealthy, kForwardFailing, kReplyFailing, kRoundTripFailing };
  State state(const Live& l, uint64_t now_ns) const;
  int up(int leaf, int spine) const { return ((leaf - 1) * spines_ + (spine - 1)) * 2; }
  int down(int spine, int leaf) const { return up(leaf, spine) + 1; }

  std::vector<WatchTuple> tuples_;
  std::vector<uint32_t> host_ips_;
  std::map<std::tuple<int, uint32_t, uint16_t>, size_t> by_arrival_;  // (dst host, src ip, sport) -> tuple
  std::vector<std::vector<size_t>> by_host_;
  std::vector<Live> live_;
  int leaves_, spines_;
  WatchRules rules_;
  // The verdict being confirmed and since when.
  routing::Verdict pending_ = routing::Verdict::kNone;
  std::vector<int> pending_links_;
  std::vector<int> pending_held_;  // its links when it began (before it grew into a cable)
  uint64_t pending_since_ = 0;
  bool pending_reported_ = false;
  bool pending_carried_ = false;  // a healthy probe crosses the link that is down
  std::optional<int> down_;  // the link declared down
};

}  // namespace weft::cli
