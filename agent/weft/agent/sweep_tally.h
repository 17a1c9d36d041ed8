// SweepTally: what the sweeps an agent ran have seen, kept for the metrics
// endpoint (docs/metrics.md). Totals per destination host (peer) and per path
// (spine), progress of the running sweeps, and the sweeps' own ProbeStats.
//
//   SweepTally tally;
//   {
//     SweepTally::Sweep sw = tally.start(planned_5tuples);  // counts as running
//     ... sw.flow(f) for every settled 5-tuple ...
//     sw.finish(outcome.stats);                              // adds the sweep's totals
//   }                                                        // no longer running
//
// Thread-safe: sweeps run on their own threads, the endpoint reads snapshots.
// Label sets are bounded: at most kMaxPeers peers and kMaxPaths paths get a
// series of their own; the rest are summed under kOtherLabel. Peers come
// and go over an agent's months (hosts replaced, readdressed): a new peer
// beyond the cap takes the slot of the one updated longest ago, whose
// totals move into kOtherLabel (every sum over peers stays monotonic).
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>

#include "weft/probe/campaign.h"
#include "weft/probe/stats.h"

namespace weft::agent {

inline constexpr size_t kMaxPeers = 256;
inline constexpr size_t kMaxPaths = 64;  // DSCP names at most 63 spines (6 bits) + same leaf
inline constexpr const char* kOtherLabel = "_other";
inline constexpr const char* kNoPathLabel = "none";  // 5-tuples that were never answered

// Upper bounds (seconds) of the RTT histogram's buckets: loopback and
// in-rack RTTs are tens of microseconds, a congested fabric reaches milliseconds.
inline constexpr std::array<double, 14> kRttBuckets = {10e-6, 25e-6, 50e-6, 100e-6, 250e-6, 500e-6, 1e-3,
                                                       2.5e-3, 5e-3, 10e-3, 25e-3, 50e-3, 100e-3, 250e-3};

struct PathTally {
  uint64_t flows = 0;            // settled 5-tuples
  uint64_t probes_sent = 0;      // probes sent to them (retries included)
  uint64_t probes_answered = 0;
  uint64_t rtt_count = 0;        // answered 5-tuples: each adds its minimum RTT
  double rtt_sum_seconds = 0;
  std::array<uint64_t, kRttBuckets.size()> rtt_buckets{};  // not cumulative

  void add(const probe::FlowResult& f);
  void add(const PathTally& o);
};

struct SweepTallySnapshot {
  probe::ProbeStats finished;      // summed over finished sweeps (the "done" frames' stats)
  uint64_t sweeps_started = 0;
  uint64_t sweeps_failed = 0;      // ended with an error (backend, plan)
  int running = 0;
  uint64_t flows_settled = 0;      // every sweep, running ones included
  uint64_t running_planned = 0;    // 5-tuples the running sweeps plan (targeted: an upper bound)
  uint64_t running_settled = 0;    // of which settled so far
  std::map<std::string, PathTally> peers;  // dotted IPv4, or kOtherLabel
  std::map<std::string, PathTally> paths;  // spine number, TTL hop address, kNoPathLabel or kOtherLabel
};

// The label of a settled 5-tuple's path: the spine number (DSCP method; 0 =
// same leaf), the hop's address (TTL method; "0" = same leaf), or "none".
std::string path_label(const probe::FlowResult& f);

// 5-tuples a plan will settle at most: targets x ports, less the skipped ones.
uint64_t planned_flows(const probe::CampaignPlan& plan);

class SweepTally {
 public:
  class Sweep {
   public:
    Sweep(Sweep&& o) noexcept : t_(o.t_), planned_(o.planned_), settled_(o.settled_), finished_(o.finished_) {
      o.t_ = nullptr;
    }
    Sweep(const Sweep&) = delete;
    Sweep& operator=(const Sweep&) = delete;
    Sweep& operator=(Sweep&&) = delete;
    ~Sweep();
    void flow(const probe::FlowResult& f);
    void finish(const probe::ProbeStats& stats);

   private:
    friend class SweepTally;
    Sweep(SweepTally* t, uint64_t planned) : t_(t), planned_(planned) {}
    SweepTally* t_;
    uint64_t planned_;
    uint64_t settled_ = 0;
    bool finished_ = false;
  };

  Sweep start(uint64_t planned);
  SweepTallySnapshot snapshot() const;

 private:
  // The tally of peer `label` (under mu_), evicting the least recently
  // updated peer into kOtherLabel when all kMaxPeers slots are taken.
  PathTally& peer(const std::string& label);

  mutable std::mutex mu_;
  SweepTallySnapshot s_;
  std::map<std::string, uint64_t> peer_updated_;  // label -> update count at its last flow
  uint64_t updates_ = 0;
};

}  // namespace weft::agent
