// ProcessGroupWeft: construction, the reductions, broadcast and barrier, and
// what the backend refuses. Gathers and scatters: process_group_gather.cc.
#include "process_group.h"

#include <algorithm>
#include <chrono>
#include <utility>

#include <c10/util/Exception.h>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "store_adapter.h"

namespace weft::pt {
namespace {

std::string describe(int rank, int size, const GroupInfo& g) {
  if (g.global_ranks.empty()) return fmt::format("rank {} of {}", rank, size);
  return fmt::format("rank {} of {} in group '{}', whose ranks 0..{} are global ranks {}", rank, size, g.name, size - 1,
                     fmt::join(g.global_ranks, ", "));
}

// The one tensor per process of the single-tensor collectives (several per
// process was PyTorch's multi-GPU mode; CPU tensors of one process do not
// need it).
const at::Tensor& the_tensor(const std::vector<at::Tensor>& ts, std::string_view op) {
  TORCH_CHECK(ts.size() == 1, "weft: ", op, " takes one tensor per process, got ", ts.size());
  check_tensor(ts[0], op);
  return ts[0];
}

}  // namespace

ProcessGroupWeft::ProcessGroupWeft(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size, GroupInfo group,
                                   const BackendOptions& options)
    : c10d::ProcessGroup(rank, size) {
  const auto deadline = std::chrono::steady_clock::now() + group.timeout;
  coll::CommConfig cfg;
  cfg.rank = rank;
  cfg.size = size;
  cfg.transport = options.transport;
  cfg.host = options.host;
  cfg.timeout = group.timeout;
  // A plan names the world's ranks: only the default group is those ranks.
  if (group.global_ranks.empty()) cfg.plan = options.plan;
  C10dStore rendezvous(store);
  try {
    worker_ = Worker::start(cfg, rendezvous, describe(rank, size, group), deadline);
  } catch (const c10::Error&) {
    // The other ranks' deadlines are their own start + timeout: a quarter of
    // the timeout more (5 s at most) keeps the store up for ranks that came
    // in later than this one.
    hold_until_every_rank_failed(store, size, deadline + std::min<std::chrono::milliseconds>(group.timeout / 4, std::chrono::seconds(5)));
    throw;
  }
}

ProcessGroupWeft::~ProcessGroupWeft() {
  if (worker_) worker_->stop();
}

c10::intrusive_ptr<c10d::Work> ProcessGroupWeft::enqueue(c10d::OpType type, const char* title,
                                                         const std::vector<at::Tensor>& inputs,
                                                         std::vector<at::Tensor> outputs, Worker::Job job) {
  auto work = c10::make_intrusive<WeftWork>(getRank(), type, title, inputs, std::move(outputs));
  worker_->enqueue(work, std::move(job));
  return work;
}

coll::CollectiveOptions ProcessGroupWeft::call_options(std::chrono::milliseconds timeout) {
  coll::CollectiveOptions o;
  if (timeout != c10d::kUnsetTimeout) o.timeout = timeout;
  return o;
}

c10::intrusive_ptr<c10d::Work> ProcessGroupWeft::allreduce(std::vector<at::Tensor>& tensors,
                                                           const c10d::AllreduceOptions& opts) {
  const at::Tensor t = the_tensor(tensors, "allreduce");
  const coll::DataType dt = reduce_type(t, "allreduce");
  const Reduction red = reduction(opts.reduceOp, t, "allreduce");
  const coll::CollectiveOptions o = call_options(opts.timeout);
  const int n = getSize();
  return enqueue(c10d::OpType::ALLREDUCE, "weft:all_reduce", tensors, tensors,
                 [t, dt, red, o, n](coll::Communicator& c) -> Status {
                   Staged s(t);
                   if (red.scale_first) s.buffer().div_(n);
                   WEFT_RETURN_IF_ERROR(c.allreduce(s.data(), s.data(), s.count(), dt, red.op, o));
                   if (red.divide_after()) s.buffer().div_(n);
                   s.write_back();
                   return ok_status();
                 });
}

// One AllReduce over the tensors laid end to end: in place when they already
// are (consecutive), else through a joined copy.
c10::intrusive_ptr<c10d::Work> ProcessGroupWeft::allreduce_coalesced(std::vector<at::Tensor>& tensors,
                                                                     const c10d::AllreduceCoalescedOptions& opts) {
  check_tensors(tensors, "allreduce_coalesced", false);
  const coll::DataType dt = reduce_type(tensors[0], "allreduce_coalesced");
  const Reduction red = reduction(opts.reduceOp, tensors[0], "allreduce_coalesced");
  const coll::CollectiveOptions o = call_options(opts.timeout);
  const int n = getSize();
  return enqueue(c10d::OpType::ALLREDUCE_COALESCED, "weft:allreduce_coalesced", tensors, tensors,
                 [tensors, dt, red, o, n](coll::Communicator& c) -> Status {
                   const at::Tensor all = joined(tensors);
                   Staged s(all);
                   if (red.scale_first) s.buffer().div_(n);
                   WEFT_RETURN_IF_ERROR(c.allreduce(s.data(), s.data(), s.count(), dt, red.op, o));
                   if (red.divide_after()) s.buffer().div_(n);
                   split_into(all, tensors);
                   return ok_status();
                 });
}

// An AllReduce whose result only the root keeps: the other ranks reduce into
// a scratch tensor and leave theirs as it was.
c10::intrusive_ptr<c10d::Work> ProcessGroupWeft::reduce(std::vector<at::Tensor>& tensors,
                                                        const c10d::ReduceOptions& opts) {
  const at::Tensor t = the_tensor(tensors, "reduce");
  check_root(opts.rootRank, getSize(), "reduce");
  TORCH_CHECK(opts.rootTensor == 0, "weft: reduce: root tensor ", opts.rootTensor, " (there is one tensor per process)");
  const coll::DataType dt = reduce_type(t, "reduce");
  const Reduction red = reduction(opts.reduceOp, t, "reduce");
  const coll::CollectiveOptions o = call_options(opts.timeout);
  const int n = getSize();
  const bool root = opts.rootRank == getRank();
  return enqueue(c10d::OpType::REDUCE, "weft:reduce", tensors, tensors,
                 [t, dt, red, o, n, root](coll::Communicator& c) -> Status {
                   Staged s(t);
                   Staged out(root ? s.buffer() : at::empty_like(s.buffer()));
                   const at::Tensor in = red.scale_first ? s.buffer().div(n) : s.buffer();  // a non-root keeps its own
                   WEFT_RETURN_IF_ERROR(c.allreduce(in.data_ptr(), out.data(), s.count(), dt, red.op, o));
                   if (!root) return ok_status();
                   if (red.divide_after()) out.buffer().div_(n);
                   s.write_back();
                   return ok_status();
                 });
}

// Any element type: the library moves its bytes.
c10::intrusive_ptr<c10d::Work> ProcessGroupWeft::broadcast(std::vector<at::Tensor>& tensors,
                                                           const c10d::BroadcastOptions& opts) {
  const at::Tensor t = the_tensor(tensors, "broadcast");
  check_root(opts.rootRank, getSize(), "broadcast");
  TORCH_CHECK(opts.rootTensor == 0, "weft: broadcast: root tensor ", opts.rootTensor,
              " (there is one tensor per process)");
  const coll::CollectiveOptions o = call_options(opts.timeout);
  const int root = static_cast<int>(opts.rootRank);
  return enqueue(c10d::OpType::BROADCAST, "weft:broadcast", tensors, tensors,
                 [t, o, root](coll::Communicator& c) -> Status {
                   Staged s(t);
                   WEFT_RETURN_IF_ERROR(c.broadcast(s.data(), s.bytes(), coll::DataType::kU8, root, o));
                   s.write_back();
                   return ok_status();
                 });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupWeft::barrier(const c10d::BarrierOptions& opts) {
  const coll::CollectiveOptions o = call_options(opts.timeout);
  return enqueue(c10d::OpType::BARRIER, "weft:barrier", {}, {},
                 [o](coll::Communicator& c) -> Status { return c.barrier(o); });
}

void ProcessGroupWeft::unsupported(const char* what) const {
  TORCH_CHECK(false, "weft: ", what,
              " is not supported: weft's library has no all-to-all or point-to-point; run it on a gloo group "
              "(dist.new_group(backend=\"gloo\")) next to the weft one");
}

c10::intrusive_ptr<c10d::Work> ProcessGroupWeft::alltoall_base(at::Tensor&, at::Tensor&, std::vector<int64_t>&,
                                                               std::vector<int64_t>&, const c10d::AllToAllOptions&) {
  unsupported("all_to_all_single");
}
c10::intrusive_ptr<c10d::Work> ProcessGroupWeft::alltoall(std::vector<at::Tensor>&, std::vector<at::Tensor>&,
                                                          const c10d::AllToAllOptions&) {
  unsupported("all_to_all");
}
c10::intrusive_ptr<c10d::Work> ProcessGroupWeft::send(std::vector<at::Tensor>&, int, int) { unsupported("send"); }
c10::intrusive_ptr<c10d::Work> ProcessGroupWeft::recv(std::vector<at::Tensor>&, int, int) { unsupported("recv"); }
c10::intrusive_ptr<c10d::Work> ProcessGroupWeft::recvAnysource(std::vector<at::Tensor>&, int) {
  unsupported("recv from any source");
}

}  // namespace weft::pt
