#include "work.h"

#include <algorithm>
#include <utility>

#include <c10/util/Exception.h>

#include "worker.h"

namespace weft::pt {

WeftWork::WeftWork(int rank, c10d::OpType type, const char* profiling_title, const std::vector<at::Tensor>& inputs,
                   std::vector<at::Tensor> outputs)
    : c10d::Work(rank, type, profiling_title, inputs),
      outputs_(std::move(outputs)),
      future_(c10::make_intrusive<c10::ivalue::Future>(c10::ListType::create(c10::TensorType::get()))) {}

// The future first, then the Work, as ProcessGroupGloo's finishWorkGloo:
// a DDP bucket's callbacks (run inside markCompleted) are done by the time
// Work::wait() returns.
void WeftWork::complete() {
  future_->markCompleted(c10::IValue(outputs_));
  finish();
}

void WeftWork::fail(std::exception_ptr error) {
  future_->setError(error);
  finish(error);
}

// Waiting on a work finds every earlier work of its group completed too
// (their callbacks may still run on the worker's other thread).
// A timeout bounds both waits, as c10d::Work::wait's: it raises.
bool WeftWork::wait(std::chrono::milliseconds timeout) {
  const auto started = std::chrono::steady_clock::now();
  std::shared_ptr<Worker> w = runner_.lock();
  if (w && timeout == kNoTimeout) w->run_here(this);
  // At most coll::kLongestTimeout: a longer one would overflow a deadline,
  // here and in c10d::Work::wait's condition_variable::wait_for.
  if (timeout != kNoTimeout) timeout = std::min(timeout, coll::kLongestTimeout);
  const bool done = c10d::Work::wait(timeout);
  if (!w || !done) return done;
  if (timeout == kNoTimeout) return w->wait_completed_before(seq_);
  TORCH_CHECK(w->wait_completed_before(seq_, started + timeout), "weft: wait timed out after ", timeout.count(),
              " ms: this call finished, but an earlier call of its group is still running its callbacks");
  return true;
}

}  // namespace weft::pt
