// A plan run on consecutive pieces of the vector (internal): one sub-plan
// per piece, each a whole collective on its elements, run one after the
// other. Why: over loopback TCP every byte is copied by a CPU twice, and a
// piece's socket buffers, scratch and data stay in the cache between its
// steps where a whole large vector's do not
// (bench/results/2026-11-24-hd-pieces.md has the figures). The bytes moved are the same; each piece pays
// its own steps' latencies (SelectionRule::hd_piece_bytes).
#pragma once

#include <memory>
#include <vector>

#include "algorithms/algorithms.h"

namespace weft::coll::internal {

using MakePlanFn = std::unique_ptr<Plan> (*)(const Shape&);

// `make` on pieces of s of at most piece_bytes (whole elements, at least
// one); the pieces' shapes keep s's offset, so their element ranges are
// kData's. s.gates must be null: a route plan's rounds describe whole steps.
std::unique_ptr<Plan> plan_in_pieces(const Shape& s, size_t piece_bytes, MakePlanFn make);

}  // namespace weft::coll::internal
