// The collective calls that the fault tests stall or break: AllReduce by
// algorithm, and the other collectives, by name.
#pragma once

#include <chrono>
#include <regex>
#include <string>
#include <vector>

#include "weft/collectives/communicator.h"

namespace weft::coll::testing {

// "ring", "hd", "butterfly", "oneshot", "hybrid", "auto" (AllReduce with
// that algorithm), "broadcast" (root 0), "broadcast_roots" (the root moves
// on by one rank per call: the first calls connect pairs on demand,
// communicator.h "Connections"), "allgather", "reduce_scatter" (ring).
inline const std::vector<std::string>& fault_call_kinds() {
  static const std::vector<std::string> kinds = {"ring",      "hd",        "butterfly",       "oneshot",   "hybrid",
                                                 "broadcast", "broadcast_roots", "allgather", "reduce_scatter"};
  return kinds;
}

// Buffers of one rank for fault_call: `count` floats per rank.
struct FaultBuffers {
  std::vector<float> data, out;
  int calls = 0;  // broadcast_roots: the root of the next call
  FaultBuffers(int ranks, size_t count) : data(count * static_cast<size_t>(ranks), 1.0f), out(count, 0.0f) {}
};

// One call with its own timeout (0: the communicator's).
inline Status fault_call(Communicator& comm, const std::string& kind, FaultBuffers& b,
                         std::chrono::milliseconds timeout = std::chrono::milliseconds(0)) {
  CollectiveOptions o;
  o.timeout = timeout;
  const size_t count = b.out.size();
  if (kind == "broadcast") return comm.broadcast(b.data.data(), count, DataType::kF32, 0, o);
  if (kind == "broadcast_roots") return comm.broadcast(b.data.data(), count, DataType::kF32, b.calls++ % comm.size(), o);
  if (kind == "allgather") {
    float* mine = b.data.data() + count * static_cast<size_t>(comm.rank());
    return comm.allgather(mine, b.data.data(), count, DataType::kF32, o);
  }
  if (kind == "reduce_scatter") return comm.reduce_scatter(b.data.data(), b.out.data(), count, DataType::kF32, ReduceOp::kMax, o);
  auto a = parse_algorithm(kind);
  if (!a) return invalid_argument("unknown fault call " + kind);
  o.algorithm = *a;
  // Max keeps the values finite however many calls run.
  return comm.allreduce(b.data.data(), b.data.data(), count, DataType::kF32, ReduceOp::kMax, o);
}

// True when `message` names `rank` as the stalled one (stall.h's verdict,
// possibly relayed by the rank that decided first).
inline bool blames_stalled(const std::string& message, int rank) {
  return std::regex_search(message, std::regex("rank " + std::to_string(rank) + " stalled"));
}

}  // namespace weft::coll::testing
