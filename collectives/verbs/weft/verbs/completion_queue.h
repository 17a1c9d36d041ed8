// A completion queue with a completion channel: poll first, sleep second.
//
// wait() spins on ibv_poll_cq for a short budget (the latency path), then arms
// the CQ (ibv_req_notify_cq), polls once more to close the race between the
// last poll and the arming (ibv_req_notify_cq(3)), and sleeps in poll(2) on
// the channel's fd together with the caller's watch fds (peer liveness
// sockets), so a dead peer wakes a sleeping rank. CQ events are acknowledged
// in batches and always before the CQ is destroyed (ibv_get_cq_event(3)).
#pragma once

#include <infiniband/verbs.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <span>

#include "weft/common/status.h"
#include "weft/verbs/handle.h"

namespace weft::verbs {

using Clock = std::chrono::steady_clock;

struct CqConfig {
  int depth = 1024;
  // ibv_poll_cq calls before arming and sleeping; 0 goes straight to events.
  int spin_polls = 4096;
};

class CompletionQueue {
 public:
  static Result<std::unique_ptr<CompletionQueue>> create(ibv_context* ctx, const CqConfig& config);
  ~CompletionQueue();
  CompletionQueue(const CompletionQueue&) = delete;
  CompletionQueue& operator=(const CompletionQueue&) = delete;

  ibv_cq* get() const { return cq_.get(); }
  // Completions the CQ holds (the provider may round the request up).
  int depth() const { return cq_->cqe; }
  // Grows the CQ to at least `depth` entries (ibv_resize_cq(3)); an overrun
  // CQ is a fatal error, so owners grow it before adding queues.
  Status resize(int depth);

  // Non-blocking: fills `out` with up to out.size() completions, returns how many.
  Result<int> poll(std::span<ibv_wc> out);

  // What woke wait(): completions (count > 0), a readable watch fd (its
  // index), or the deadline (neither).
  struct Wake {
    int completions = 0;
    int watch_index = -1;
  };
  // Blocks until a completion, a watch fd becomes readable/hung up, or
  // `deadline`. Returns Wake{} (both empty) at the deadline.
  Result<Wake> wait(std::span<ibv_wc> out, std::span<const int> watch_fds, Clock::time_point deadline);

  // How often wait() had to sleep on the channel (tests show the event path runs).
  std::uint64_t sleeps() const { return sleeps_; }

 private:
  CompletionQueue() = default;
  Status ack_pending();

  CompChannelHandle channel_;
  CqHandle cq_;  // destroyed before the channel (reverse member order)
  CqConfig config_;
  unsigned unacked_ = 0;
  bool armed_ = false;
  std::uint64_t sleeps_ = 0;
};

}  // namespace weft::verbs
