// The verbs transport (verbs_transport.h): coll::Transport over Connections.
#include "weft/verbs/verbs_transport.h"

#include <endian.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <mutex>

#include <fmt/format.h>

#include "bootstrap.h"
#include "weft/verbs/context.h"
#include "weft/verbs/rc_qp.h"
#include "weft/verbs/source_port.h"

namespace weft::verbs {
namespace {

using coll::Clock;
using coll::Deadline;

class VerbsMemory final : public coll::Memory {
 public:
  VerbsMemory(void* data, std::size_t size, RegionRef region, std::shared_ptr<Context> ctx)
      : Memory(data, size), ctx_(std::move(ctx)), region_(std::move(region)) {}
  const RegionRef& region() const { return region_; }

 private:
  // Destroyed in reverse: the region (deregistered now, or with the last
  // in-flight message that holds it) before the context whose registrar
  // it needs.
  std::shared_ptr<Context> ctx_;
  RegionRef region_;
};

class VerbsTransport;

// What the peer said on its bootstrap socket.
enum class PeerState { kUp, kBye, kClosed };

class VerbsPair final : public coll::Pair {
 public:
  VerbsPair(VerbsTransport* t, int peer, std::unique_ptr<Connection> conn, coll::tcp::Fd fd)
      : t_(t), peer_(peer), conn_(std::move(conn)), fd_(std::move(fd)) {}
  int peer() const override { return peer_; }
  Result<coll::Ticket> send(const coll::Memory& mem, std::size_t offset, std::size_t len) override;
  Result<coll::Ticket> recv(coll::Memory& mem, std::size_t offset, std::size_t len) override;
  Status wait_send(coll::Ticket t, Deadline d) override;
  Status wait_recv(coll::Ticket t, Deadline d) override;
  Result<bool> test_send(coll::Ticket t) override;
  Result<bool> test_recv(coll::Ticket t) override;

  bool done(bool is_send, coll::Ticket t) const {
    if (!is_send) return conn_->recvs_done() >= t;
    // A peer that said bye has every message it received from us: the
    // source memory may be reused even if our completion has not been seen.
    return conn_->sends_done() >= t || (state == PeerState::kBye && bye_received >= t);
  }

  VerbsTransport* t_;
  int peer_;
  std::unique_ptr<Connection> conn_;
  coll::tcp::Fd fd_;
  internal::FrameReader reader;
  PeerState state = PeerState::kUp;
  bool said_bye = false;
  std::uint64_t bye_received = 0;  // from the bye: messages the peer received from us
};

class VerbsTransport final : public coll::Transport, public VerbsTransportInfo {
 public:
  VerbsTransport(const coll::TransportConfig& c, std::shared_ptr<Context> ctx) : cfg_(c), ctx_(std::move(ctx)) {}
  ~VerbsTransport() override;
  Status setup(coll::Store& store, Deadline deadline);

  std::string_view name() const override { return "verbs"; }
  int rank() const override { return cfg_.rank; }
  int size() const override { return cfg_.size; }
  coll::Pair* pair(int peer) override {
    return peer >= 0 && peer < cfg_.size ? pairs_[static_cast<std::size_t>(peer)].get() : nullptr;
  }
  Result<std::unique_ptr<coll::Memory>> register_memory(void* data, std::size_t size) override;
  bool registration_pins() const override { return true; }
  Result<bool> poll() override;
  void abort(const Status& reason) override;

  std::string device_name() const override { return ctx_->device().name(); }
  std::vector<QpRoute> qp_routes() const override;
  Status inject_qp_error(int peer) override;
  std::uint64_t memory_registrations() const override { return ctx_->registrations(); }

  // Used by the pairs.
  Status usable() const;
  Status wait(VerbsPair& p, bool is_send, coll::Ticket t, Deadline d);
  Result<bool> test(VerbsPair& p, bool is_send, coll::Ticket t);

 private:
  Status check(VerbsPair& p, bool is_send, coll::Ticket t);
  void fail(Status s);
  void rebuild_watch();
  void on_watch(int index);
  void read_frames(VerbsPair& p);
  void send_frame_to_all(const std::string& frame, bool bye);

