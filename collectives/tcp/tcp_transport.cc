#include "tcp/tcp_transport.h"

#include <sched.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <deque>
#include <mutex>

#include <fmt/format.h>

#include "completion.h"
#include "tcp/socket.h"

namespace weft::coll::tcp {
namespace {

struct Header {
  uint32_t magic;
  uint16_t type;
  uint16_t reserved;
  uint64_t len;
};
static_assert(sizeof(Header) == 16, "wire header is 16 bytes without padding");
constexpr uint32_t kMagic = 0x31544657;  // "WFT1"
enum : uint16_t { kData = 1, kAbort = 2, kBye = 3 };

struct Hello {
  uint32_t magic;
  int32_t rank;
  int32_t conn;
  int32_t reserved;
};
static_assert(sizeof(Hello) == 16, "handshake is 16 bytes without padding");

constexpr size_t kStripeMin = 256 << 10;
constexpr uint64_t kWakeTag = ~uint64_t{0};

struct Part {
  char* ptr;
  size_t len;
  Ticket op;
};

struct Conn {
  Fd fd;
  std::deque<Part> q;
  Header hdr{};
  size_t hdr_done = 0, data_done = 0;
  uint32_t events = 0;  // current epoll interest
  bool stalled = false;  // in: a data header arrived before its recv was posted
  bool bye = false, closed = false;
  std::string abort_msg;
};

using internal::Completion;

class TcpTransport;

Status length_mismatch(int peer, uint64_t got, size_t want) {
  return invalid_argument(fmt::format("message from rank {} has {} bytes where this rank posted a receive of {} bytes",
                                      peer, got, want));
}

class TcpPair final : public Pair {
 public:
  TcpPair(TcpTransport* t, int peer) : t_(t), peer_(peer) {}
  int peer() const override { return peer_; }
  Result<Ticket> send(const Memory& mem, size_t offset, size_t len) override;
  Result<Ticket> recv(Memory& mem, size_t offset, size_t len) override;
  Status wait_send(Ticket t, Deadline d) override;
  Status wait_recv(Ticket t, Deadline d) override;
  Result<bool> test_send(Ticket t) override;
  Result<bool> test_recv(Ticket t) override;

  std::vector<Conn> out, in;
  Completion sends, recvs;

 private:
  TcpTransport* t_;
  int peer_;
};

class TcpTransport final : public Transport, public TcpTransportInfo {
 public:
  explicit TcpTransport(const TransportConfig& c) : cfg_(c) {}
  ~TcpTransport() override;
  Status connect(Store& store, Deadline deadline);

  std::string_view name() const override { return "tcp"; }
  int rank() const override { return cfg_.rank; }
  int size() const override { return cfg_.size; }
  Pair* pair(int peer) override {
    return peer >= 0 && peer < cfg_.size ? pairs_[static_cast<size_t>(peer)].get() : nullptr;
  }
  Result<std::unique_ptr<Memory>> register_memory(void* data, size_t size) override {
    struct Plain final : Memory {
      Plain(void* d, size_t n) : Memory(d, n) {}
    };
    return std::unique_ptr<Memory>(std::make_unique<Plain>(data, size));
  }
  Result<bool> poll() override;
  void abort(const Status& reason) override;
  std::vector<ConnectionPorts> connection_ports(int peer) const override;
  uint16_t listen_port() const override { return listen_port_; }

  // Called by pairs, with io_mu_ held.
  std::unique_lock<std::mutex> lock() { return std::unique_lock<std::mutex>(io_mu_); }
  Status check() const;
  void kick_out(TcpPair& p, size_t c) { progress_out(p, c); }
  void kick_in(TcpPair& p, size_t c);
  template <typename Pred>
  Status wait(TcpPair& p, Pred done, Deadline d, const char* what, Ticket t);
  int parts(size_t len) const { return len >= kStripeMin ? cfg_.tcp.connections_per_peer : 1; }

 private:
  void watch(TcpPair& p, bool is_in, size_t c, uint32_t events);
  void progress_out(TcpPair& p, size_t c);
  void progress_in(TcpPair& p, size_t c);
  void complete_in(TcpPair& p, Conn& conn);
  void on_closed(TcpPair& p, Conn& conn, int err);
  void fail(Status s);
  bool run_once(int timeout_ms);
  void notify_peers_locked();

