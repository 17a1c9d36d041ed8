// ProcessGroupWeft: weft's collective library as a torch.distributed
// process group (c10d::ProcessGroup, PyTorch 1.13), one communicator per
// group. Python registers it as the backend "weft" (torch/weft_torch):
//
//   import weft_torch                                  # registers "weft"
//   dist.init_process_group("weft", timeout=timedelta(seconds=60))
//   dist.all_reduce(t)                                 # weft's AllReduce
//
// Every collective checks its arguments at the call (a CUDA or sparse
// tensor, an element type or operator the library cannot reduce throws
// there), then runs on the group's worker thread (worker.h; or on the
// thread that waits for it, when nothing runs before it) and returns a
// WeftWork (work.h) at once. The group's timeout (init_process_group's)
// bounds every call, counted from when the call starts on the worker; a
// lost rank fails the call on every other rank with a message naming it.
// Non-contiguous tensors are copied into a contiguous buffer and back.
//
// What the library has no collective for: reduce, gather and scatter are
// built from allreduce, allgather and broadcast (correct, more traffic than
// a rooted algorithm); all-to-all and point-to-point (send, recv) throw,
// naming a gloo group as the way to run them.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include "options.h"
#include "tensors.h"
#include "worker.h"

namespace weft::pt {

// Which group this is: PyTorch's group name and the global ranks of its
// members (empty for the default group, whose ranks are the global ranks).
struct GroupInfo {
  std::string name;
  std::vector<int64_t> global_ranks;
  std::chrono::milliseconds timeout{1800000};  // init_process_group's default, 30 min
};

class ProcessGroupWeft final : public c10d::ProcessGroup {
 public:
  // Creates the communicator (collective over the group: every member calls
  // it) through `store`; throws c10::Error naming the cause if it cannot.
  ProcessGroupWeft(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size, GroupInfo group,
                   const BackendOptions& options);
  ~ProcessGroupWeft() override;

  const std::string getBackendName() const override { return "weft"; }

  c10::intrusive_ptr<c10d::Work> broadcast(std::vector<at::Tensor>& tensors,
                                           const c10d::BroadcastOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor>& tensors,
                                           const c10d::AllreduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce_coalesced(std::vector<at::Tensor>& tensors,
                                                     const c10d::AllreduceCoalescedOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce(std::vector<at::Tensor>& tensors, const c10d::ReduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather(std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
                                           const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _allgather_base(at::Tensor& output, at::Tensor& input,
                                                 const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather_coalesced(std::vector<std::vector<at::Tensor>>& outputs,
                                                     std::vector<at::Tensor>& inputs,
                                                     const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> gather(std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
                                        const c10d::GatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> scatter(std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
                                         const c10d::ScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter(std::vector<at::Tensor>& outputs,
                                                std::vector<std::vector<at::Tensor>>& inputs,
                                                const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _reduce_scatter_base(at::Tensor& output, at::Tensor& input,
                                                      const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions& opts) override;

  c10::intrusive_ptr<c10d::Work> alltoall_base(at::Tensor& output, at::Tensor& input, std::vector<int64_t>& output_splits,
                                               std::vector<int64_t>& input_splits,
                                               const c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> alltoall(std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
                                          const c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> send(std::vector<at::Tensor>& tensors, int dst, int tag) override;
  c10::intrusive_ptr<c10d::Work> recv(std::vector<at::Tensor>& tensors, int src, int tag) override;
  c10::intrusive_ptr<c10d::Work> recvAnysource(std::vector<at::Tensor>& tensors, int tag) override;

  // The library transport that serves each rank of the group ("shm",
  // "tcp"; "" for this rank).
  const std::vector<std::string>& peer_transports() const { return worker_->peer_transports(); }

 private:
  // Queues `job` on the worker and returns its work handle.
  c10::intrusive_ptr<c10d::Work> enqueue(c10d::OpType type, const char* title, const std::vector<at::Tensor>& inputs,
                                         std::vector<at::Tensor> outputs, Worker::Job job);
  // The library's per-call options for a c10d timeout (kUnsetTimeout: the group's).
  static coll::CollectiveOptions call_options(std::chrono::milliseconds timeout);
  [[noreturn]] void unsupported(const char* what) const;

  std::shared_ptr<Worker> worker_;  // shared with the works it queued (WeftWork::wait)
};

}  // namespace weft::pt
