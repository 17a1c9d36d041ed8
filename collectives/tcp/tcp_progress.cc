// Moving bytes on the TCP transport's connections (tcp_internal.h): sends
// with sendmsg(2) (header and payload in one call), receives through the
// staging buffer or straight into the caller's memory, and the epoll loop.
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <fmt/format.h>

#include "tcp/tcp_internal.h"

namespace weft::coll::tcp {
namespace {

uint64_t tag(int peer, bool is_in, size_t c) {
  return (static_cast<uint64_t>(peer) << 16) | (c << 1) | (is_in ? 1u : 0u);
}

Status length_mismatch(int peer, uint64_t got, size_t want) {
  return invalid_argument(fmt::format("message from rank {} has {} bytes where this rank posted a receive of {} bytes",
                                      peer, got, want));
}

// Registers conn's socket with epoll for `events` (or changes them), once
// per change: an epoll_ctl(2) per poll would cost a system call each.
template <class Conn>
void watch(int epfd, Conn& conn, uint64_t key, uint32_t events) {
  if (conn.closed || conn.events == events) return;
  epoll_event ev{};
  ev.events = events;
  ev.data.u64 = key;
  ::epoll_ctl(epfd, conn.events == 0 ? EPOLL_CTL_ADD : EPOLL_CTL_MOD, conn.fd.get(), &ev);
  conn.events = events;
}

}  // namespace

// Outgoing connections are always watched for input too: the peer's stall
// notices come back on them (read_notices).
void TcpTransport::watch_out(TcpPair& p, size_t c, uint32_t events) {
  watch(epoll_fd_.get(), p.out[c], tag(p.peer(), false, c), events | EPOLLIN);
}

void TcpTransport::watch_in(TcpPair& p, size_t c, uint32_t events) {
  watch(epoll_fd_.get(), p.in[c], tag(p.peer(), true, c), events);
}

std::string abort_reason_shown(std::string_view got, uint64_t sent) {
  if (sent <= kMaxAbortReason && got.size() <= kMaxAbortReason) return std::string(got);
  return fmt::format("{} [... cut: the reason has {} bytes]", got.substr(0, kMaxAbortReason), sent);
}

void TcpTransport::fail(Status s) {
  if (has_failed_) return;
  failed_ = std::move(s);
  has_failed_ = true;
}

// A connection to the peer broke. A peer that gave up sent its reason
// (kAbort) before closing, but it may sit behind messages this rank has not
// consumed yet (or be still in the kernel, readable even after a reset:
// tcp_recvmsg returns queued data before the error). Look for it past
// everything unconsumed: the peer's reason names the rank that was lost,
// "connection reset" would not.
std::string TcpTransport::salvage_abort(TcpPair& p) {
  for (InConn& conn : p.in) {
    std::string buf(conn.stage ? conn.stage.get() + conn.lo : nullptr, conn.stage ? conn.hi - conn.lo : 0);
    char tmp[64 << 10];
    for (ssize_t n; buf.size() < (16u << 20) && (n = ::recv(conn.fd.get(), tmp, sizeof tmp, MSG_DONTWAIT)) > 0;) {
      buf.append(tmp, static_cast<size_t>(n));
    }
    conn.lo = conn.hi = 0;
    size_t pos = 0;
    std::string reason;
    if (conn.in_frame) {
      const size_t rest = conn.hdr.len - conn.data_done;
      if (conn.hdr.type == kAbort) {
        return abort_reason_shown(conn.abort_msg + buf.substr(0, std::min(rest, kMaxAbortReason)), conn.hdr.len);
      }
      pos = rest;
    }
    while (pos + sizeof(Header) <= buf.size()) {
      Header h;
      std::memcpy(&h, buf.data() + pos, sizeof h);
      pos += sizeof h;
      if (h.magic != kMagic) break;
      if (h.type == kAbort) return abort_reason_shown(buf.substr(pos, std::min<uint64_t>(h.len, buf.size() - pos)), h.len);
      if (h.type == kData) pos += h.len;
    }
  }
  return "";
}

// Fails the transport for a broken connection with `p`, with the peer's own
// reason when it sent one.
void TcpTransport::lost(TcpPair& p, std::string what) {
  if (has_failed_) return;
  const std::string why = salvage_abort(p);
  if (!why.empty()) return fail(aborted(fmt::format("rank {} gave up: {}", p.peer(), why)));
  if (probe_) {
    // The peer may be rebuilding its connections for an in-call switch
    // whose notice has not reached this rank yet (tcp_rebuild.cc).
    if (switch_to_.load(std::memory_order_relaxed) != 0) return;
    if (lost_pending_.empty()) {
      lost_pending_ = std::move(what);
      lost_at_ = Clock::now();
    }
    return;
  }
  fail(unavailable(std::move(what)));
}

// The peer never writes on an outgoing connection: a hang-up there is the
// peer finishing (its incoming twin tells whether cleanly) unless data of
// ours is still queued or the socket reported an error.
void TcpTransport::out_closed(TcpPair& p, OutConn& conn, int err) {
  if (conn.closed) return;
  conn.closed = true;
  ::epoll_ctl(epoll_fd_.get(), EPOLL_CTL_DEL, conn.fd.get(), nullptr);
  conn.events = 0;
  if (conn.q.empty() && err == 0) return;
  lost(p, err ? fmt::format("connection to rank {} failed: {}", p.peer(), std::strerror(err))
              : fmt::format("rank {} closed its connection with data of this rank undelivered", p.peer()));
}

// End of an incoming stream: clean after the peer's kBye with nothing owed,
// else the peer died (or already told us why it gave up).
void TcpTransport::in_closed(TcpPair& p, InConn& conn, int err) {
  if (conn.closed) return;
  conn.closed = true;
  ::epoll_ctl(epoll_fd_.get(), EPOLL_CTL_DEL, conn.fd.get(), nullptr);
  conn.events = 0;
  if (!conn.abort_msg.empty()) return;  // already failed with the peer's reason
  if (err == 0 && conn.bye && conn.q.empty() && conn.lo == conn.hi && !conn.in_frame) return;
  if (err == 0 && conn.bye && !conn.in_frame) {  // a clean goodbye, with a receive of this rank still posted
    lost(p, fmt::format("rank {} closed its communicator while this rank waits for a message from it (the ranks "
                        "made different calls)",
                        p.peer()));
    return;
  }
  lost(p, err ? fmt::format("connection from rank {} failed: {}", p.peer(), std::strerror(err))
              : fmt::format("rank {} closed its connection mid-collective (process exited or died)", p.peer()));
}

// Reads the peer's stall notices from the reverse direction of an outgoing
// connection (nothing else is ever written there).
void TcpTransport::read_notices(TcpPair& p, OutConn& conn) {
  while (!conn.closed) {
    const ssize_t n = ::recv(conn.fd.get(), reinterpret_cast<char*>(&conn.ctl) + conn.ctl_have,
                             sizeof(Header) - conn.ctl_have, MSG_DONTWAIT);
    // A hang-up (EOF, or an error such as a reset) is judged as before
    // there was anything to read here: by what of ours is still queued.
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) return out_closed(p, conn, 0);
    if (n < 0) return;
    conn.ctl_have += static_cast<size_t>(n);
    if (conn.ctl_have < sizeof(Header)) continue;
    conn.ctl_have = 0;
    const bool stall = conn.ctl.type == kStall && conn.ctl.len <= static_cast<uint64_t>(cfg_.size);
    const bool to_switch = conn.ctl.type == kSwitch && conn.ctl.arg >= 1 && conn.ctl.arg <= cfg_.size;
    if (conn.ctl.magic != kMagic || (!stall && !to_switch)) {
      return fail(data_loss(fmt::format("garbage on the reverse direction of the connection to rank {}", p.peer())));
    }
    if (to_switch) {  // an in-call plan switch (tcp_rebuild.cc), passed on
      request_switch_locked(conn.ctl.len, static_cast<int>(conn.ctl.arg) - 1, p.peer());
      continue;
    }
    // The peer's own notice, or one it relays (len = its origin + 1).
    const int origin = conn.ctl.len == 0 ? p.peer() : static_cast<int>(conn.ctl.len) - 1;
    if (origin == cfg_.rank) continue;
    stall_from_[static_cast<size_t>(origin)] = static_cast<int>(conn.ctl.arg) - 1;
    stall_noticed_.store(true, std::memory_order_relaxed);
  }
}

