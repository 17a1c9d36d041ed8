// A probe campaign from one sender host: for each destination and each source
// port of a range, N probes, paced to a rate, each with a timeout and retries.
// The spine of every 5-tuple is reported once all its probes are settled; a
// 5-tuple that answered with two different spines is flagged unstable (hash
// instability or a flapping link).
//
// Targeted mode (job launch): stop_at_spines = S probes each pair only until
// it has K = ports_per_spine answered ports on each of S distinct spines
// (a same-leaf pair: K answered ports), a window of S·K ports at a time. The
// expected cost is the coupon-collector bound for K copies of S coupons,
// about S·(ln S + (K−1)·ln ln S + K) probes per pair (Newman & Shepp, "The
// double dixie cup problem", 1960). Why K: a planner gives every flow that
// leaves one host a distinct source port (routing/planner.h), so a host
// with K flows may need K ports of one pair on one spine; K = the number of
// pairs the host probes guarantees one is always free. Probes spent per pair
// are reported.
//
//   CampaignPlan plan{.targets = {...}, .sport_first = 49152, .sport_count = 64};
//   auto out = run_campaign(*backend, plan, [&](const FlowResult& f) { ... }, &cancel);
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <utility>
#include <vector>

#include "weft/probe/backend.h"
#include "weft/probe/skip_set.h"

namespace weft::probe {

struct CampaignPlan {
  std::vector<uint32_t> targets;  // destination IPs, host byte order
  uint16_t sport_first = 49152;
  uint16_t sport_count = 64;
  int probes_per_port = 1;
  double rate_pps = 100000;  // per sender; 0 = unlimited
  int timeout_ms = 250;      // wait for answers after the last send of a round
  int retries = 2;           // resends of an unanswered probe
  uint16_t port_window = 16;  // source ports (sockets) per window: results stream out per window
  int stop_at_spines = 0;      // targeted mode: S > 0
  int ports_per_spine = 1;     // targeted mode: K answered ports on each of the S spines
  SkipSet skip;  // (dst, sport) already recorded (resume)
  uint32_t first_sequence = 1;

  Status validate() const;
};

struct FlowResult {
  uint32_t dst_ip = 0;
  uint16_t sport = 0;
  int sent = 0;
  int answered = 0;
  int spine = -1;        // DSCP method: spine; 0 = same leaf; -1 = unknown / unanswered
  uint32_t hop_ip = 0;   // TTL method: ICMP source (0 = reached the destination: same leaf)
  int dscp_seen = -1;
  bool unstable = false;
  int other_spine = -1;
  uint32_t other_hop_ip = 0;
  uint64_t min_rtt_ns = 0;
};

struct PairSpend {
  uint32_t dst_ip = 0;
  int probes = 0;
  int spines_found = 0;
  int full_spines = 0;    // spines with at least ports_per_spine answered ports
  bool complete = false;  // targeted: K ports on each of stop_at_spines spines
};

struct CampaignOutcome {
  ProbeStats stats;
  std::vector<PairSpend> spend;  // one per target
  uint64_t flows = 0;
  bool cancelled = false;
};

using FlowCallback = std::function<void(const FlowResult&)>;

Result<CampaignOutcome> run_campaign(SenderBackend& backend, const CampaignPlan& plan, const FlowCallback& on_flow,
                                     const std::atomic<bool>* cancel = nullptr);

}  // namespace weft::probe
