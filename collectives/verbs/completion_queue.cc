#include "weft/verbs/completion_queue.h"

#include <fcntl.h>
#include <poll.h>

#include <vector>

#include <fmt/format.h>

#include "weft/verbs/error.h"

namespace weft::verbs {
namespace {
// Acknowledging every event takes a mutex inside libibverbs; batch them.
constexpr unsigned kAckBatch = 64;
}  // namespace

Result<std::unique_ptr<CompletionQueue>> CompletionQueue::create(ibv_context* ctx, const CqConfig& config) {
  if (config.depth < 1) return invalid_argument(fmt::format("CQ depth {} must be >= 1", config.depth));
  if (config.spin_polls < 0) return invalid_argument("CQ spin_polls must be >= 0");
  std::unique_ptr<CompletionQueue> q(new CompletionQueue());
  q->config_ = config;
  q->channel_ = CompChannelHandle(ibv_create_comp_channel(ctx));
  if (!q->channel_) return verbs_errno_error("ibv_create_comp_channel");
  // The channel fd is polled, never read blindly: make it non-blocking.
  int fl = fcntl(q->channel_->fd, F_GETFL);
  if (fl < 0 || fcntl(q->channel_->fd, F_SETFL, fl | O_NONBLOCK) < 0) return io_error("fcntl(comp channel)", errno);
  q->cq_ = CqHandle(ibv_create_cq(ctx, config.depth, nullptr, q->channel_.get(), 0));
  if (!q->cq_) return verbs_errno_error(fmt::format("ibv_create_cq(depth {})", config.depth));
  return q;
}

CompletionQueue::~CompletionQueue() {
  // ibv_destroy_cq blocks forever while events are unacknowledged.
  if (unacked_ > 0 && cq_) ibv_ack_cq_events(cq_.get(), unacked_);
}

Status CompletionQueue::resize(int depth) {
  if (depth <= cq_->cqe) return ok_status();
  if (int rc = ibv_resize_cq(cq_.get(), depth); rc != 0) return verbs_call_error(fmt::format("ibv_resize_cq({})", depth), rc);
  return ok_status();
}

Status CompletionQueue::ack_pending() {
  // Drain every event the channel holds; each one must be acknowledged.
  for (;;) {
    ibv_cq* ev_cq = nullptr;
    void* ev_ctx = nullptr;
    if (ibv_get_cq_event(channel_.get(), &ev_cq, &ev_ctx) != 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK) break;
      return io_error("ibv_get_cq_event", errno);
    }
    armed_ = false;
    if (++unacked_ >= kAckBatch) {
      ibv_ack_cq_events(cq_.get(), unacked_);
      unacked_ = 0;
    }
  }
  return ok_status();
}

Result<int> CompletionQueue::poll(std::span<ibv_wc> out) {
  int n = ibv_poll_cq(cq_.get(), static_cast<int>(out.size()), out.data());
  if (n < 0) return internal_error(fmt::format("ibv_poll_cq failed ({})", n));
  return n;
}

Result<CompletionQueue::Wake> CompletionQueue::wait(std::span<ibv_wc> out, std::span<const int> watch_fds,
                                                    Clock::time_point deadline) {
  std::vector<pollfd> fds;
  auto check_watch = [&](int timeout_ms) -> Result<int> {
    fds.clear();
    for (int fd : watch_fds) fds.push_back(pollfd{fd, POLLIN | POLLRDHUP, 0});
    fds.push_back(pollfd{channel_->fd, POLLIN, 0});
    int rc = ::poll(fds.data(), fds.size(), timeout_ms);
    if (rc < 0 && errno != EINTR) return io_error("poll", errno);
    for (std::size_t i = 0; i + 1 < fds.size(); ++i) {
      if (fds[i].revents != 0) return static_cast<int>(i);
    }
    return -1;
  };
  for (int i = 0; i < config_.spin_polls; ++i) {
    WEFT_ASSIGN_OR_RETURN(int n, poll(out));
    if (n > 0) return Wake{n, -1};
    // Peer liveness is checked every 1024 spins: cheap, and a dead peer is seen
    // within microseconds even on the busy path.
    if ((i & 1023) == 1023 && !watch_fds.empty()) {
      WEFT_ASSIGN_OR_RETURN(int w, check_watch(0));
      if (w >= 0) return Wake{0, w};
    }
  }
  for (;;) {
    if (!armed_) {
      if (int rc = ibv_req_notify_cq(cq_.get(), 0); rc != 0) return verbs_call_error("ibv_req_notify_cq", rc);
      armed_ = true;
    }
    // A completion that arrived between the last poll and the arming raises no
    // event: poll once more after arming.
    WEFT_ASSIGN_OR_RETURN(int n, poll(out));
    if (n > 0) return Wake{n, -1};
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) return Wake{};
    ++sleeps_;
    // Wake at least every 100 ms so the deadline is honoured precisely.
    WEFT_ASSIGN_OR_RETURN(int w, check_watch(static_cast<int>(std::min<long long>(left, 100))));
    if (w >= 0) return Wake{0, w};
    WEFT_RETURN_IF_ERROR(ack_pending());
  }
}

}  // namespace weft::verbs
