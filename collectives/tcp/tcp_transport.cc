// The TCP transport (tcp_transport.h): pairs, waits, abort, stall notices
// and teardown; tcp_connect.cc connects the pairs, tcp_progress.cc moves the
// bytes.
#include "tcp/tcp_transport.h"

#include <sched.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include <fmt/format.h>

#include "idle_wait.h"
#include "tcp/tcp_internal.h"

namespace weft::coll::tcp {

Result<std::unique_ptr<Memory>> TcpTransport::register_memory(void* data, size_t size) {
  return std::unique_ptr<Memory>(std::make_unique<HostMemory>(data, size));
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
  // thread inside does it when the wake-up reaches it, or at the latest when
  // it releases the lock (IoLock, tcp_internal.h).
  std::unique_lock<std::mutex> l(io_mu_, std::try_to_lock);
  if (l.owns_lock()) flush_abort_locked();
}

void TcpTransport::post_stall_notice(int waits_on) {
  auto l = lock();
  send_notice_locked(cfg_.rank, waits_on);
}

void TcpTransport::relay_stall_notice(int origin, int waits_on) {
  if (origin < 0 || origin >= cfg_.size || origin == cfg_.rank) return;
  auto l = lock();
  if (stall_from_[static_cast<size_t>(origin)] == kNoStallNotice) stall_from_[static_cast<size_t>(origin)] = waits_on;
  send_notice_locked(origin, waits_on);
}

// Stall notices ride the reverse direction of the connection the peer
// opened (our in[0]), which carries nothing else: a few 16-byte headers,
// so each goes out whole. Not to the notice's origin, which knows it.
void TcpTransport::send_notice_locked(int origin, int waits_on) {
  const uint16_t arg = waits_on >= 0 && waits_on < 0xffff ? static_cast<uint16_t>(waits_on + 1) : 0;
  const Header h{kMagic, kStall, arg, origin == cfg_.rank ? 0 : static_cast<uint64_t>(origin) + 1};
  for (auto& p : pairs_) {
    if (!p || !p->ready || p->peer() == origin || p->in[0].closed) continue;
    (void)::send(p->in[0].fd.get(), &h, sizeof h, MSG_DONTWAIT | MSG_NOSIGNAL);
  }
}

int TcpTransport::stall_notice(int peer) {
  auto l = lock();
  return stall_from_.empty() ? kNoStallNotice : stall_from_[static_cast<size_t>(peer)];
}

Result<bool> TcpTransport::poll() {
  auto l = lock();
  bool moved = run_once(0);
  WEFT_RETURN_IF_ERROR(check());
  if (probe_ || switch_to_.load(std::memory_order_relaxed) != 0) [[unlikely]] {
    WEFT_RETURN_IF_ERROR(switch_check_locked(moved));
  }
  return moved;
}

// Moves what it can on the connections of `p` that the wait is for, without
// asking epoll first: when the message is there (the common case of a
// small exchange) the wait ends after one recv(2) instead of an
// epoll_wait(2) and a recv(2).
bool TcpTransport::poke(TcpPair& p, bool in) {
  bool moved = false;
  if (in) {
    for (size_t c = 0; c < p.in.size(); ++c) {
      if (p.in[c].q.empty()) continue;
      const Ticket before = p.recvs.done;
      const size_t staged = p.in[c].hi, done = p.in[c].data_done;
      progress_in(p, c);
      moved = moved || p.recvs.done != before || p.in[c].hi != staged || p.in[c].data_done != done;
    }
  } else {
    for (size_t c = 0; c < p.out.size(); ++c) {
      if (p.out[c].q.empty()) continue;
      const size_t q = p.out[c].q.size(), sent = p.out[c].data_done + p.out[c].hdr_done;
      progress_out(p, c);
      moved = moved || p.out[c].q.size() != q || p.out[c].data_done + p.out[c].hdr_done != sent;
    }
  }
  return moved;
}

// Yields the CPU between polls, so that a rank on this CPU (perhaps the one
// waited for) can run. Where the host's ranks fit its CPUs and the peer
// waited for runs on this CPU, the 32nd such yield in a row (the 64th on
// odd ranks, so that two ranks that meet do not both move to the same other
// CPU) moves this rank off the CPU instead (peer_cpu.h says why), as the
// shared-memory transport does.
void TcpTransport::yield_to(TcpPair& p) {
  if (fits_cpus_ && p.cpu.known()) {
    const int mine = ::sched_getcpu();
    p.shares_cpu = mine >= 0 && p.cpu.cpu() == mine;
    if (!p.shares_cpu) {
      shared_yields_ = 0;
    } else if (++shared_yields_ >= internal::yields_before_leaving(cfg_.rank)) {
      shared_yields_ = 0;
      internal::leave_cpu(mine);
      return;
    }
  }
  sched_yield();
}

template <typename Pred>
Status TcpTransport::wait(TcpPair& p, Pred done, bool in, Deadline d, const char* what, Ticket t) {
  internal::IdleWait w(d, std::chrono::microseconds(cfg_.tcp.spin_us), &hard_spin_, 1);  // a poll is a system call
  bool moved = false;
  const bool switches = static_cast<bool>(probe_);
  if (switches) last_moved_ = Clock::now();
  for (;;) {
    if (done()) return ok_status();
    WEFT_RETURN_IF_ERROR(check());
    if (switches || switch_to_.load(std::memory_order_relaxed) != 0) [[unlikely]] {
      // tcp_rebuild.cc: a stalled wait may find a newer plan epoch, or a
      // peer's; the call is then abandoned.
      if (Status s = switch_check_locked(moved); !s) return s;
    }
    if (stall_noticed_.load(std::memory_order_relaxed)) [[unlikely]] {
      return deadline_exceeded(fmt::format("a peer reported a stalled call (waiting for rank {})", p.peer()));
    }
    // A peer on this CPU runs only once this rank stops polling: poll
    // hard only IdleWait::kHardSpin then.
    switch (w.next(moved, p.shares_cpu)) {
      case internal::IdleWait::kPoll:
        // The pair first; epoll for everything else (a send to another
        // peer that the ring's next step needs) unless that already did it.
        moved = poke(p, in);
        if (!done()) moved = run_once(0) || moved;
        break;
      case internal::IdleWait::kYield:
        // Yield between polls so that a co-located rank (perhaps the one
        // we wait for) can run.
        moved = run_once(0);
        if (!moved) yield_to(p);
        break;
      case internal::IdleWait::kSleep:
        moved = run_once(static_cast<int>(
            w.sleep_budget(switches ? std::min(probe_after_, std::chrono::milliseconds(1000)) : std::chrono::milliseconds(1000))
                .count()));
        break;
      case internal::IdleWait::kExpired:
        return deadline_exceeded(fmt::format("timed out waiting for rank {} ({} of message {})", p.peer(), what, t));
    }
  }
}

Result<Ticket> TcpPair::post(const Memory& mem, size_t offset, size_t len, bool held) {
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
    out[static_cast<size_t>(j)].q.push_back({base + lo, hi - lo, op, held});
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
    const InConn& c = in[static_cast<size_t>(j)];
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
  return t_->wait(*this, [&] { return sends.done >= t; }, false, d, "send", t);
}
Status TcpPair::wait_recv(Ticket t, Deadline d) {
  auto l = t_->lock();
  return t_->wait(*this, [&] { return recvs.done >= t; }, true, d, "receive", t);
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

namespace {
uint64_t socket_cookie(int fd) {
  uint64_t cookie = 0;
  socklen_t len = sizeof cookie;
  return ::getsockopt(fd, SOL_SOCKET, SO_COOKIE, &cookie, &len) == 0 ? cookie : 0;
}
}  // namespace

std::vector<ConnectionPorts> TcpTransport::connection_ports(int peer) const {
  std::vector<ConnectionPorts> out;
  const auto& p = pairs_[static_cast<size_t>(peer)];
  if (!p || !p->ready) return out;
  for (const OutConn& c : p->out) {
    out.push_back({true, local_port(c.fd.get()), remote_port(c.fd.get()), congestion_control(c.fd.get()),
                   socket_cookie(c.fd.get())});
  }
  for (const InConn& c : p->in) {
    out.push_back({false, local_port(c.fd.get()), remote_port(c.fd.get()), congestion_control(c.fd.get()),
                   socket_cookie(c.fd.get())});
  }
  return out;
}

int TcpTransport::socket_count() const {
  int n = static_cast<int>(listen_fds_.size());
  for (const auto& p : pairs_) {
    if (!p) continue;
    for (const OutConn& c : p->out) n += c.fd ? 1 : 0;
    for (const InConn& c : p->in) n += c.fd ? 1 : 0;
  }
  return n + static_cast<int>(pending_.size() + retired_.size());
}

TcpTransport::~TcpTransport() {
  // Say goodbye on every idle outgoing connection, so the peers can tell a
  // finished rank from a dead one; after an abort its reason instead (one
  // that came from another thread while a call was inside may be untold).
  auto l = lock();
  if (abort_requested_) flush_abort_locked();
  for (auto& p : pairs_) {
    if (!p) continue;
    for (OutConn& conn : p->out) {
      if (!conn.fd || conn.closed || conn.hdr_done || conn.data_done || peers_notified_) continue;
      Header h{kMagic, kBye, 0, 0};
      (void)::send(conn.fd.get(), &h, sizeof h, MSG_DONTWAIT | MSG_NOSIGNAL);
    }
    // Unread bytes at close() make the kernel send RST instead of FIN
    // (RFC 2525 section 2.17), which could destroy data the peer has not
    // read yet; drain what is readable first (stall notices on the
    // outgoing connections too).
    char buf[4096];
    for (InConn& conn : p->in) {
      while (conn.fd && !conn.closed && ::recv(conn.fd.get(), buf, sizeof buf, MSG_DONTWAIT) > 0) {
      }
    }
    for (OutConn& conn : p->out) {
      while (conn.fd && !conn.closed && ::recv(conn.fd.get(), buf, sizeof buf, MSG_DONTWAIT) > 0) {
      }
    }
  }
}

// TcpOptions::congestion_control, on a connection that carries this rank's
// data (the accepted ones carry only ACKs back). Reno on same-host
// connections under "auto": Reno is built into every kernel and always
// allowed without privileges (tcp_allowed_congestion_control), does no
// pacing and keeps no path model; on loopback nothing is lost to
// congestion, so the window (the receiver's buffer) is the only limit that
// matters. BBR, this host's default, measured a 1-2 us minimum RTT and
// ms-long RTT samples (the receiver off the CPU), paced each flow at the
// 13-19 Gbit/s it had seen and held cwnd at 20-130 packets (ss -ti during
// a 4-rank 16 MiB AllReduce): 32 ms per call, 17 ms with Reno or CUBIC
// (bench/results/2026-11-24-tcp-loopback.md).
Status TcpTransport::choose_congestion_control(int fd) const {
  const std::string& cc = cfg_.tcp.congestion_control;
  if (cc == "auto") {
    if (peer_on_this_host(fd)) (void)set_congestion_control(fd, "reno");  // else the default stays: no harm
    return ok_status();
  }
  return cc.empty() ? ok_status() : set_congestion_control(fd, cc);
}

}  // namespace weft::coll::tcp
