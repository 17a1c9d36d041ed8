// The inputs `weft bench` and `weft demo` feed a collective and the exact
// results they check: small integers, exact in every type (f16 and bf16
// included), periodic in the element index so a check needs no second copy
// of the data.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "weft/collectives/types.h"

namespace weft::cli {

// Element i of `rank`'s input for collective c ("allreduce", "reducescatter",
// "allgather", "broadcast").
double input_of(const std::string& c, coll::ReduceOp op, int rank, size_t i);
void store_as(coll::DataType t, void* base, size_t i, double v);
double combine(coll::ReduceOp op, double a, double b);

// Rank `rank`'s input of n elements (a period computed, then copied).
void fill_input(const std::string& c, coll::ReduceOp op, coll::DataType t, int rank, size_t n, void* base);

// Elements of rank `me`'s output that differ from the exact result. For
// reducescatter `out` holds `per` elements (block me); for the others `elems`
// (allgather: n blocks of `per`).
int64_t count_wrong(const std::string& c, coll::ReduceOp op, coll::DataType t, int n, int me, size_t per, size_t elems,
                    const void* out);

}  // namespace weft::cli