  coll::TransportConfig cfg_;
  std::shared_ptr<Context> ctx_;
  std::vector<std::unique_ptr<VerbsPair>> pairs_;  // by rank
  std::vector<VerbsPair*> connected_;              // the pairs, in peer order
  coll::tcp::Fd wake_fd_;
  std::vector<int> watch_;  // wake_fd_, then the sockets of peers still open
  std::vector<VerbsPair*> watched_;
  Status failed_;  // transport-wide: a peer aborted or died
  std::mutex abort_mu_, write_mu_;
  Status abort_reason_;
  std::atomic<bool> abort_requested_{false};
};

Result<coll::Ticket> VerbsPair::send(const coll::Memory& mem, std::size_t offset, std::size_t len) {
  WEFT_RETURN_IF_ERROR(t_->usable());
  const auto* m = dynamic_cast<const VerbsMemory*>(&mem);
  if (m == nullptr) return invalid_argument(fmt::format("send to rank {}: memory not registered with verbs", peer_));
  if (offset > mem.size() || len > mem.size() - offset) {
    return out_of_range(fmt::format("send to rank {}: [{}, {}) lies outside the {}-byte buffer", peer_, offset,
                                    offset + len, mem.size()));
  }
  return conn_->isend(static_cast<const char*>(mem.data()) + offset, len, m->region());
}

Result<coll::Ticket> VerbsPair::recv(coll::Memory& mem, std::size_t offset, std::size_t len) {
  WEFT_RETURN_IF_ERROR(t_->usable());
  const auto* m = dynamic_cast<const VerbsMemory*>(&mem);
  if (m == nullptr) return invalid_argument(fmt::format("recv from rank {}: memory not registered with verbs", peer_));
  if (offset > mem.size() || len > mem.size() - offset) {
    return out_of_range(fmt::format("recv from rank {}: [{}, {}) lies outside the {}-byte buffer", peer_, offset,
                                    offset + len, mem.size()));
  }
  return conn_->irecv(static_cast<char*>(mem.data()) + offset, len, m->region());
}

Status VerbsPair::wait_send(coll::Ticket t, Deadline d) { return t_->wait(*this, true, t, d); }
Status VerbsPair::wait_recv(coll::Ticket t, Deadline d) { return t_->wait(*this, false, t, d); }
Result<bool> VerbsPair::test_send(coll::Ticket t) { return t_->test(*this, true, t); }
Result<bool> VerbsPair::test_recv(coll::Ticket t) { return t_->test(*this, false, t); }

Status VerbsTransport::usable() const {
  if (abort_requested_) return aborted(abort_reason_.message());
  return failed_;
}

void VerbsTransport::fail(Status s) {
  if (failed_.is_ok()) failed_ = std::move(s);
}

Status VerbsTransport::check(VerbsPair& p, bool is_send, coll::Ticket t) {
  WEFT_RETURN_IF_ERROR(usable());
  if (!p.conn_->error().is_ok() && p.conn_->error_is_flush()) {
    // A flush says the QP is in the error state, not why: the completion or
    // asynchronous event that says why may trail it by a moment.
    const auto until = Clock::now() + std::chrono::milliseconds(100);
    while (p.conn_->error_is_flush() && Clock::now() < until) {
      if (!ctx_->poll().is_ok()) break;
      ctx_->read_async_events();
    }
    if (p.conn_->error_is_flush()) {
      // A QP can reach the error state with nothing but flushes here: moved by
      // ibv_modify_qp, or failed as a responder by a request that carries no
      // receive WR (a bad opcode sequence, rkey or length: a class C responder
      // error, IBTA 9.9.3; rxe's do_class_ac_error), whose NAK goes to the peer.
      return Status(p.conn_->error().code(),
                    fmt::format("{} (nothing on this side said why: see rank {}'s error, and the device's drop "
                                "and retry counters)",
                                p.conn_->error().message(), p.peer()));
    }
  }
  WEFT_RETURN_IF_ERROR(p.conn_->error());
  if (p.state != PeerState::kUp) {
    // The peer left cleanly; what it sent us may still be in the CQ.
    WEFT_RETURN_IF_ERROR(ctx_->poll().status());
    if (p.done(is_send, t)) return ok_status();
    WEFT_RETURN_IF_ERROR(p.conn_->error());
    return unavailable(fmt::format("rank {} closed its communicator while this rank waited for {} {} ({} done)",
                                   p.peer(), is_send ? "send" : "receive", t,
                                   is_send ? p.conn_->sends_done() : p.conn_->recvs_done()));
  }
  return ok_status();
}

Status VerbsTransport::wait(VerbsPair& p, bool is_send, coll::Ticket t, Deadline d) {
  const auto start = Clock::now();
  for (;;) {
    if (abort_requested_) return usable();
    if (p.done(is_send, t)) return ok_status();
    WEFT_RETURN_IF_ERROR(check(p, is_send, t));
    if (p.done(is_send, t)) return ok_status();
    WEFT_ASSIGN_OR_RETURN(CompletionQueue::Wake w, ctx_->progress(watch_, d));
    if (w.watch_index >= 0) {
      on_watch(w.watch_index);
    } else if (w.completions == 0 && Clock::now() >= d) {
      const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start).count();
      return deadline_exceeded(fmt::format(
          "timed out after {} ms waiting for rank {} ({} {}; sends {}/{} and receives {}/{} done, {} credits from it "
          "unused)",
          ms, p.peer(), is_send ? "send" : "receive", t, p.conn_->sends_done(), p.conn_->sends_posted(),
          p.conn_->recvs_done(), p.conn_->recvs_posted(), p.conn_->stats().credits_received - p.conn_->stats().writes));
    }
  }
}

Result<bool> VerbsTransport::test(VerbsPair& p, bool is_send, coll::Ticket t) {
  if (abort_requested_) return usable();
  if (p.done(is_send, t)) return true;
  WEFT_RETURN_IF_ERROR(poll().status());
  if (p.done(is_send, t)) return true;
  WEFT_RETURN_IF_ERROR(check(p, is_send, t));
  return p.done(is_send, t);
}

Result<bool> VerbsTransport::poll() {
  WEFT_RETURN_IF_ERROR(usable());
  WEFT_ASSIGN_OR_RETURN(int n, ctx_->poll());
  // The sockets too, so that a dead peer is seen by callers that only poll.
  std::vector<pollfd> pfds;
  for (int fd : watch_) pfds.push_back(pollfd{fd, POLLIN | POLLRDHUP, 0});
  bool moved = n > 0;
  if (::poll(pfds.data(), pfds.size(), 0) > 0) {
    for (std::size_t i = 0; i < pfds.size(); ++i) {
      if (pfds[i].revents == 0) continue;
      on_watch(static_cast<int>(i));
      moved = true;
      break;  // on_watch may have rebuilt the watch list
    }
  }
  return moved;
}

void VerbsTransport::rebuild_watch() {
  watch_.assign(1, wake_fd_.get());
  watched_.assign(1, nullptr);
  for (VerbsPair* p : connected_) {
    if (p->state == PeerState::kClosed) continue;
    watch_.push_back(p->fd_.get());
    watched_.push_back(p);
  }
}

void VerbsTransport::on_watch(int index) {
  if (index == 0) {
    std::uint64_t v;
    if (::read(wake_fd_.get(), &v, sizeof v) < 0) {}  // abort() woke us; usable() reports it
    return;
  }
  read_frames(*watched_[static_cast<std::size_t>(index)]);
}

void VerbsTransport::read_frames(VerbsPair& p) {
  bool eof = false;
  auto frames = p.reader.read(p.fd_.get(), &eof);
  if (!frames) {
    fail(frames.status().with_context(fmt::format("bootstrap connection to rank {}", p.peer())));
    eof = true;
  } else {
    for (const internal::Frame& f : *frames) {
      if (f.type == internal::FrameType::kAbort) {
        fail(aborted(fmt::format("rank {} gave up: {}", p.peer(), f.payload.empty() ? "no reason given" : f.payload)));
      } else if (f.payload.size() == 8) {
        std::uint64_t v;
        std::memcpy(&v, f.payload.data(), 8);
        p.bye_received = be64toh(v);
        p.state = PeerState::kBye;
      }
    }
  }
  if (!eof) return;
  if (p.state == PeerState::kUp) {
    fail(unavailable(fmt::format("rank {} closed its connection without saying goodbye (process exited or was killed)",
                                 p.peer())));
  }
  if (p.state != PeerState::kBye) p.state = PeerState::kClosed;
  // Stop watching a closed socket, but keep it open: abort() may still write
  // to it from another thread, and a closed fd number could be reused.
  watch_.erase(std::find(watch_.begin(), watch_.end(), p.fd_.get()));
  watched_.erase(std::find(watched_.begin(), watched_.end(), &p));
}

void VerbsTransport::send_frame_to_all(const std::string& frame, bool bye) {
  std::lock_guard<std::mutex> l(write_mu_);
  const Deadline d = Clock::now() + std::chrono::milliseconds(200);  // best effort
  for (VerbsPair* p : connected_) {
    if (bye) {
      if (p->said_bye) continue;
      p->said_bye = true;
      const std::uint64_t v = htobe64(p->conn_->recvs_done());
      std::string f = internal::encode_frame(internal::FrameType::kBye, std::string_view(reinterpret_cast<const char*>(&v), 8));
      (void)coll::tcp::write_all(p->fd_.get(), f.data(), f.size(), d);
    } else {
      (void)coll::tcp::write_all(p->fd_.get(), frame.data(), frame.size(), d);
    }
  }
}

void VerbsTransport::abort(const Status& reason) {
  {
    std::lock_guard<std::mutex> l(abort_mu_);
    if (abort_requested_) return;
    abort_reason_ = reason.is_ok() ? aborted("aborted") : reason;
    abort_requested_ = true;
  }
  send_frame_to_all(internal::encode_frame(internal::FrameType::kAbort, abort_reason_.message()), false);
  const std::uint64_t one = 1;
  if (::write(wake_fd_.get(), &one, sizeof one) < 0) {}  // the waiter wakes within its spin budget anyway
}

VerbsTransport::~VerbsTransport() {
  if (!abort_requested_) send_frame_to_all({}, true);
  // Connections (QPs) before the context; sockets close with their pairs.
  connected_.clear();
  pairs_.clear();
}

Result<std::unique_ptr<coll::Memory>> VerbsTransport::register_memory(void* data, std::size_t size) {
  RegionRef entry;
  if (size > 0) {
    auto e = ctx_->register_buffer(data, size);
    if (!e) return e.status().with_context(fmt::format("rank {}: registering {} bytes", cfg_.rank, size));
    entry = std::move(*e);
  }
  return std::unique_ptr<coll::Memory>(std::make_unique<VerbsMemory>(data, size, std::move(entry), ctx_));
}

std::vector<QpRoute> VerbsTransport::qp_routes() const {
  std::vector<QpRoute> out;
  for (const VerbsPair* p : connected_) {
    QpRoute r;
    r.peer = p->peer();
    r.qpn = p->conn_->qpn();
    r.remote_qpn = p->conn_->remote_qpn();
    r.planned_sport = static_cast<std::uint16_t>(p->conn_->planned_sport());
    r.flow_label = p->conn_->flow_label();
    r.local_ip = ctx_->device().gid().ipv4();
    r.remote_ip = p->conn_->remote_ipv4();
    r.bytes_sent = p->conn_->stats().bytes_written;
    out.push_back(r);
  }
  return out;
}

Status VerbsTransport::inject_qp_error(int peer) {
  auto* p = static_cast<VerbsPair*>(pair(peer));
  if (p == nullptr) return not_found(fmt::format("no QP to rank {}", peer));
  return p->conn_->force_qp_error();
}

Status VerbsTransport::setup(coll::Store& store, Deadline deadline) {
  const coll::VerbsOptions& o = cfg_.verbs;
  std::vector<int> peers = cfg_.peers;
  if (peers.empty()) {
    for (int r = 0; r < cfg_.size; ++r) {
      if (r != cfg_.rank) peers.push_back(r);
    }
  }
  // QPs first (INIT, receives posted), so that a peer may move its QP to
  // RTS as soon as it has read our record.
  std::vector<std::unique_ptr<Connection>> conns;
  for (int p : peers) {
    ConnectionConfig cc;
    cc.queue_depth = o.queue_depth;
    cc.qp.ack_timeout = o.ack_timeout;
    cc.peer_name = fmt::format("rank {}", p);
    if (!cfg_.routes.empty()) {
      cc.qp.planned_sport = cfg_.routes[static_cast<std::size_t>(p)].sport;
      if (cc.qp.planned_sport != 0) {
        WEFT_RETURN_IF_ERROR(flow_label_for_sport(cc.qp.planned_sport).status().with_context(
            fmt::format("planned route to rank {}", p)));
      }
    }
    WEFT_ASSIGN_OR_RETURN(auto c, ctx_->create_connection(cc));
    const EndpointWire w = encode(c->local_info());
    WEFT_RETURN_IF_ERROR(store.set_by(internal::endpoint_key(cfg_, cfg_.rank, p),
                                      std::string(reinterpret_cast<const char*>(w.bytes), sizeof w.bytes), deadline));
    conns.push_back(std::move(c));
  }
  std::string address = o.bootstrap_address;
  if (address.empty()) address = ctx_->device().gid().ipv4();
  WEFT_ASSIGN_OR_RETURN(auto fds, internal::connect_mesh(cfg_, peers, address, store, deadline));
  // The peers' records (QPN, PSN, GID, MTU, receive depth) through the store:
  // RTR with the remote's numbers and our planned flow label, then RTS.
  for (std::size_t i = 0; i < peers.size(); ++i) {
    WEFT_ASSIGN_OR_RETURN(std::string rec, store.get(internal::endpoint_key(cfg_, peers[i], cfg_.rank), deadline));
    EndpointWire w{};
    if (rec.size() != sizeof w.bytes) {
      return data_loss(fmt::format("endpoint record of rank {} has {} bytes, expected {}", peers[i], rec.size(),
                                   sizeof w.bytes));
    }
    std::memcpy(w.bytes, rec.data(), sizeof w.bytes);
    auto remote = decode(w);
    if (!remote) return remote.status().with_context(fmt::format("endpoint record of rank {}", peers[i]));
    WEFT_RETURN_IF_ERROR(conns[i]->connect(*remote));
  }
  std::vector<int> raw;
  for (auto& f : fds) raw.push_back(f.get());
  // Nobody writes before every peer's QP is ready to receive.
  WEFT_RETURN_IF_ERROR(internal::exchange_ready(raw, peers, deadline));
  int efd = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (efd < 0) return io_error("eventfd", errno);
  wake_fd_ = coll::tcp::Fd(efd);
  pairs_.resize(static_cast<std::size_t>(cfg_.size));
  for (std::size_t i = 0; i < peers.size(); ++i) {
    WEFT_RETURN_IF_ERROR(coll::tcp::set_nonblocking(fds[i].get()));
    auto pr = std::make_unique<VerbsPair>(this, peers[i], std::move(conns[i]), std::move(fds[i]));
    connected_.push_back(pr.get());
    pairs_[static_cast<std::size_t>(peers[i])] = std::move(pr);
  }
  rebuild_watch();
  return ok_status();
}

}  // namespace

Result<std::unique_ptr<coll::Transport>> make_verbs_transport(const coll::TransportConfig& config, coll::Store& store,
                                                              Deadline deadline) {
  const coll::VerbsOptions& o = config.verbs;
  ContextConfig cc;
  cc.device.name = o.device_for(config.local_index >= 0 ? config.local_index : config.rank);
  cc.device.port = o.port;
  if (o.gid_index >= 0) cc.device.gid_index = static_cast<std::uint32_t>(o.gid_index);
  cc.cq.spin_polls = o.spin_polls;
  auto ctx = Context::open(cc);
  if (!ctx) {
    return ctx.status().with_context(cc.device.name.empty() ? "verbs device" : fmt::format("device {}", cc.device.name));
  }
  auto t = std::make_unique<VerbsTransport>(config, std::shared_ptr<Context>(std::move(*ctx)));
  WEFT_RETURN_IF_ERROR(t->setup(store, deadline).with_context(fmt::format("on {}", t->device_name())));
  return std::unique_ptr<coll::Transport>(std::move(t));
}

}  // namespace weft::verbs
