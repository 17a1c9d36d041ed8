// The route planner's parts (planner.cc): the flows, their candidates
// (planner_fetch.cc: which routes a flow may take, and the path table's
// ports fetched per class, on a second thread where there is one), and what
// it hands its output stage (planner_output.cc): the flows with their chosen
// routes and ports. Internal to routing/.
#pragma once

#include <cstdint>
#include <future>
#include <optional>
#include <span>
#include <tuple>
#include <vector>

#include "weft/routing/candidates.h"
#include "weft/routing/clos3_coloring.h"
#include "weft/routing/planner.h"
#include "weft/routing/rounds.h"

namespace weft::routing::planner_internal {

struct FlowInfo {
  int src = 0, dst = 0;          // ranks
  int conn = 0, qp = 0;          // Flow::conn, Flow::qp
  // Where a rank pair has several flows (nccl-ring's QPs): the first flow
  // of the pair (-1: the pair has one), this flow's index in the pair, and
  // (in the first flow) how many it has. Each takes its share of the pair's
  // ports (planner.h, 2).
  int pair_group = -1;
  int pair_k = 0;
  int pair_n = 1;
  int src_nic = 0, dst_nic = 0;
  std::vector<int> steps;
  int ci = -1;                   // its candidates in its class's fetcher's store (set on the fetch's thread)
  int route = -1;                // chosen
  uint32_t path_at = 0;          // the chosen route's switches: path_pool_[path_at, + path_len)
  uint32_t path_len = 0;
  int struck = 0;                // routes struck because their ports ran out
  uint16_t sport = 0;
  uint32_t dqpn = 0;             // E-ECMP: the destination QP chosen with sport (0: none)
  int round = 0;                 // in every step of its class (planner.h, 5)
};

// A flow between two ports of one NIC (planes.h): it never enters the fabric.
inline bool in_nic(const FlowInfo& fi) { return fi.src_nic == fi.dst_nic; }

// Which routes a flow may take and their colours: a route's spine on a
// 2-tier Clos, its packed (slot, core) key on a 3-tier one
// (clos3_coloring.h). Immutable after construction.
class RouteFilter {
 public:
  explicit RouteFilter(const topo::Fabric& f);

  bool two_tier() const { return two_tier_; }
  const std::optional<Clos3Shape>& clos3() const { return clos3_; }
  int n_colours() const { return n_colours_; }
  // Consecutive switches linked by links that are up.
  bool is_up(std::span<const int> rt) const;
  // A usable route's colour; -1 for none.
  int colour(std::span<const int> rt) const;
  int colour(const std::optional<Clos3Key>& k) const {
    return k ? k->slot * (clos3_->plane_size() + 1) + k->core + 1 : -1;
  }

 private:
  const topo::Fabric& f_;
  bool two_tier_;
  std::optional<Clos3Shape> clos3_;  // 3-tier Clos with planes
  std::vector<int> colour_of_;       // switch -> spine colour, -1 for leaves
  std::vector<char> up_;             // 2-tier: [leaf * spines + colour] link is up
  int n_colours_ = 0;
};

// What the fetcher reads, all of it unchanged while classes are planned.
struct FetchInputs {
  const topo::Fabric& f;
  PathTable& table;
  const PlannerOptions& opt;
  const std::vector<uint16_t>& dports;  // per rank
  const QpnPool& qpns;                  // per rank (E-ECMP), else empty
  const std::vector<int>& host_flows;   // per host: flows it sends
  const RouteFilter& filter;
};

// One class's candidates (planner.h, 2): the path table's ports per flow and
// the routes they take, into a CandidateStore. The planner keeps two, so
// that the next class is fetched on a second thread while one is evaluated
// and coloured (PlannerOptions::second_thread); the table is never asked
// from two threads at once.
class CandidateFetcher {
 public:
  CandidateFetcher() = default;
  CandidateFetcher(const CandidateFetcher&) = delete;
  CandidateFetcher& operator=(const CandidateFetcher&) = delete;
  ~CandidateFetcher();  // waits for a fetch still running

