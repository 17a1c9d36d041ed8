#include "weft/verbs/context.h"

#include <fcntl.h>
#include <sys/socket.h>

#include <algorithm>
#include <cstring>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "weft/verbs/error.h"

namespace weft::verbs {

Result<std::unique_ptr<Context>> Context::open(const ContextConfig& config) {
  if (config.timeout.count() <= 0) return invalid_argument("verbs timeout must be > 0 ms");
  std::unique_ptr<Context> c(new Context());
  c->config_ = config;
  WEFT_ASSIGN_OR_RETURN(Device dev, Device::open(config.device));
  c->device_ = std::make_unique<Device>(std::move(dev));
  WEFT_ASSIGN_OR_RETURN(c->cq_, CompletionQueue::create(c->device_->context(), config.cq));
  c->registrar_ = std::make_unique<PdRegistrar>(c->device_->pd());
  c->wcs_.resize(64);
  // The async event fd is polled with the others, never read blindly.
  const int afd = c->device_->context()->async_fd;
  const int fl = fcntl(afd, F_GETFL);
  if (fl < 0 || fcntl(afd, F_SETFL, fl | O_NONBLOCK) < 0) return io_error("fcntl(async event fd)", errno);
  return c;
}

Context::~Context() {
  // Connections must be closed before their context; a leftover one would
  // point at a destroyed CQ. Report it rather than crash later.
  if (!by_qpn_.empty()) {
    spdlog::error("weft verbs: context closed with {} connection(s) still open", by_qpn_.size());
    for (auto& [qpn, conn] : by_qpn_) conn->ctx_ = nullptr;
  }
}

Result<std::unique_ptr<Connection>> Context::create_connection(const ConnectionConfig& config) {
  WEFT_RETURN_IF_ERROR(validate(config).with_context(fmt::format("connection to {}", config.peer_name)));
  // Every send and receive WR of every QP may complete before anyone polls.
  const int wrs = cq_wrs_ + 2 * static_cast<int>(config.queue_depth);
  WEFT_RETURN_IF_ERROR(cq_->resize(wrs));
  std::unique_ptr<Connection> conn(new Connection(this, config));
  // On failure the half-built connection cleans up after itself.
  if (Status s = conn->init(); !s.is_ok()) return s.with_context(fmt::format("connection to {}", config.peer_name));
  by_qpn_[conn->qpn()] = conn.get();
  cq_wrs_ = wrs;
  return conn;
}

void Context::forget(Connection& conn, std::uint32_t qpn) {
  auto it = by_qpn_.find(qpn);
  if (it == by_qpn_.end() || it->second != &conn) return;
  by_qpn_.erase(it);
  cq_wrs_ -= 2 * static_cast<int>(conn.config_.queue_depth);
  // Completions of the destroyed QP still in the CQ must not reach a later QP
  // that reuses its number: drain now (other connections' completions are simply
  // progress for them).
  if (Result<int> n = poll(); !n) spdlog::error("weft verbs: draining the CQ: {}", n.status().message());
}

Result<RegionRef> Context::register_buffer(const void* data, std::size_t len, int access) {
  WEFT_ASSIGN_OR_RETURN(RegionRef r, register_region(*registrar_, data, len, access));
  ++registrations_;
  return r;
}

void Context::dispatch(std::span<ibv_wc> wcs) {
  for (const ibv_wc& wc : wcs) {
    auto it = by_qpn_.find(wc.qp_num);
    // A completion of a connection already closed (flushes while tearing down).
    if (it == by_qpn_.end()) continue;
    it->second->on_completion(wc);
  }
}

Result<int> Context::poll() {
  int total = 0;
  for (;;) {
    WEFT_ASSIGN_OR_RETURN(int n, cq_->poll(wcs_));
    if (n == 0) return total;
    dispatch(std::span(wcs_.data(), static_cast<std::size_t>(n)));
    total += n;
  }
}

Result<CompletionQueue::Wake> Context::progress(std::span<const int> watch, Clock::time_point deadline) {
  watch_.assign(watch.begin(), watch.end());
  watch_.push_back(device_->context()->async_fd);
  WEFT_ASSIGN_OR_RETURN(CompletionQueue::Wake w, cq_->wait(wcs_, watch_, deadline));
  if (w.completions > 0) dispatch(std::span(wcs_.data(), static_cast<std::size_t>(w.completions)));
  if (w.watch_index == static_cast<int>(watch.size())) {
    read_async_events();
    return CompletionQueue::Wake{};
  }
  return w;
}

void Context::read_async_events() {
  ibv_async_event ev{};
  while (ibv_get_async_event(device_->context(), &ev) == 0) {
    const std::string what = describe_async_event(ev.event_type);
    switch (ev.event_type) {
      case IBV_EVENT_QP_FATAL:
      case IBV_EVENT_QP_REQ_ERR:
      case IBV_EVENT_QP_ACCESS_ERR:
      case IBV_EVENT_PATH_MIG_ERR: {
        auto it = by_qpn_.find(ev.element.qp->qp_num);
        if (it != by_qpn_.end()) {
          it->second->fail(unavailable(fmt::format("connection to {} failed: asynchronous event {} on qp {:#x}",
                                                   it->second->peer_name(), what, ev.element.qp->qp_num)));
        }
        break;
      }
      case IBV_EVENT_CQ_ERR:
      case IBV_EVENT_DEVICE_FATAL:
        for (auto& [qpn, c] : by_qpn_) {
          c->fail(unavailable(fmt::format("connection to {} failed: asynchronous event {} on {}", c->peer_name(),
                                          what, device_->name())));
        }
        break;
      default:
        spdlog::info("weft verbs: {}: {}", device_->name(), what);
        break;
    }
    ibv_ack_async_event(&ev);
  }
}

void Context::check_liveness(Connection& conn) {
  char b;
  ssize_t n = ::recv(conn.liveness_fd(), &b, 1, MSG_PEEK | MSG_DONTWAIT);
  if (n == 0) {
    conn.fail(unavailable(fmt::format("{} closed its connection (process exited or was killed)", conn.peer_name())));
  } else if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
    conn.fail(unavailable(fmt::format("{}'s connection failed: {}", conn.peer_name(), std::strerror(errno))));
  }
}

