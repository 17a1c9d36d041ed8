#include "weft/verbs/context.h"

#include <sys/socket.h>

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
  c->cache_ = std::make_unique<MrCache>(*c->registrar_, config.cache);
  c->wcs_.resize(64);
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
  std::unique_ptr<Connection> conn(new Connection(this, config));
  Status s = conn->init();
  if (!s.is_ok()) {
    if (conn->qp_.get() == nullptr) conn->ctx_ = this;  // nothing registered under a QPN yet
    return s.with_context(fmt::format("connection to {}", config.peer_name));
  }
  by_qpn_[conn->qpn()] = conn.get();
  return conn;
}

Status Context::register_buffer(const void* data, std::size_t len) {
  WEFT_ASSIGN_OR_RETURN(auto entry, cache_->get(data, len, IBV_ACCESS_LOCAL_WRITE));
  (void)entry;  // the cache keeps it until unregister_buffer
  return Status::ok();
}

void Context::unregister_buffer(const void* data, std::size_t len) { cache_->invalidate(data, len); }

Status Context::dispatch(std::span<ibv_wc> wcs) {
  for (const ibv_wc& wc : wcs) {
    auto it = by_qpn_.find(wc.qp_num);
    // A completion of a connection already closed (flushes while tearing down).
    if (it == by_qpn_.end()) continue;
    it->second->on_completion(wc);
  }
  return Status::ok();
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
  // Data on a liveness socket (not EOF) means the bootstrap uses it; stop
  // watching that one for this wait so poll(2) does not spin on it.
  std::vector<bool> ignore;
  for (;;) {
    if (!conn.error().is_ok()) return conn.error();
    if (done()) return Status::ok();
    watch.clear();
    watched.clear();
    for (auto& [qpn, c] : by_qpn_) {
      if (c->liveness_fd() < 0 || !c->error().is_ok()) continue;
      if (ignore.size() > watched.size() && ignore[watched.size()]) continue;
      watch.push_back(c->liveness_fd());
      watched.push_back(c);
    }
    WEFT_ASSIGN_OR_RETURN(CompletionQueue::Wake w, cq_->wait(wcs_, watch, deadline));
    if (w.completions > 0) {
      WEFT_RETURN_IF_ERROR(dispatch(std::span(wcs_.data(), static_cast<std::size_t>(w.completions))));
      continue;
    }
    if (w.watch_index >= 0) {
      Connection* c = watched[static_cast<std::size_t>(w.watch_index)];
      check_liveness(*c);
      if (c->error().is_ok()) {
        ignore.resize(watched.size());
        ignore[static_cast<std::size_t>(w.watch_index)] = true;
      }
      continue;
    }
    if (Clock::now() >= deadline) {
      auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start).count();
      return deadline_exceeded(fmt::format("timed out after {} ms waiting for {} {} ({} chunks received so far)", ms,
                                           what, conn.peer_name(), conn.stats().chunks_received));
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
