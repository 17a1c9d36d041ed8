// The two phases of a ring (internal), shared by the ring AllReduce, the
// ReduceScatter, the AllGather and the hybrid AllReduce's intra-host legs.
//
// chunks[c] is chunk c cut into pipelining segments (element ranges of
// kData). With `shift` s, rank r
//   reduce-scatter: sends chunk (r + s - 1 - i) and receives (r + s - 2 - i)
//                   at repetition i, ending with chunk (r + s) reduced;
//   allgather:      starts owning chunk (r + s), sends (r + s - i) and
//                   receives (r + s - 1 - i).
// The ring AllReduce uses s = 1 (routing's schedule), ReduceScatter and
// AllGather s = 0 (rank r owns block r). A segment is forwarded as soon as
// it has arrived (and been reduced), so every link of the ring carries data
// at once (NCCL's pipelined ring).
#pragma once

#include <vector>

#include "algorithms/algorithms.h"
#include "algorithms/segments.h"
#include "context.h"

namespace weft::coll::internal {

using Chunks = std::vector<std::vector<Segment>>;

// Chunk c = routing::ring_chunk(p, c, count) + offset, in segments.
Chunks ring_chunks(int p, size_t offset, size_t count, size_t esize, size_t seg_bytes);
// Chunk c = [offset + c*block, offset + (c+1)*block), in segments.
Chunks block_chunks(int p, size_t offset, size_t block, size_t esize, size_t seg_bytes);

// answered: ring_allgather on the same ranks and chunks follows in this
// call. Its sends are then held (Context::send_held): a chunk sent to the
// next rank comes back reduced, through that rank, before anything writes
// it again.
Status ring_reduce_scatter(Context& ctx, const Chunks& chunks, int shift, bool answered = false);
Status ring_allgather(Context& ctx, const Chunks& chunks, int shift);

// 1 MiB: over TCP with 4 ranks on 2 cores every segment costs a wait (and
// often a turn of the scheduler); 512 KiB segments took 6.4 ms for a 4 MiB
// AllReduce and 30 ms for 16 MiB, 1 MiB ones 4.4 and 21 ms (quiet host).
constexpr size_t kDefaultSegment = 1 << 20;

// Ring AllReduce holding a route plan's rounds (Shape::gates from
// routing::ring_plan_gates; ring_gates.cc).
std::unique_ptr<Plan> plan_allreduce_ring_gated(const Shape& s);

}  // namespace weft::coll::internal
