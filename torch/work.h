// The handle a weft collective returns (c10d::Work): wait() and the future
// behave as ProcessGroupGloo's.
//
//   auto w = c10::make_intrusive<WeftWork>(rank, c10d::OpType::ALLREDUCE, "weft:all_reduce", inputs, outputs);
//   ... on the group's worker thread: w->complete() or w->fail(error)
//   w->wait();                       // any thread: rethrows the error
//   w->getFuture()->then(...);       // DDP's communication hooks
//
// wait() blocks until complete() or fail() and rethrows the error, and
// until every earlier work of its group has completed; with a timeout it
// throws when they have not by then (c10d::Work's, as Gloo's). Without a
// timeout, a work that no thread runs yet and that is
// next in its group's queue is run by the thread that waits for it
// (Worker::run_here): a synchronous call (dist.all_reduce without async_op)
// then does not wait for the worker thread to be woken and scheduled (4
// ranks, 4 KiB: 22 us per call instead of 26.5, bench/results/
// 2026-11-26-torch-allreduce.md). The future completes
// with the output tensors (a list of tensors, as Gloo's), or with the
// error; its callbacks run on the thread that ran the work.
#pragma once

#include <chrono>
#include <exception>
#include <memory>
#include <vector>

#include <ATen/core/ivalue.h>
#include <torch/csrc/distributed/c10d/Work.hpp>

namespace weft::pt {

class Worker;

class WeftWork final : public c10d::Work {
 public:
  // `inputs` only feed the profiler (record_function), as in Gloo; `outputs`
  // are what result() and the future hold.
  WeftWork(int rank, c10d::OpType type, const char* profiling_title, const std::vector<at::Tensor>& inputs,
           std::vector<at::Tensor> outputs);

  std::vector<at::Tensor> result() override { return outputs_; }
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override { return future_; }
  bool wait(std::chrono::milliseconds timeout = kNoTimeout) override;

  // The worker whose queue holds this work, and its place in the queue's
  // order (set when it is queued).
  void set_runner(std::weak_ptr<Worker> runner, uint64_t seq) {
    runner_ = std::move(runner);
    seq_ = seq;
  }

  // Called once, by the worker thread, when the collective has finished.
  void complete();
  void fail(std::exception_ptr error);

 private:
  std::vector<at::Tensor> outputs_;
  c10::intrusive_ptr<c10::ivalue::Future> future_;
  std::weak_ptr<Worker> runner_;
  uint64_t seq_ = 0;
};

}  // namespace weft::pt
