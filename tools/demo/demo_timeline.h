// weft demo --fail-during: a link fails while the job runs.
//
// Instead of trials, each run is a timeline: back-to-back HD AllReduce calls
// (every element of every call verified) for DemoConfig::timeline_s, during
// which a FaultSchedule acts on the fabric at fixed times:
//   cut      the link drops what it carries, both ends stay up (a gray
//            failure: scripts/netns-fabric.sh `cut`); ECMP keeps hashing flows
//            onto it, and a TCP flow that crosses it stalls in retransmits;
//   withdrawn  converge_ms later the routing takes the link out of every
//            leaf's ECMP group (`fail`), as BFD + BGP would: flows move to the
//            surviving spines (a hash-threshold group of one fewer next hop
//            re-hashes most flows of the leaves it touches, RFC 2992);
//   restored  the link is back (`mend` + `restore`) and flows hash as before.
// (a) and (b) run the same schedule, one after the other, on a healthy fabric
// at the start of each.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "demo_config.h"
#include "demo_session.h"

namespace weft::cli::demo {

struct FaultEvent {
  double at_s = 0;   // planned, seconds after the series started
  double done_s = -1;  // when it took effect (-1: not yet)
  std::string what;  // "cut", "withdrawn", "restored"
};

// The fault's events for `cfg.fail_during`, in time order, applied by at(t).
class FaultSchedule {
 public:
  FaultSchedule(EmulatedFabric& fabric, const DemoConfig& cfg);
  ~FaultSchedule();  // leaves the link healthy (a failed run included)
  FaultSchedule(const FaultSchedule&) = delete;
  FaultSchedule& operator=(const FaultSchedule&) = delete;

  // Applies every event due at t (seconds since the series started).
  Status at(double t);
  // Brings the link back if the schedule left it cut or withdrawn.
  Status heal();
  const std::vector<FaultEvent>& events() const { return events_; }

 private:
  Status apply(const std::string& what);
  EmulatedFabric& fabric_;
  int spine_, leaf_;
  std::vector<FaultEvent> events_;
  bool cut_ = false, withdrawn_ = false;
};

struct TimelineRun {
  std::string name;
  std::vector<SeriesCall> calls;
  std::vector<FaultEvent> events;
};

// busbw (bytes/s) over the calls that started in [from_s, to_s): their bus
// bytes over their summed time; 0 when none did.
double phase_busbw(const std::vector<SeriesCall>& calls, double from_s, double to_s);

// The table of a timeline's runs: calls, busbw before / during / after the
// fault (Mbit/s), the longest call.
std::string timeline_table(const DemoConfig& cfg, const std::vector<TimelineRun>& runs);
// busbw per call over time, the events marked.
std::string timeline_svg(const DemoConfig& cfg, const std::vector<TimelineRun>& runs);
// `extra`'s keys are added at the top level (run (c)'s figures).
std::string timeline_json(const DemoConfig& cfg, const std::vector<TimelineRun>& runs,
                          const nlohmann::json& extra = nlohmann::json::object());

}  // namespace weft::cli::demo