  TransportConfig cfg_;
  std::vector<std::unique_ptr<TcpPair>> pairs_;
  Fd listen_fd_, epoll_fd_, wake_fd_;
  uint16_t listen_port_ = 0;
  std::mutex io_mu_;
  Status failed_;
  std::atomic<bool> has_failed_{false};
  std::mutex abort_mu_;
  Status abort_reason_;
  std::atomic<bool> abort_requested_{false};
  bool peers_notified_ = false;
};

uint64_t tag(int peer, bool is_in, size_t c) {
  return (static_cast<uint64_t>(peer) << 16) | (c << 1) | (is_in ? 1u : 0u);
}

void TcpTransport::watch(TcpPair& p, bool is_in, size_t c, uint32_t events) {
  Conn& conn = (is_in ? p.in : p.out)[c];
  if (conn.closed || conn.events == events) return;
  epoll_event ev{};
  ev.events = events;
  ev.data.u64 = tag(p.peer(), is_in, c);
  ::epoll_ctl(epoll_fd_.get(), conn.events == 0 ? EPOLL_CTL_ADD : EPOLL_CTL_MOD, conn.fd.get(), &ev);
  conn.events = events;
}

Status TcpTransport::check() const {
  if (has_failed_) return failed_;
  return Status::ok();
}

void TcpTransport::fail(Status s) {
  if (has_failed_) return;
  failed_ = std::move(s);
  has_failed_ = true;
}

void TcpTransport::on_closed(TcpPair& p, Conn& conn, int err) {
  if (conn.closed) return;
  conn.closed = true;
  ::epoll_ctl(epoll_fd_.get(), EPOLL_CTL_DEL, conn.fd.get(), nullptr);
  conn.events = 0;
  if (!conn.abort_msg.empty()) return;  // already failed with the peer's reason
  if (conn.bye && conn.q.empty()) return;  // clean shutdown
  // An outgoing connection also hangs up when the peer finished cleanly; its
  // incoming twin tells (EOF after kBye or not). Only undelivered data here
  // is an error now.
  const bool outgoing = &conn >= p.out.data() && &conn < p.out.data() + p.out.size();
  if (outgoing && conn.q.empty() && err == 0) return;
  fail(unavailable(err ? fmt::format("connection to rank {} failed: {}", p.peer(), std::strerror(err))
                       : fmt::format("rank {} closed its connection mid-collective (process exited or died)",
                                     p.peer())));
}

void TcpTransport::progress_out(TcpPair& p, size_t c) {
  Conn& conn = p.out[c];
  while (!conn.q.empty() && !conn.closed) {
    Part& part = conn.q.front();
    if (conn.hdr_done == 0 && conn.data_done == 0) conn.hdr = Header{kMagic, kData, 0, part.len};
    iovec iov[2] = {{reinterpret_cast<char*>(&conn.hdr) + conn.hdr_done, sizeof(Header) - conn.hdr_done},
                    {part.ptr + conn.data_done, part.len - conn.data_done}};
    msghdr m{};
    m.msg_iov = conn.hdr_done < sizeof(Header) ? iov : iov + 1;
    m.msg_iovlen = conn.hdr_done < sizeof(Header) ? 2 : 1;
    ssize_t n = ::sendmsg(conn.fd.get(), &m, MSG_DONTWAIT | MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EAGAIN || errno == EINTR) break;
      on_closed(p, conn, errno);
      return;
    }
    size_t u = static_cast<size_t>(n);
    const size_t h = std::min(u, sizeof(Header) - conn.hdr_done);
    conn.hdr_done += h;
    conn.data_done += u - h;
    if (conn.hdr_done == sizeof(Header) && conn.data_done == part.len) {
      const Ticket op = part.op;
      conn.q.pop_front();
      conn.hdr_done = conn.data_done = 0;
      p.sends.part_done(op);
    }
  }
  watch(p, false, c, EPOLLRDHUP | (conn.q.empty() ? 0u : uint32_t{EPOLLOUT}));
}

void TcpTransport::kick_in(TcpPair& p, size_t c) {
  Conn& conn = p.in[c];
  if (conn.stalled) {
    conn.stalled = false;
    watch(p, true, c, EPOLLIN | EPOLLRDHUP);
  }
  progress_in(p, c);
}

void TcpTransport::progress_in(TcpPair& p, size_t c) {
  Conn& conn = p.in[c];
  while (!conn.closed && !conn.stalled) {
    ssize_t n;
    const bool in_header = conn.hdr_done < sizeof(Header);
    Part* part = conn.q.empty() ? nullptr : &conn.q.front();
    if (in_header) {
      // Header and the expected payload in one readv: small messages cost
      // one system call. A header of another kind is sorted out below.
      iovec iov[2] = {{reinterpret_cast<char*>(&conn.hdr) + conn.hdr_done, sizeof(Header) - conn.hdr_done},
                      {part ? part->ptr : nullptr, part ? part->len : 0}};
      n = ::readv(conn.fd.get(), iov, part && part->len ? 2 : 1);
    } else if (conn.hdr.type == kData) {
      // A header that arrived before its recv was posted (stalled) is
      // checked here, once the recv exists.
      if (!part) {
        conn.stalled = true;
        watch(p, true, c, EPOLLRDHUP);
        return;
      }
      if (conn.hdr.len != part->len) return fail(length_mismatch(p.peer(), conn.hdr.len, part->len));
      if (conn.data_done == part->len) {
        complete_in(p, conn);
        continue;
      }
      n = ::recv(conn.fd.get(), part->ptr + conn.data_done, part->len - conn.data_done, MSG_DONTWAIT);
    } else {
      char buf[512];
      n = ::recv(conn.fd.get(), buf, std::min<size_t>(sizeof buf, conn.hdr.len - conn.data_done), MSG_DONTWAIT);
      if (n > 0) conn.abort_msg.append(buf, static_cast<size_t>(n));
    }
    if (n == 0) return on_closed(p, conn, 0);
    if (n < 0) {
      if (errno == EAGAIN || errno == EINTR) return;
      return on_closed(p, conn, errno);
    }
    size_t u = static_cast<size_t>(n);
    if (in_header) {
      const size_t h = std::min(u, sizeof(Header) - conn.hdr_done);
      conn.hdr_done += h;
      u -= h;
      if (conn.hdr_done < sizeof(Header)) continue;
      if (conn.hdr.magic != kMagic) {
        return fail(data_loss(fmt::format("garbage on the connection from rank {}", p.peer())));
      }
      if (conn.hdr.type == kAbort) {
        conn.abort_msg.assign(part ? part->ptr : "", u);  // bytes that spilled into the recv buffer
        conn.data_done = u;
      } else if (conn.hdr.type == kBye) {
        conn.bye = true;
        conn.hdr_done = 0;
        continue;
      } else if (!part) {
        conn.stalled = true;  // no recv posted yet: leave the payload in the kernel
        watch(p, true, c, EPOLLRDHUP);
        return;
      } else if (conn.hdr.len != part->len) {
        return fail(length_mismatch(p.peer(), conn.hdr.len, part->len));
      } else {
        conn.data_done = u;
      }
    } else {
      conn.data_done += u;
    }
    if (conn.hdr.type == kAbort) {
      if (conn.data_done < conn.hdr.len) continue;
      std::string msg = conn.abort_msg.empty() ? "no reason given" : conn.abort_msg;
      conn.abort_msg = msg;
      return fail(aborted(fmt::format("rank {} gave up: {}", p.peer(), msg)));
    }
    if (conn.data_done == part->len) complete_in(p, conn);
  }
}

void TcpTransport::complete_in(TcpPair& p, Conn& conn) {
  const Ticket op = conn.q.front().op;
  conn.q.pop_front();
  conn.hdr_done = conn.data_done = 0;
  p.recvs.part_done(op);
}

// Tells every peer this rank gave up. A connection with half a frame on the
// wire cannot carry a clean notice: it is shut down instead, which the peer
// reads as this rank dying.
void TcpTransport::notify_peers_locked() {
  if (peers_notified_) return;
  peers_notified_ = true;
  const std::string msg = failed_.message().substr(0, 400);
  for (auto& p : pairs_) {
    if (!p) continue;
    for (Conn& conn : p->out) {
      if (conn.closed) continue;
      if (conn.hdr_done || conn.data_done) {
        ::shutdown(conn.fd.get(), SHUT_RDWR);
        continue;
      }
      Header h{kMagic, kAbort, 0, msg.size()};
      iovec iov[2] = {{&h, sizeof h}, {const_cast<char*>(msg.data()), msg.size()}};
      msghdr m{};
      m.msg_iov = iov;
      m.msg_iovlen = 2;
      if (::sendmsg(conn.fd.get(), &m, MSG_DONTWAIT | MSG_NOSIGNAL) != static_cast<ssize_t>(sizeof h + msg.size())) {
        ::shutdown(conn.fd.get(), SHUT_RDWR);
      }
    }
  }
}

void TcpTransport::abort(const Status& reason) {
  {
    std::lock_guard<std::mutex> l(abort_mu_);
    if (abort_requested_) return;
    abort_reason_ = reason;
    abort_requested_ = true;
  }
  uint64_t one = 1;
  (void)!::write(wake_fd_.get(), &one, sizeof one);
  // If no thread is inside the transport, tell the peers now; otherwise the
  // thread inside does it when the wake-up reaches it.
  std::unique_lock<std::mutex> l(io_mu_, std::try_to_lock);
  if (l.owns_lock()) {
    fail(aborted(reason.message()));
    notify_peers_locked();
  }
}

bool TcpTransport::run_once(int timeout_ms) {
  epoll_event evs[64];
  int n = ::epoll_wait(epoll_fd_.get(), evs, 64, timeout_ms);
  for (int i = 0; i < n; ++i) {
    const uint64_t t = evs[i].data.u64;
    if (t == kWakeTag) continue;
    TcpPair& p = *pairs_[static_cast<size_t>(t >> 16)];
    const size_t c = (t & 0xffff) >> 1;
    if (t & 1) {
      Conn& conn = p.in[c];
      if (conn.stalled && (evs[i].events & (EPOLLERR | EPOLLHUP | EPOLLRDHUP))) {
        // The peer hung up behind a message nobody asked for yet: stop
        // watching (level-triggered, it would fire forever); the next recv
        // reads the message and then the EOF.
        ::epoll_ctl(epoll_fd_.get(), EPOLL_CTL_DEL, conn.fd.get(), nullptr);
        conn.events = 0;
      } else {
        progress_in(p, c);
      }
    } else if (evs[i].events & (EPOLLERR | EPOLLHUP | EPOLLRDHUP)) {
      // The peer never writes on our outgoing connection: any of these
      // means it is gone.
      on_closed(p, p.out[c], 0);
    } else {
      progress_out(p, c);
    }
  }
  if (abort_requested_ && !has_failed_) {
    std::lock_guard<std::mutex> l(abort_mu_);
    fail(aborted(abort_reason_.message()));
  }
  if (has_failed_) notify_peers_locked();
  return n > 0;
}

Result<bool> TcpTransport::poll() {
  auto l = lock();
  bool moved = run_once(0);
  WEFT_RETURN_IF_ERROR(check());
  return moved;
}

template <typename Pred>
Status TcpTransport::wait(TcpPair& p, Pred done, Deadline d, const char* what, Ticket t) {
  // Spin on epoll_wait(0) for a few microseconds before sleeping: a reply
  // on loopback often arrives within that, and a sleep costs a wake-up.
  const auto start = Clock::now();
  const auto spin_until = start + std::chrono::microseconds(cfg_.tcp.spin_us);
  const auto hard_until = start + std::chrono::microseconds(100);
  for (;;) {
    if (done()) return Status::ok();
    WEFT_RETURN_IF_ERROR(check());
    const auto now = Clock::now();
    if (now > d) {
      return deadline_exceeded(fmt::format("timed out waiting for rank {} ({} of message {})", p.peer(), what, t));
    }
    int ms = 0;
    if (now >= spin_until) {
      ms = static_cast<int>(std::chrono::duration_cast<std::chrono::milliseconds>(d - now).count()) + 1;
      ms = std::min(ms, 1000);
    }
    // Poll hard for a few microseconds, then yield between polls so that a
    // co-located rank (perhaps the one we wait for) can run, then sleep.
    if (!run_once(ms) && ms == 0 && now > hard_until) sched_yield();
  }
}

Result<Ticket> TcpPair::send(const Memory& mem, size_t offset, size_t len) {
  if (offset + len > mem.size()) return out_of_range(fmt::format("send to rank {}: range outside the buffer", peer_));
  auto l = t_->lock();
  WEFT_RETURN_IF_ERROR(t_->check());
  const int k = t_->parts(len);
  for (int j = 0; j < k; ++j) {
    if (out[static_cast<size_t>(j)].closed) return unavailable(fmt::format("rank {} has closed its connections", peer_));
  }
  const Ticket op = sends.post(k);
  char* base = static_cast<char*>(mem.data()) + offset;
  for (int j = 0; j < k; ++j) {
    const size_t lo = len * static_cast<size_t>(j) / static_cast<size_t>(k);
    const size_t hi = len * static_cast<size_t>(j + 1) / static_cast<size_t>(k);
    out[static_cast<size_t>(j)].q.push_back({base + lo, hi - lo, op});
    t_->kick_out(*this, static_cast<size_t>(j));
  }
  return op;
}

Result<Ticket> TcpPair::recv(Memory& mem, size_t offset, size_t len) {
  if (offset + len > mem.size()) return out_of_range(fmt::format("recv from rank {}: range outside the buffer", peer_));
  auto l = t_->lock();
  WEFT_RETURN_IF_ERROR(t_->check());
  const int k = t_->parts(len);
  for (int j = 0; j < k; ++j) {
    const Conn& c = in[static_cast<size_t>(j)];
    if (c.closed && c.bye) return unavailable(fmt::format("rank {} has closed its communicator", peer_));
  }
  const Ticket op = recvs.post(k);
  char* base = static_cast<char*>(mem.data()) + offset;
  for (int j = 0; j < k; ++j) {
    const size_t lo = len * static_cast<size_t>(j) / static_cast<size_t>(k);
    const size_t hi = len * static_cast<size_t>(j + 1) / static_cast<size_t>(k);
    in[static_cast<size_t>(j)].q.push_back({base + lo, hi - lo, op});
    t_->kick_in(*this, static_cast<size_t>(j));
  }
  return op;
}

Status TcpPair::wait_send(Ticket t, Deadline d) {
  auto l = t_->lock();
  return t_->wait(*this, [&] { return sends.done >= t; }, d, "send", t);
}
Status TcpPair::wait_recv(Ticket t, Deadline d) {
  auto l = t_->lock();
  return t_->wait(*this, [&] { return recvs.done >= t; }, d, "receive", t);
}
Result<bool> TcpPair::test_send(Ticket t) {
  auto l = t_->lock();
  if (sends.done >= t) return true;
  WEFT_RETURN_IF_ERROR(t_->check());
  return false;
}
Result<bool> TcpPair::test_recv(Ticket t) {
  auto l = t_->lock();
  if (recvs.done >= t) return true;
  WEFT_RETURN_IF_ERROR(t_->check());
  return false;
}

std::vector<ConnectionPorts> TcpTransport::connection_ports(int peer) const {
  std::vector<ConnectionPorts> out;
  const auto& p = pairs_[static_cast<size_t>(peer)];
  if (!p) return out;
  for (const Conn& c : p->out) out.push_back({true, local_port(c.fd.get()), remote_port(c.fd.get())});
  for (const Conn& c : p->in) out.push_back({false, local_port(c.fd.get()), remote_port(c.fd.get())});
  return out;
}

TcpTransport::~TcpTransport() {
  // Say goodbye on every idle outgoing connection, so the peers can tell a
  // finished rank from a dead one.
  auto l = lock();
  for (auto& p : pairs_) {
    if (!p) continue;
    for (Conn& conn : p->out) {
      if (conn.closed || conn.hdr_done || conn.data_done) continue;
      Header h{kMagic, kBye, 0, 0};
      (void)::send(conn.fd.get(), &h, sizeof h, MSG_DONTWAIT | MSG_NOSIGNAL);
    }
    // Unread bytes at close() make the kernel send RST instead of FIN
    // (RFC 2525 section 2.17), which could destroy data the peer has not
    // read yet; drain what is readable first.
    for (Conn& conn : p->in) {
      char buf[4096];
      while (!conn.closed && ::recv(conn.fd.get(), buf, sizeof buf, MSG_DONTWAIT) > 0) {
      }
    }
  }
}

Status TcpTransport::connect(Store& store, Deadline deadline) {
  const int me = cfg_.rank, k = cfg_.tcp.connections_per_peer;
  std::vector<int> peers = cfg_.peers;
  if (peers.empty()) {
    for (int r = 0; r < cfg_.size; ++r) {
      if (r != me) peers.push_back(r);
    }
  }
  Endpoint bound;
  WEFT_ASSIGN_OR_RETURN(listen_fd_, listen_on(cfg_.tcp.listen_address, cfg_.tcp.listen_port, &bound));
  listen_port_ = bound.port;
  epoll_fd_ = Fd(::epoll_create1(EPOLL_CLOEXEC));
  wake_fd_ = Fd(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
  if (!epoll_fd_ || !wake_fd_) return io_error("epoll_create1/eventfd", errno);
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u64 = kWakeTag;
  ::epoll_ctl(epoll_fd_.get(), EPOLL_CTL_ADD, wake_fd_.get(), &ev);
  const std::string key = cfg_.store_prefix + "/tcp/";
  WEFT_RETURN_IF_ERROR(store.set(key + std::to_string(me), bound.to_string()));

  pairs_.resize(static_cast<size_t>(cfg_.size));
  for (int p : peers) {
    auto pair = std::make_unique<TcpPair>(this, p);
    pair->out.resize(static_cast<size_t>(k));
    pair->in.resize(static_cast<size_t>(k));
    pairs_[static_cast<size_t>(p)] = std::move(pair);
  }
  // Connect first (the peers' kernels complete the handshakes into their
  // listen backlog), then accept: no ordering between ranks is needed.
  for (int p : peers) {
    WEFT_ASSIGN_OR_RETURN(std::string addr, store.get(key + std::to_string(p), deadline));
    WEFT_ASSIGN_OR_RETURN(Endpoint ep, Endpoint::parse(addr));
    const uint16_t sport = cfg_.routes.empty() ? 0 : cfg_.routes[static_cast<size_t>(p)].sport;
    for (int c = 0; c < k; ++c) {
      auto fd = connect_to(ep, cfg_.tcp.listen_address, sport, cfg_.tcp.socket_buffer_bytes, deadline);
      if (!fd) return fd.status().with_context(fmt::format("connecting to rank {}", p));
      Hello h{kMagic, me, c, 0};
      WEFT_RETURN_IF_ERROR(write_all(fd->get(), &h, sizeof h, deadline));
      pairs_[static_cast<size_t>(p)]->out[static_cast<size_t>(c)].fd = std::move(*fd);
    }
  }
  for (size_t i = 0; i < peers.size() * static_cast<size_t>(k); ++i) {
    auto fd = accept_one(listen_fd_.get(), deadline);
    if (!fd) return fd.status().with_context(fmt::format("accepting connections ({} of {} arrived)", i, peers.size() * static_cast<size_t>(k)));
    set_buffers_and_nodelay(fd->get(), cfg_.tcp.socket_buffer_bytes);
    Hello h{};
    WEFT_RETURN_IF_ERROR(read_all(fd->get(), &h, sizeof h, deadline).with_context("reading a peer's hello"));
    if (h.magic != kMagic || h.rank < 0 || h.rank >= cfg_.size || !pairs_[static_cast<size_t>(h.rank)] ||
        h.conn < 0 || h.conn >= k || pairs_[static_cast<size_t>(h.rank)]->in[static_cast<size_t>(h.conn)].fd) {
      return data_loss(fmt::format("unexpected hello (rank {}, connection {}) on port {}", h.rank, h.conn, listen_port_));
    }
    pairs_[static_cast<size_t>(h.rank)]->in[static_cast<size_t>(h.conn)].fd = std::move(*fd);
  }
  for (int p : peers) {
    TcpPair& pair = *pairs_[static_cast<size_t>(p)];
    for (size_t c = 0; c < static_cast<size_t>(k); ++c) {
      WEFT_RETURN_IF_ERROR(set_nonblocking(pair.out[c].fd.get()));
      WEFT_RETURN_IF_ERROR(set_nonblocking(pair.in[c].fd.get()));
      watch(pair, false, c, EPOLLRDHUP);
      watch(pair, true, c, EPOLLIN | EPOLLRDHUP);
    }
  }
  return Status::ok();
}

}  // namespace

Result<std::unique_ptr<Transport>> make_tcp_transport(const TransportConfig& config, Store& store,
                                                      Deadline deadline) {
  auto t = std::make_unique<TcpTransport>(config);
  WEFT_RETURN_IF_ERROR(t->connect(store, deadline));
  return std::unique_ptr<Transport>(std::move(t));
}

}  // namespace weft::coll::tcp
