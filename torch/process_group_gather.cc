// ProcessGroupWeft: AllGather, ReduceScatter and the rooted gather and
// scatter built on them. Blocks are moved as bytes where nothing is reduced,
// so any element type works; lists of tensors that already lie end to end
// (consecutive) are used in place, others go through one flat copy.
#include <utility>

#include <c10/util/Exception.h>

#include "process_group.h"

namespace weft::pt {
namespace {

// Each of `ts` has the element type and number of elements of `like`.
void check_like(const std::vector<at::Tensor>& ts, const at::Tensor& like, size_t want, std::string_view op,
                std::string_view what) {
  TORCH_CHECK(ts.size() == want, "weft: ", op, " needs ", want, " ", what, " (one per rank), got ", ts.size());
  for (const at::Tensor& t : ts) {
    check_tensor(t, op);
    TORCH_CHECK(t.scalar_type() == like.scalar_type() && t.numel() == like.numel(), "weft: ", op, ": every one of the ",
                what, " must have the input's type and size (", like.numel(), " elements of ", python_name(like.scalar_type()),
                "), got ", t.numel(), " of ", python_name(t.scalar_type()));
  }
}

// The root's list of `n` tensors like `like`; the other ranks pass none.
std::vector<at::Tensor> root_list(const std::vector<std::vector<at::Tensor>>& lists, bool root, int64_t root_rank,
                                  const at::Tensor& like, int n, std::string_view op, std::string_view what) {
  if (!root) {
    TORCH_CHECK(lists.empty(), "weft: ", op, ": only the root (rank ", root_rank, ") takes ", what);
    return {};
  }
  TORCH_CHECK(lists.size() == 1, "weft: ", op, ": the root takes one list of ", what, ", got ", lists.size());
  check_like(lists[0], like, static_cast<size_t>(n), op, what);
  return lists[0];
}

// Where the blocks of the list `ts` land: the list's own memory when its
// tensors are consecutive, else an empty tensor of the combined size that
// split_into() copies into the list.
at::Tensor flat_for(const std::vector<at::Tensor>& ts, const at::Tensor& like, int blocks) {
  if (like.numel() > 0 && consecutive(ts)) {
    return at::from_blob(first_element(ts), {blocks * like.numel()}, like.options());
  }
  return at::empty({blocks * like.numel()}, like.options());
}

Status allgather_bytes(coll::Communicator& c, const at::Tensor& input, const at::Tensor& flat,
                       const coll::CollectiveOptions& o) {
  Staged in(input), out(flat);
  return c.allgather(in.data(), out.data(), in.bytes(), coll::DataType::kU8, o);
}

}  // namespace

c10::intrusive_ptr<c10d::Work> ProcessGroupWeft::allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                                           std::vector<at::Tensor>& inputs,
                                                           const c10d::AllgatherOptions& opts) {
  TORCH_CHECK(inputs.size() == 1 && outputs.size() == 1,
              "weft: allgather takes one input tensor and one list of outputs per process");
  const at::Tensor in = inputs[0];
  check_tensor(in, "allgather");
  const std::vector<at::Tensor> outs = outputs[0];
  const int n = getSize();
  check_like(outs, in, static_cast<size_t>(n), "allgather", "output tensors");
  const coll::CollectiveOptions o = call_options(opts.timeout);
  return enqueue(c10d::OpType::ALLGATHER, "weft:all_gather", inputs, outs,
                 [in, outs, n, o](coll::Communicator& c) -> Status {
                   const at::Tensor flat = flat_for(outs, in, n);
                   WEFT_RETURN_IF_ERROR(allgather_bytes(c, in, flat, o));
                   split_into(flat, outs);
                   return ok_status();
                 });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupWeft::_allgather_base(at::Tensor& output, at::Tensor& input,
                                                                 const c10d::AllgatherOptions& opts) {
  check_tensor(input, "_allgather_base");
  check_tensor(output, "_allgather_base");
  TORCH_CHECK(output.scalar_type() == input.scalar_type() && output.numel() == getSize() * input.numel(),
              "weft: _allgather_base: the output must hold ", getSize(), " x the input (", getSize() * input.numel(),
              " elements of ", python_name(input.scalar_type()), "), got ", output.numel(), " of ",
              python_name(output.scalar_type()));
  const coll::CollectiveOptions o = call_options(opts.timeout);
  const at::Tensor in = input, out = output;
  return enqueue(c10d::OpType::_ALLGATHER_BASE, "weft:_all_gather_base", {input}, {output},
                 [in, out, o](coll::Communicator& c) -> Status {
                   Staged s(out);
                   WEFT_RETURN_IF_ERROR(allgather_bytes(c, in, s.buffer(), o));
                   s.write_back();
                   return ok_status();
                 });
}

// outputs[r][i] receives rank r's inputs[i]: one AllGather of the inputs
// laid end to end.
c10::intrusive_ptr<c10d::Work> ProcessGroupWeft::allgather_coalesced(std::vector<std::vector<at::Tensor>>& outputs,
                                                                     std::vector<at::Tensor>& inputs,
                                                                     const c10d::AllgatherOptions& opts) {
  check_tensors(inputs, "allgather_coalesced", false);
  const int n = getSize();
  TORCH_CHECK(outputs.size() == static_cast<size_t>(n), "weft: allgather_coalesced needs ", n,
              " lists of outputs (one per rank), got ", outputs.size());
  std::vector<at::Tensor> all_outs;
  for (const std::vector<at::Tensor>& list : outputs) {
    TORCH_CHECK(list.size() == inputs.size(), "weft: allgather_coalesced: every output list must have ", inputs.size(),
                " tensors (one per input), got ", list.size());
    for (size_t i = 0; i < list.size(); ++i) {
      check_like({list[i]}, inputs[i], 1, "allgather_coalesced", "output tensor");
      all_outs.push_back(list[i]);
    }
  }
  const coll::CollectiveOptions o = call_options(opts.timeout);
  return enqueue(c10d::OpType::ALLGATHER_COALESCED, "weft:all_gather_coalesced", inputs, all_outs,
                 [inputs, all_outs, n, o](coll::Communicator& c) -> Status {
                   const at::Tensor in = joined(inputs);
                   const at::Tensor flat = flat_for(all_outs, in, n);
                   WEFT_RETURN_IF_ERROR(allgather_bytes(c, in, flat, o));
                   split_into(flat, all_outs);
                   return ok_status();
                 });
}

// An AllGather whose blocks only the root keeps.
c10::intrusive_ptr<c10d::Work> ProcessGroupWeft::gather(std::vector<std::vector<at::Tensor>>& outputs,
                                                        std::vector<at::Tensor>& inputs,
                                                        const c10d::GatherOptions& opts) {
  TORCH_CHECK(inputs.size() == 1, "weft: gather takes one input tensor per process, got ", inputs.size());
  const at::Tensor in = inputs[0];
  check_tensor(in, "gather");
  const int n = getSize();
  check_root(opts.rootRank, n, "gather");
  const bool root = opts.rootRank == getRank();
  const std::vector<at::Tensor> outs = root_list(outputs, root, opts.rootRank, in, n, "gather", "output tensors");
  const coll::CollectiveOptions o = call_options(opts.timeout);
  return enqueue(c10d::OpType::GATHER, "weft:gather", inputs, outs,
                 [in, outs, n, o, root](coll::Communicator& c) -> Status {
                   const at::Tensor flat = root ? flat_for(outs, in, n) : at::empty({n * in.numel()}, in.options());
                   WEFT_RETURN_IF_ERROR(allgather_bytes(c, in, flat, o));
                   if (root) split_into(flat, outs);
                   return ok_status();
                 });
}

// A Broadcast of the root's inputs laid end to end, of which every rank
// keeps its block.
c10::intrusive_ptr<c10d::Work> ProcessGroupWeft::scatter(std::vector<at::Tensor>& outputs,
                                                         std::vector<std::vector<at::Tensor>>& inputs,
                                                         const c10d::ScatterOptions& opts) {
  TORCH_CHECK(outputs.size() == 1, "weft: scatter takes one output tensor per process, got ", outputs.size());
  const at::Tensor out = outputs[0];
  check_tensor(out, "scatter");
  const int n = getSize();
  check_root(opts.rootRank, n, "scatter");
  const bool root = opts.rootRank == getRank();
  const std::vector<at::Tensor> ins = root_list(inputs, root, opts.rootRank, out, n, "scatter", "input tensors");
  const coll::CollectiveOptions o = call_options(opts.timeout);
  const int root_rank = static_cast<int>(opts.rootRank), me = getRank();
  return enqueue(c10d::OpType::SCATTER, "weft:scatter", ins, outputs,
                 [ins, out, n, o, root, root_rank, me](coll::Communicator& c) -> Status {
                   Staged flat(root ? joined(ins) : at::empty({n * out.numel()}, out.options()));
                   WEFT_RETURN_IF_ERROR(c.broadcast(flat.data(), flat.bytes(), coll::DataType::kU8, root_rank, o));
                   out.copy_(flat.buffer().narrow(0, me * out.numel(), out.numel()).view_as(out));
                   return ok_status();
                 });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupWeft::reduce_scatter(std::vector<at::Tensor>& outputs,
                                                                std::vector<std::vector<at::Tensor>>& inputs,
                                                                const c10d::ReduceScatterOptions& opts) {
  TORCH_CHECK(outputs.size() == 1 && inputs.size() == 1,
              "weft: reduce_scatter takes one output tensor and one list of inputs per process");
  const at::Tensor out = outputs[0];
  check_tensor(out, "reduce_scatter");
  const std::vector<at::Tensor> ins = inputs[0];
  const int n = getSize();
  check_like(ins, out, static_cast<size_t>(n), "reduce_scatter", "input tensors");
  const coll::DataType dt = reduce_type(out, "reduce_scatter");
  const Reduction red = reduction(opts.reduceOp, out, "reduce_scatter");
  const coll::CollectiveOptions o = call_options(opts.timeout);
  return enqueue(c10d::OpType::REDUCE_SCATTER, "weft:reduce_scatter", ins, outputs,
                 [ins, out, n, dt, red, o](coll::Communicator& c) -> Status {
                   Staged flat(red.scale_first ? joined(ins).div(n) : joined(ins)), s(out);
                   WEFT_RETURN_IF_ERROR(c.reduce_scatter(flat.data(), s.data(), s.count(), dt, red.op, o));
                   if (red.divide_after()) s.buffer().div_(n);
                   s.write_back();
                   return ok_status();
                 });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupWeft::_reduce_scatter_base(at::Tensor& output, at::Tensor& input,
                                                                      const c10d::ReduceScatterOptions& opts) {
  check_tensor(input, "_reduce_scatter_base");
  check_tensor(output, "_reduce_scatter_base");
  const int n = getSize();
  TORCH_CHECK(input.scalar_type() == output.scalar_type() && input.numel() == n * output.numel(),
              "weft: _reduce_scatter_base: the input must hold ", n, " x the output (", n * output.numel(),
              " elements of ", python_name(output.scalar_type()), "), got ", input.numel(), " of ",
              python_name(input.scalar_type()));
  const coll::DataType dt = reduce_type(output, "_reduce_scatter_base");
  const Reduction red = reduction(opts.reduceOp, output, "_reduce_scatter_base");
  const coll::CollectiveOptions o = call_options(opts.timeout);
  const at::Tensor in = input, out = output;
  return enqueue(c10d::OpType::_REDUCE_SCATTER_BASE, "weft:_reduce_scatter_base", {input}, {output},
                 [in, out, n, dt, red, o](coll::Communicator& c) -> Status {
                   Staged si(red.scale_first ? in.div(n) : in), so(out);
                   WEFT_RETURN_IF_ERROR(c.reduce_scatter(si.data(), so.data(), so.count(), dt, red.op, o));
                   if (red.divide_after()) so.buffer().div_(n);
                   so.write_back();
                   return ok_status();
                 });
}

}  // namespace weft::pt
