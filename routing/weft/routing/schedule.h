// Collective schedules: who sends what to whom, step by step.
//
// The schedule is the contract between the link-load checker, the route
// planner and the collective engine: collectives/ runs exactly these flows
// (tests/collectives check it), so every claim the checker makes is about the
// traffic that really happens.
//
// allreduce-hd (Rabenseifner; MPICH's non-power-of-two scheme):
//   p' = largest power of two <= P, rem = P - p'.
//   fold      ranks 2i -> 2i+1 (i < rem) send the whole vector; 2i+1 keeps
//             going as newrank i, ranks >= 2*rem as newrank rank - rem.
//   rs d      reduce-scatter by recursive halving, d = 1, 2, 4, ... p'/2:
//             newrank v exchanges with v^d; each keeps the half of its block
//             given by bit d (0 keeps the lower half: mid = lo + (hi-lo)/2)
//             and sends the other half.
//   ag d      allgather by recursive doubling, the mirror: d = p'/2 ... 1,
//             each sends the block it holds.
//   unfold    ranks 2i+1 -> 2i send the result.
//   Starting the halving at distance 1 keeps the largest messages between
//   neighbouring ranks — inside one leaf under a leaf-set ranking.
// allreduce-ring: reduce-scatter then allgather, each P-1 repetitions of
//   r -> r+1; chunk c holds elements [c*count/P, (c+1)*count/P).
// allreduce-hybrid: the inter-host part of hybrid allreduce (hybrid_schedule.h):
//   HD among hosts, one flow per local rank per host pair, the steps of HD
//   over the hosts; it needs the fabric and the rank order, so
//   build_hybrid_schedule() builds it, not build_schedule().
// nccl-ring: NCCL's inter-node ring as the weft NCCL net plugin carries it
//   (nccl_ring_schedule.cc): the allreduce-ring steps, with every edge
//   r -> r+1 a connection per channel and several QPs per connection, each
//   QP a flow of its own (Flow::conn, Flow::qp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "weft/common/status.h"

namespace weft::routing {

enum class Collective { kAllreduceHd, kAllreduceRing, kNcclRing, kAllreduceHybrid };

std::string_view collective_name(Collective c);
std::optional<Collective> parse_collective(std::string_view s);

struct Flow {
  int src = 0;         // rank
  int dst = 0;         // rank
  uint64_t bytes = 0;  // total over the step's repetitions
  // Time slice within the step (docs/route-plan.md "Rounds"): the checker
  // counts load per (step, round) and the simulator runs a step's rounds one
  // after another. build_schedule leaves every flow in round 0; a route
  // plan's rounds are copied on by apply_plan_rounds (plan.h).
  int round = 0;
  // Which connection of the pair and which QP of it the flow is, where one
  // pair of ranks has several flows at once (nccl-ring: channel, QP); 0 and
  // 0 for every other collective. Route plans carry them as "conn", "qp".
  int conn = 0;
  int qp = 0;
};

// A flow's identity within a step and within a route plan.
struct FlowId {
  int src = 0, dst = 0, conn = 0, qp = 0;
  friend bool operator==(const FlowId&, const FlowId&) = default;
};
inline FlowId flow_id(const Flow& f) { return {f.src, f.dst, f.conn, f.qp}; }

struct Step {
  std::string phase;   // "fold", "rs", "ag", "unfold", "ring-rs", "ring-ag"
  int distance = 0;    // HD: the rank distance of the exchange; ring: 1
  int repeat = 1;      // the same flows run this many times in a row
  std::vector<Flow> flows;
};

struct Schedule {
  Collective collective = Collective::kAllreduceHd;
  int ranks = 0;
  uint64_t count = 0;
  uint32_t elem_size = 4;
  std::vector<Step> steps;
};

// Block maths of HD allreduce, shared with collectives/.
struct HdLayout {
  int ranks = 0;
  int pof2 = 0;  // largest power of two <= ranks
  int rem = 0;   // ranks - pof2
  // -1 for a rank that folds into its neighbour (even ranks < 2*rem).
  int newrank(int rank) const;
  int rank_of(int newrank) const;
  int log2_pof2() const;
};
HdLayout hd_layout(int ranks);

// Element range [lo, hi) that newrank v holds after `steps` halving steps.
struct Range {
  uint64_t lo = 0;
  uint64_t hi = 0;
  uint64_t size() const { return hi - lo; }
};
Range hd_block(const HdLayout& layout, int newrank, int steps, uint64_t count);

// Where HD's phases sit in build_schedule(kAllreduceHd).steps: the fold
// (only when rem > 0) first, then rs k for k = 0..log2(pof2)-1, ag k for k
// descending, then the unfold (only when rem > 0). The collective engine
// maps its steps to a route plan's steps with these, so the two never drift.
int hd_fold_step(const HdLayout& layout);
int hd_rs_step(const HdLayout& layout, int k);
int hd_ag_step(const HdLayout& layout, int k);
int hd_unfold_step(const HdLayout& layout);

// Ring chunk c of P over `count` elements.
Range ring_chunk(int ranks, int c, uint64_t count);

// nccl-ring's shape: NCCL channels (one ring each; NCCL_MIN/MAX_NCHANNELS)
// and QPs per connection (the plugin's WEFT_NCCL_QPS).
struct NcclRingShape {
  int channels = 1;
  int qps = 1;
};
inline constexpr int kMaxNcclChannels = 64;  // NCCL's MAXCHANNELS (src/include/device.h, 2.12 and later)
inline constexpr int kMaxNcclQps = 16;       // the plugin's WEFT_NCCL_QPS limit (nccl_net/net.cc)
// Rejects channels or QPs outside 1..kMaxNccl*, naming the value.
Status validate(const NcclRingShape& shape);
// Candidate source ports to ask a path table for per pair: the planner
// deals a pair's ports out among its C x Q QPs (planner.h, 2), and a QP
// keeps every spine in its list only where each spine has a port for it, so
// at least 16 per QP (with 8, one 8-QP pair in a few hundred over 8 spines
// was left a spine short and one QP above the bound).
int nccl_ring_ports_per_pair(const NcclRingShape& shape, int at_least);

// nccl-ring takes its shape from `shape`; the other collectives reject a
// shape other than 1 x 1 (they have one flow per pair).
Result<Schedule> build_schedule(Collective c, int ranks, uint64_t count, uint32_t elem_size = 4,
                                const NcclRingShape& shape = {});
// nccl_ring_schedule.cc.
Schedule build_nccl_ring(int ranks, const NcclRingShape& shape, uint64_t count, uint32_t elem_size);

}  // namespace weft::routing