  // Class c's candidates (cls): clears the store and adds every flow of `ids`
  // that leaves its NIC, from `ports` ports per pair, setting its
  // FlowInfo::ci (and nothing else of it); evaluate() judges the routes.
  Status fetch(const FetchInputs& in, std::vector<FlowInfo>& flows, const std::vector<int>& ids, int ports, int c);
  // The same on a thread of its own (here where none can be started).
  void fetch_async(const FetchInputs& in, std::vector<FlowInfo>& flows, const std::vector<int>& ids, int ports,
                   int c);
  // Waits for fetch_async; status() is its result (ok when none ran).
  void join();
  const Status& status() const { return status_; }
  // Evaluates the fetched routes (usable, colour: RouteFilter) of the flows
  // of `ids`, the class fetched; until then every route is unusable.
  void evaluate(const FetchInputs& in, const std::vector<FlowInfo>& flows, const std::vector<int>& ids);
  // The store as fetched: not evaluated, so no route struck either.
  bool unevaluated() const { return !evaluated_; }

  CandidateStore store;
  int cls = -1;    // the class the store holds (or is being fetched), -1: none
  int ports = 0;   // and from how many ports per pair

 private:
  Status fill(const FetchInputs& in, std::vector<FlowInfo>& flows, const std::vector<int>& ids, int ports);
  Status query(const FetchInputs& in, std::vector<FlowInfo>& flows, FlowInfo& fi, int ports);
  void share_of(const PairRoutes& all, int k, int n, PairRoutes& out);

  std::future<Status> pending_;
  Status status_;
  bool evaluated_ = false;
  PairRoutes answer_;  // the path table's answer for one flow
  std::tuple<int, int, int> answered_{-1, -1, -1};  // the NIC pair and destination rank answer_ is for
  PairRoutes share_;   // a flow's share of it (share_of), and its buffers
  std::vector<int> route_start_, route_fill_;
  std::vector<PortRoute> by_route_;
};

// The chosen routes: each flow's switches live in one pool (a vector per
// flow costs an allocation each, ~10^6 of them at 65,536 endpoints).
struct Chosen {
  std::vector<FlowInfo>& flows;
  const std::vector<int>& path_pool;
  const std::vector<std::vector<int>>& classes;   // flows planned together (planner.h, 1)
  const std::vector<std::vector<int>>& step_ids;  // per step: its flows, in the step's order
  std::span<const int> path(const FlowInfo& fi) const { return {path_pool.data() + fi.path_at, fi.path_len}; }
};

// Rounds of one class (rounds.h) over its flows' chosen paths' directed
// switch-to-switch links: fills round[i] for ids[i], returns how many.
int class_rounds(const topo::Fabric& f, const Chosen& c, const std::vector<int>& ids, RoundAssigner& assigner,
                 std::vector<int>& round);

// Whether class `ids` run in `round` (parallel to ids) takes no longer than
// with every flow at once, counting every link a flow crosses, access links
// too (rounds.h, "Rounds cost time"): the rounds' busiest-link times summed
// against the busiest link's total, each flow's bytes over the link's rate.
bool rounds_take_no_longer(const topo::Fabric& f, const Chosen& c, const std::vector<int>& ids,
                           const std::vector<int>& round);

// Rounds of one class (planner.h, 5; rounds.h): sets its flows'
// FlowInfo::round and returns true when it runs in more than one round,
// which it does only where the rounds take no longer than sharing
// (rounds_take_no_longer); else its flows stay in round 0.
bool assign_class_rounds(const topo::Fabric& f, Chosen& c, const std::vector<int>& ids, RoundAssigner& assigner,
                         std::vector<int>& round);

// The plan file's content and the stats, judged by the link-load checker
// over the chosen paths (planner.h, 6), on `second_thread` while the flows
// are written. Moves each flow's steps into the plan.
Status emit_plan(const topo::Fabric& f, const ranking::RankOrder& order, const Schedule& s,
                 const PlannerOptions& opt, const std::vector<uint16_t>& dports, Chosen& c, bool has_rounds,
                 bool second_thread, PlannedRoutes& out);

}  // namespace weft::routing::planner_internal
