// Plan epochs (internal; docs/route-plan.md "Plan epochs",
// docs/collectives-routes.md "Plan epochs"): reading the file a job names,
// and which of its versions a communicator may switch to. The agreement
// between ranks is epoch_switch.cc's.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "weft/collectives/communicator.h"
#include "weft/collectives/transport.h"
#include "weft/common/status.h"
#include "weft/routing/gates.h"
#include "weft/routing/plan.h"

namespace weft::coll::internal {

struct PlanEpoch {
  std::string job;
  uint64_t epoch = 0;
  std::string reason;
  routing::RoutePlan plan;
};

// Parses one plan epoch document: {"version": 1, "job", "epoch", "reason",
// "plan"}. Errors name the field ("/plan/flows/3/sport: ...").
Result<PlanEpoch> parse_plan_epoch(const std::string& text);

// The collective of a hybrid AllReduce route plan (allreduce_hybrid.cc,
// docs/route-plan.md "Which algorithm honours which plan"): its flows are
// the inter-host HD's alone (routing::hybrid_inter_host), global ranks,
// steps numbered as that schedule's.
inline constexpr std::string_view kHybridPlan = "allreduce-hybrid";

// The gates of a plan's rounds (routing/gates.h) for the algorithm that
// holds them: HD for allreduce-hd (hd_gates.cc), ring for allreduce-ring,
// per repetition (ring_gates.cc), the inter-host HD legs for
// allreduce-hybrid (allreduce_hybrid.cc); none for a plan without rounds.
// Each flow's steps must be steps of that algorithm on plan.ranks ranks
// that have the flow (routing::apply_plan_rounds), else an error naming
// it. A hybrid plan's flows depend on the hosts: `host_of` (rank -> host,
// the communicator's) checks them (check_hybrid_plan); empty = not known
// yet, the gates alone.
Result<std::vector<routing::Gate>> plan_round_gates(const routing::RoutePlan& plan, const std::vector<int>& host_of);

// OK when every flow of an allreduce-hybrid plan is a flow of hybrid's
// inter-host HD on these hosts (routing::hybrid_inter_host with hosts in
// order of their first rank, local ranks in rank order: equal_hosts, as
// allreduce_hybrid.cc groups them) in every step it lists; else an error
// naming the first flow that is not, and where its ranks sit.
Status check_hybrid_plan(const routing::RoutePlan& plan, const std::vector<int>& host_of);

// A plan's connections per directed pair (PlanFlow::conn, `weft route
// --qps-per-connection`) are the TCP transport's connections_per_peer
// (`per_peer`): connection c of a pair leaves from the port of its flow
// with conn = c. OK when every pair has connections 0..Q-1, Q alike for all
// and equal to per_peer, and, for Q > 1, no rounds and no plan epochs
// (`epochs`); else an error naming the numbers or the flow.
Status check_plan_connections(const routing::RoutePlan& plan, int per_peer, bool epochs);
// The plan's connections per pair (its largest `conn` + 1, at most 64): what
// a communicator that left connections_per_peer at 1 runs it with.
int plan_connections(const routing::RoutePlan& plan);

// OK when `next` may replace `current` mid-job: the same ranks and
// collective, the same directed flows (and connections) with the same
// protocol and dport (listen ports cannot move while connections exist),
// and rounds its algorithm can hold (plan_round_gates on `host_of`). The
// message names the first difference.
Status plan_fits(const routing::RoutePlan& current, const routing::RoutePlan& next, const std::vector<int>& host_of);

// The file of one communicator. look() costs nothing until `poll` has
// passed since the last look; then one stat(2), and only when the file's
// inode, size or mtime changed, one read and parse. A version that is
// refused is counted and logged once, and not read again.
class PlanEpochFile {
 public:
  PlanEpochFile(std::string path, std::string job, std::chrono::milliseconds poll, int rank, std::vector<int> host_of)
      : path_(std::move(path)), job_(std::move(job)), poll_(poll), rank_(rank), host_of_(std::move(host_of)) {}

  // Looks at the file now if `force` or the poll interval has passed; a
  // valid epoch newer than `running` (and than the one held) is then held.
  void look(Clock::time_point now, const routing::RoutePlan& current, uint64_t running, bool force);
  // The newest valid epoch read that is newer than the one run, if any.
  const std::optional<PlanEpoch>& held() const { return held_; }
  void drop_held() { held_.reset(); }
  PlanEpochCounters& counters() { return counters_; }
  const PlanEpochCounters& counters() const { return counters_; }

 private:
  struct Version {
    dev_t dev = 0;
    ino_t ino = 0;
    off_t size = 0;
    int64_t mtime_ns = 0;
    friend bool operator==(const Version&, const Version&) = default;
  };
  void read(const routing::RoutePlan& current, uint64_t running);

  std::string path_;
  std::string job_;
  std::chrono::milliseconds poll_;
  int rank_;
  std::vector<int> host_of_;  // by rank (plan_fits)
  std::optional<Version> seen_;
  Clock::time_point next_look_{};
  std::optional<PlanEpoch> held_;
  PlanEpochCounters counters_;
};

}  // namespace weft::coll::internal
