// What the weft process group accepts from torch.distributed, and how a
// tensor becomes a buffer the library can use.
//
//   check_tensor(t, "allreduce");                       // throws: CUDA, sparse
//   coll::DataType dt = reduce_type(t, "allreduce");   // throws: int16, bool, ...
//   Staged s(t);                     // s.buf is t, or a contiguous copy of it
//   comm.allreduce(s.data(), s.data(), s.count(), dt, op);
//   s.write_back();                  // copies into t if it was not contiguous
//
// Checks that a caller can act on (a CUDA tensor, an element type the
// library cannot reduce) throw at the call, as ProcessGroupGloo does; the
// data moves later, on the group's worker thread.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include <ATen/ATen.h>
#include <torch/csrc/distributed/c10d/Types.hpp>

#include "weft/collectives/types.h"

namespace weft::pt {

// Throws (RuntimeError in Python) unless `t` is a dense CPU tensor: CUDA and
// other devices, sparse and other layouts are refused, naming `op` and what
// to do instead.
void check_tensor(const at::Tensor& t, std::string_view op);
// Every tensor checked, all of one element type and, if `same_size`, of one
// number of elements; at least one.
void check_tensors(const std::vector<at::Tensor>& ts, std::string_view op, bool same_size);

// The name a Python user writes for an element type ("torch.float32").
std::string python_name(at::ScalarType t);

// Throws unless 0 <= root < size.
void check_root(int64_t root, int size, std::string_view op);

// The library's element type for a reduction of `t`: f32, f64, f16, bf16,
// i32, i64, u8. Other types throw, naming them.
coll::DataType reduce_type(const at::Tensor& t, std::string_view op);

// A reduction operator of the library, plus whether the sum is divided by
// the group's size (AVG, floating types only): afterwards, or for float16
// before, on each rank's input (as NCCL's premultiplied AVG), where the sum
// of n values can overflow float16's 65504 when their average does not.
// BAND, BOR, BXOR and PREMUL_SUM throw.
struct Reduction {
  coll::ReduceOp op = coll::ReduceOp::kSum;
  bool average = false;
  bool scale_first = false;  // average by dividing the inputs (float16)
  bool divide_after() const { return average && !scale_first; }
};
Reduction reduction(const c10d::ReduceOp& op, const at::Tensor& t, std::string_view what);

// A contiguous stand-in for a tensor the library reads or writes: the tensor
// itself when it is contiguous (no copy), else a contiguous copy made at
// construction, copied back by write_back(). Moved as bytes (u8) when the
// element type does not matter (broadcast, allgather). Every buffer the
// backend hands the library is a Staged one: large ones are put on huge
// pages (huge_pages.h).
class Staged {
 public:
  explicit Staged(const at::Tensor& t);
  void* data() const { return buf_.data_ptr(); }
  size_t count() const { return static_cast<size_t>(buf_.numel()); }
  size_t bytes() const { return count() * buf_.element_size(); }
  const at::Tensor& buffer() const { return buf_; }
  void write_back();

 private:
  at::Tensor user_;
  at::Tensor buf_;
};

// True when `ts` are contiguous tensors that follow each other in memory
// (ts[i] starts where ts[i-1] ends), as `torch.empty(n * k).chunk(k)` makes
// them: the library can then use them as one buffer, no copy.
// Tensors of no elements are skipped (they have no memory to follow).
bool consecutive(const std::vector<at::Tensor>& ts);
// Where the first tensor with elements starts; null when none has any.
void* first_element(const std::vector<at::Tensor>& ts);
// The tensors' elements end to end, as one one-dimensional tensor: a view
// of their own memory when they are consecutive, else a copy.
at::Tensor joined(const std::vector<at::Tensor>& ts);
// Copies `flat` (as joined() lays them out) into the tensors, unless it is
// their own memory.
void split_into(const at::Tensor& flat, const std::vector<at::Tensor>& ts);

}  // namespace weft::pt