void TcpTransport::progress_out(TcpPair& p, size_t c) {
  OutConn& conn = p.out[c];
  if (has_failed_) return;  // nothing but the abort notice goes out now
  if (conn.silent) [[unlikely]] return;  // TcpOptions::test_silent_sports
  while (!conn.q.empty() && !conn.closed) {
    Part& part = conn.q.front();
    const bool fresh = conn.hdr_done == 0 && conn.data_done == 0 && conn.fed == 0;
    if (fresh) conn.splicing = start_splice(conn, part);
    if (conn.splicing) {
      const Moved m = splice_out(p, conn);
      if (m == Moved::kFailed) return;
      if (m == Moved::kBlocked) break;
      continue;
    }
    if (fresh) conn.hdr = Header{kMagic, kData, 0, part.len};
    iovec iov[2] = {{reinterpret_cast<char*>(&conn.hdr) + conn.hdr_done, sizeof(Header) - conn.hdr_done},
                    {part.ptr + conn.data_done, part.len - conn.data_done}};
    msghdr m{};
    m.msg_iov = conn.hdr_done < sizeof(Header) ? iov : iov + 1;
    m.msg_iovlen = conn.hdr_done < sizeof(Header) ? 2 : 1;
    ssize_t n = ::sendmsg(conn.fd.get(), &m, MSG_DONTWAIT | MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EAGAIN || errno == EINTR) break;
      out_closed(p, conn, errno);
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
  watch_out(p, c, EPOLLRDHUP | (conn.q.empty() ? 0u : uint32_t{EPOLLOUT}));
}

void TcpTransport::complete_in(TcpPair& p, InConn& conn) {
  const Ticket op = conn.q.front().op;
  conn.q.pop_front();
  conn.in_frame = false;
  conn.data_done = 0;
  p.recvs.part_done(op);
}

// Consumes staged bytes: headers, payloads into posted receives, abort
// reasons. Stops when it needs more bytes or when a data frame has no
// receive posted yet (kBlocked: the frame waits in the stage).
TcpTransport::Staged TcpTransport::consume_staged(TcpPair& p, InConn& conn) {
  for (;;) {
    size_t avail = conn.hi - conn.lo;
    if (!conn.in_frame) {
      if (avail < sizeof(Header)) break;
      std::memcpy(&conn.hdr, conn.stage.get() + conn.lo, sizeof(Header));
      conn.lo += sizeof(Header);
      avail -= sizeof(Header);
      if (conn.hdr.magic != kMagic || (conn.hdr.type != kData && conn.hdr.type != kAbort && conn.hdr.type != kBye)) {
        fail(data_loss(fmt::format("garbage on the connection from rank {}", p.peer())));
        return Staged::kFailed;
      }
      if (conn.hdr.type == kBye) {
        conn.bye = true;
        continue;
      }
      conn.in_frame = true;
      conn.data_done = 0;
    }
    const size_t take = std::min<size_t>(avail, conn.hdr.len - conn.data_done);
    if (conn.hdr.type == kAbort) {
      // Kept up to the bound; at the bound the reason is final, whatever
      // of it is still to come.
      conn.abort_msg.append(conn.stage.get() + conn.lo, std::min(take, kMaxAbortReason + 1 - conn.abort_msg.size()));
      conn.lo += take;
      conn.data_done += take;
      if (conn.data_done < conn.hdr.len && conn.abort_msg.size() <= kMaxAbortReason) break;
      if (conn.abort_msg.empty()) conn.abort_msg = "no reason given";
      fail(aborted(fmt::format("rank {} gave up: {}", p.peer(), abort_reason_shown(conn.abort_msg, conn.hdr.len))));
      return Staged::kFailed;
    }
    if (conn.q.empty()) return Staged::kBlocked;
    Part& part = conn.q.front();
    if (conn.hdr.len != part.len) {
      fail(length_mismatch(p.peer(), conn.hdr.len, part.len));
      return Staged::kFailed;
    }
    if (take) std::memcpy(part.ptr + conn.data_done, conn.stage.get() + conn.lo, take);
    conn.lo += take;
    conn.data_done += take;
    if (conn.data_done < part.len) break;
    complete_in(p, conn);
  }
  if (conn.lo == conn.hi) conn.lo = conn.hi = 0;
  return Staged::kNeedBytes;
}

void TcpTransport::kick_in(TcpPair& p, size_t c) {
  InConn& conn = p.in[c];
  conn.parked = false;
  const Staged st = consume_staged(p, conn);
  if (st == Staged::kFailed) return;
  if (conn.eof) {
    if (st == Staged::kNeedBytes) in_closed(p, conn, 0);  // nothing more will come
    return;
  }
  if (conn.stalled) {
    conn.stalled = false;
    watch_in(p, c, EPOLLIN | EPOLLRDHUP);
    progress_in(p, c);
  }
}

// A frame's header and the start of its payload arrive in one read: the
// header into the stage, the payload straight into the posted receive it
// is for (readv(2) scatter). Reading the header into the stage alone
// would bring up to kStageBytes of payload along with it, to be copied
// out again: up to half of a 512 KiB message went through the stage.
// Returns the bytes read (0 < n), 0 at EOF, -1 with errno.
ssize_t TcpTransport::read_header_and_payload(InConn& conn, size_t* want) {
  Part& part = conn.q.front();
  iovec iov[2] = {{conn.stage.get(), sizeof(Header)},
                  {part.ptr, std::min(part.len, kStageBytes - sizeof(Header))}};
  *want = iov[0].iov_len + iov[1].iov_len;
  msghdr m{};
  m.msg_iov = iov;
  m.msg_iovlen = 2;
  const ssize_t n = ::recvmsg(conn.fd.get(), &m, MSG_DONTWAIT);
  if (n <= static_cast<ssize_t>(sizeof(Header))) {
    if (n > 0) conn.hi = static_cast<size_t>(n);
    return n;
  }
  const size_t payload = static_cast<size_t>(n) - sizeof(Header);
  Header h;
  std::memcpy(&h, conn.stage.get(), sizeof h);
  if (h.magic == kMagic && h.type == kData && h.len == part.len) {
    conn.hdr = h;
    conn.in_frame = true;
    conn.data_done = payload;
    return n;
  }
  // Not the frame the receive is for (an abort, a goodbye, a length the
  // receive did not post): put the bytes where consume_staged judges them.
  // The receive's memory held someone else's bytes for a moment; the call
  // fails anyway.
  std::memcpy(conn.stage.get() + sizeof(Header), part.ptr, payload);
  conn.hi = static_cast<size_t>(n);
  return n;
}

void TcpTransport::progress_in(TcpPair& p, size_t c) {
  InConn& conn = p.in[c];
  if (conn.silent) [[unlikely]] {  // TcpOptions::test_silent_sports: left in the kernel, unwatched
    conn.stalled = true;
    watch_in(p, c, EPOLLRDHUP);
    return;
  }
  while (!conn.closed && !conn.stalled && !conn.eof) {
    const Staged st = consume_staged(p, conn);
    if (st == Staged::kFailed) return;
    if (st == Staged::kBlocked && conn.hdr.type == kData && conn.hi - conn.lo < conn.hdr.len &&
        conn.hdr.len - (conn.hi - conn.lo) >= kDirectMin) {
      // A large message nobody asked for yet: its payload waits in the
      // kernel and is read straight into the receive once posted (kick_in).
      conn.parked = true;
      return;
    }
    char* dst = nullptr;
    size_t want;
    ssize_t n;
    if (st == Staged::kNeedBytes && !conn.in_frame && conn.hi == 0 && !conn.q.empty() &&
        conn.q.front().len >= kDirectMin) {
      n = read_header_and_payload(conn, &want);
    } else {
      if (st == Staged::kNeedBytes && conn.in_frame && conn.hdr.type == kData && conn.lo == conn.hi &&
          conn.hdr.len - conn.data_done >= kDirectMin) {
        dst = conn.q.front().ptr + conn.data_done;  // straight into the caller's memory
        want = conn.hdr.len - conn.data_done;
      } else {
        if (conn.hi == kStageBytes && conn.lo > 0) {
          std::memmove(conn.stage.get(), conn.stage.get() + conn.lo, conn.hi - conn.lo);
          conn.hi -= conn.lo;
          conn.lo = 0;
        }
        if (conn.hi == kStageBytes) {
          // Full of a message nobody asked for yet: leave the rest in the
          // kernel and stop watching for input (level-triggered, it would
          // fire forever) until a receive is posted.
          conn.stalled = true;
          watch_in(p, c, EPOLLRDHUP);
          return;
        }
        dst = conn.stage.get() + conn.hi;
        want = kStageBytes - conn.hi;
        // With no receive posted, read no further than kDirectMin: enough
        // for many small messages, and a large one is seen by its header
        // before much of its payload lands in the stage (parked above).
        if (conn.q.empty()) want = std::min(want, kDirectMin);
      }
      n = ::recv(conn.fd.get(), dst, want, MSG_DONTWAIT);
    }
    if (n == 0) {
      if (consume_staged(p, conn) == Staged::kBlocked) {
        // What is staged (perhaps the peer's kBye behind it) is read once
        // its receive is posted (kick_in); stop watching the dead socket.
        conn.eof = true;
        ::epoll_ctl(epoll_fd_.get(), EPOLL_CTL_DEL, conn.fd.get(), nullptr);
        conn.events = 0;
        return;
      }
      return in_closed(p, conn, 0);
    }
    if (n < 0) {
      if (errno == EAGAIN || errno == EINTR) return;
      return in_closed(p, conn, errno);
    }
    const size_t u = static_cast<size_t>(n);
    if (dst == nullptr) {
      // read_header_and_payload placed the bytes.
      if (conn.in_frame && conn.data_done == conn.hdr.len) complete_in(p, conn);
    } else if (dst == conn.stage.get() + conn.hi) {
      conn.hi += u;
    } else {
      conn.data_done += u;
      if (conn.data_done == conn.hdr.len) complete_in(p, conn);
    }
    if (u < want) {
      // The kernel had no more: consume what came and stop (no EAGAIN call).
      consume_staged(p, conn);
      return;
    }
  }
}

// Tells every peer this rank gave up, with a kAbort frame carrying the
// reason. A connection with half a frame on the wire first gets the rest of
// that frame (the caller's memory is still valid: we are inside its call),
// within a short grace period; a peer that does not take it in time gets the
// connection shut down instead, which it reads as this rank dying.
void TcpTransport::notify_peers_locked() {
  if (peers_notified_) return;
  peers_notified_ = true;
  const std::string msg = failed_.message().substr(0, 400);
  const Deadline grace = Clock::now() + std::chrono::milliseconds(200);
  for (auto& p : pairs_) {
    if (!p) continue;
    for (OutConn& conn : p->out) {
      if (!conn.fd || conn.closed) continue;
      if (conn.hdr_done || conn.data_done || conn.fed) {
        const Part& part = conn.q.front();
        // A spliced frame goes on copied from where the socket took it to;
        // what is still in its pipe is dropped with the pipe.
        conn.pipe_r = Fd();
        conn.pipe_w = Fd();
        Status s = write_all(conn.fd.get(), reinterpret_cast<const char*>(&conn.hdr) + conn.hdr_done,
                             sizeof(Header) - conn.hdr_done, grace);
        if (s) s = write_all(conn.fd.get(), part.ptr + conn.data_done, part.len - conn.data_done, grace);
        if (!s) {
          ::shutdown(conn.fd.get(), SHUT_RDWR);
          continue;
        }
        conn.hdr_done = conn.data_done = conn.fed = 0;
        conn.splicing = false;
        conn.q.pop_front();
      }
      const Header h{kMagic, kAbort, 0, msg.size()};
      if (!write_all(conn.fd.get(), &h, sizeof h, grace) || !write_all(conn.fd.get(), msg.data(), msg.size(), grace)) {
        ::shutdown(conn.fd.get(), SHUT_RDWR);
      }
    }
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
      InConn& conn = p.in[c];
      if (conn.stalled && (evs[i].events & (EPOLLERR | EPOLLHUP | EPOLLRDHUP))) {
        // The peer hung up behind a message nobody asked for yet: stop
        // watching (level-triggered, it would fire forever); the next recv
        // reads the message and then the EOF.
        ::epoll_ctl(epoll_fd_.get(), EPOLL_CTL_DEL, conn.fd.get(), nullptr);
        conn.events = 0;
      } else {
        progress_in(p, c);
        if (conn.parked && !conn.stalled) {
          // Readable behind a parked message: stop watching for input
          // (level-triggered, it would fire forever) until a receive is
          // posted. Only here: a rank that posts the receive before it
          // polls again never pays the two epoll_ctl(2) calls.
          conn.stalled = true;
          watch_in(p, c, EPOLLRDHUP);
        }
      }
    } else {
      if (evs[i].events & EPOLLIN) read_notices(p, p.out[c]);
      if (evs[i].events & (EPOLLERR | EPOLLHUP | EPOLLRDHUP)) {
        out_closed(p, p.out[c], 0);
      } else if (evs[i].events & EPOLLOUT) {
        progress_out(p, c);
      }
    }
  }
  if (abort_requested_) flush_abort_locked();
  if (has_failed_) notify_peers_locked();
  return n > 0;
}

void TcpTransport::flush_abort_locked() {
  if (!has_failed_) {
    std::lock_guard<std::mutex> l(abort_mu_);
    fail(aborted(abort_reason_.message()));
  }
  notify_peers_locked();
}

IoLock::IoLock(TcpTransport& t) : t_(t) { t_.io_mu_.lock(); }

IoLock::~IoLock() {
  t_.io_mu_.unlock();
  if (!t_.abort_requested_) return;
  std::unique_lock<std::mutex> again(t_.io_mu_, std::try_to_lock);
  if (again.owns_lock()) t_.flush_abort_locked();
}

}  // namespace weft::coll::tcp