Status Context::progress_until(Connection& conn, const std::function<bool()>& done, const char* what) {
  const auto start = Clock::now();
  const auto deadline = start + config_.timeout;
  std::vector<int> watch;
  std::vector<Connection*> watched;
  // Data on a liveness socket (not EOF) means its owner uses it for something
  // else; stop watching that one for this wait so poll(2) does not spin on it.
  std::vector<Connection*> ignored;
  for (;;) {
    if (!conn.error().is_ok()) return conn.error();
    if (done()) return ok_status();
    watch.clear();
    watched.clear();
    for (auto& [qpn, c] : by_qpn_) {
      if (c->liveness_fd() < 0 || !c->error().is_ok()) continue;
      if (std::find(ignored.begin(), ignored.end(), c) != ignored.end()) continue;
      watch.push_back(c->liveness_fd());
      watched.push_back(c);
    }
    WEFT_ASSIGN_OR_RETURN(CompletionQueue::Wake w, progress(watch, deadline));
    if (w.completions > 0) continue;
    if (w.watch_index >= 0) {
      Connection* c = watched[static_cast<std::size_t>(w.watch_index)];
      check_liveness(*c);
      if (c->error().is_ok()) ignored.push_back(c);
      continue;
    }
    if (Clock::now() >= deadline) {
      auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start).count();
      return deadline_exceeded(fmt::format("timed out after {} ms waiting for {} {} ({} of {} messages received)", ms,
                                           what, conn.peer_name(), conn.recvs_done(), conn.recvs_posted()));
    }
  }
}

Status Context::wait_sends(Connection& conn) {
  return progress_until(conn, [&] { return !conn.sends_pending(); }, "sends to");
}
Status Context::wait_recvs(Connection& conn) {
  return progress_until(conn, [&] { return !conn.recvs_pending(); }, "a message from");
}
Status Context::wait_all(Connection& conn) {
  return progress_until(conn, [&] { return !conn.sends_pending() && !conn.recvs_pending(); }, "traffic with");
}

}  // namespace weft::verbs
