// Held sends from the caller's pages (Pair::send_held, TcpOptions::
// splice_min_bytes): the frame's header is written into a pipe of the
// connection, the payload's pages are put there by vmsplice(2), and
// splice(2) moves them on to the socket. The kernel then sends from the
// caller's pages (skb fragments that reference them, tcp_sendmsg with
// MSG_SPLICE_PAGES since Linux 6.5, sendpage before) instead of copying the
// bytes into its own buffers: over loopback each byte is then copied once,
// by the receiver, instead of twice (bench/results/2026-11-24-tcp-loopback.md
// has the figures).
//
// vmsplice(2) without SPLICE_F_GIFT takes references to the pages, not their
// contents: a write to them before the receiver read the bytes would be
// seen by the receiver. That is why only held sends go this way: their
// caller leaves the source alone until the peer answered (transport.h). A
// retransmission after such a write would carry the new bytes, but a
// segment is retransmitted only while the peer has not acknowledged it, and
// an answer from the peer means it had every byte. MSG_ZEROCOPY would
// report when the kernel let go of the pages, but over loopback it copies
// them on delivery instead (Documentation/networking/msg_zerocopy.rst,
// "Loopback"), which is where this path pays.
#include <fcntl.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <utility>

#include "tcp/tcp_internal.h"

namespace weft::coll::tcp {
namespace {

// The pipe holds what has been put in and not yet taken by the socket: at
// the default 64 KiB (16 pages) a 512 KiB message makes 8 rounds of both
// calls, and the exchange ran at 4.1-4.5 GB/s per direction against
// 5.9 with 256 KiB and 6.1-6.3 with 1 MiB (two processes, 512 KiB each
// way, 2026-11-24). 1 MiB is also fs.pipe-max-size's default: what an
// unprivileged process may ask for (pipe(7)).
constexpr int kPipeBytes = 1 << 20;
// A smaller pipe loses to copying: a user's pipes past pipe-user-pages-soft
// (64 MiB by default, pipe(7); 16 ranks on a host with a pipe to each peer
// reach it) may not grow, and a new one may get as little as two pages.
constexpr int kMinPipeBytes = 256 << 10;

// False where no pipe of kMinPipeBytes can be had (out of descriptors, or
// over the quota): the connection then copies.
bool make_pipe(OutConn& conn) {
  int fds[2];
  if (::pipe2(fds, O_NONBLOCK | O_CLOEXEC) != 0) return false;
  Fd r(fds[0]), w(fds[1]);
  if (::fcntl(fds[1], F_SETPIPE_SZ, kPipeBytes) < kMinPipeBytes &&
      ::fcntl(fds[1], F_SETPIPE_SZ, kMinPipeBytes) < kMinPipeBytes) {
    return false;
  }
  conn.pipe_r = std::move(r);
  conn.pipe_w = std::move(w);
  return true;
}

// The call itself is not allowed or not supported here (a seccomp filter
// answers EPERM or ENOSYS; a socket type without splice, EINVAL), as
// opposed to the connection failing.
bool refused(int err) { return err == EPERM || err == ENOSYS || err == EINVAL || err == EOPNOTSUPP; }

}  // namespace

// Copies from now on, on every connection: the part goes on by sendmsg
// from where the socket took it to (hdr_done / data_done); what is still
// in the pipe is dropped with it, as a rank that gives up does.
TcpTransport::Moved TcpTransport::give_up_splicing(OutConn& conn) {
  splice_broken_ = true;
  conn.pipe_r = Fd();
  conn.pipe_w = Fd();
  conn.fed = 0;
  conn.splicing = false;
  return Moved::kDone;
}

bool TcpTransport::start_splice(OutConn& conn, const Part& part) {
  const size_t min = cfg_.tcp.splice_min_bytes;
  if (!part.held || min == 0 || part.len < min || splice_broken_) return false;
  if (conn.no_pipe) return false;
  if (!conn.pipe_w && !make_pipe(conn)) {
    conn.no_pipe = true;  // not asked again for every part
    return false;
  }
  conn.hdr = Header{kMagic, kData, 0, part.len};
  // The header is written (copied) into the pipe: conn.hdr is rewritten
  // for the next part while the pipe may still reference this one's page.
  if (::write(conn.pipe_w.get(), &conn.hdr, sizeof(Header)) != static_cast<ssize_t>(sizeof(Header))) {
    return false;  // cannot happen on an empty pipe; copy this part then
  }
  conn.fed = sizeof(Header);
  return true;
}

TcpTransport::Moved TcpTransport::splice_out(TcpPair& p, OutConn& conn) {
  Part& part = conn.q.front();
  const size_t total = sizeof(Header) + part.len;
  for (;;) {
    if (conn.fed < total) {
      iovec v{part.ptr + (conn.fed - sizeof(Header)), total - conn.fed};
      const ssize_t n = ::vmsplice(conn.pipe_w.get(), &v, 1, SPLICE_F_NONBLOCK);
      if (n > 0) {
        conn.fed += static_cast<size_t>(n);
      } else if (refused(errno)) {
        return give_up_splicing(conn);
      }
    }
    const size_t sent = conn.hdr_done + conn.data_done;
    const unsigned more = conn.fed < total ? SPLICE_F_MORE : 0u;
    const ssize_t n = ::splice(conn.pipe_r.get(), nullptr, conn.fd.get(), nullptr, conn.fed - sent,
                               SPLICE_F_NONBLOCK | SPLICE_F_MOVE | more);
    if (n < 0) {
      if (errno == EAGAIN || errno == EINTR) return Moved::kBlocked;
      if (refused(errno)) return give_up_splicing(conn);
      out_closed(p, conn, errno);
      return Moved::kFailed;
    }
    size_t u = static_cast<size_t>(n);
    const size_t h = std::min(u, sizeof(Header) - conn.hdr_done);
    conn.hdr_done += h;
    conn.data_done += u - h;
    spliced_bytes_.fetch_add(u - h, std::memory_order_relaxed);
    if (conn.hdr_done + conn.data_done == total) {
      const Ticket op = part.op;
      conn.q.pop_front();
      conn.hdr_done = conn.data_done = conn.fed = 0;
      conn.splicing = false;
      p.sends.part_done(op);
      return Moved::kDone;
    }
  }
}

}  // namespace weft::coll::tcp
