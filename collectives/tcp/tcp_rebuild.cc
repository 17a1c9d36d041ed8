// In-call plan switches on the TCP transport (Transport::set_switch_probe,
// rebuild; the communicator's side is collectives/in_call_switch.cc).
//
// A cut link drops the packets of every connection whose path crosses it:
// the connection stays open, TCP retransmits into the void, and the call
// waits until its deadline. So a wait that has moved nothing for a while
// asks the communicator whether a newer plan epoch is published; if one
// is, the call is lost anyway, and every rank must abandon it:
//   - the epoch goes to every peer as a kSwitch notice on the reverse
//     direction of the peer's connection (which carries only notices, so a
//     notice never waits behind data), and each rank that hears one passes
//     it on once to its own peers, as stall notices are relayed: a notice
//     reaches every rank through the connections that still work;
//   - every wait that sees a requested switch returns kAborted at once;
//   - a connection that a peer closes meanwhile (it rebuilds already) fails
//     the transport only if no switch is heard of within the grace.
// rebuild() then closes every connection (a dead one is closed, not
// drained) and connects the same peers again on the new epoch's ports.
// Each Hello carries the generation (the count of in-call switches); one of
// an earlier generation is refused, one of a later generation (a peer that
// rebuilt first) is kept until this rank rebuilds: no byte sent before the
// switch can reach a connection made after it.
#include <sys/epoll.h>
#include <sys/socket.h>

#include <algorithm>

#include <fmt/format.h>

#include "tcp/tcp_internal.h"

namespace weft::coll::tcp {
namespace {
// An abortive close (SO_LINGER 0, socket(7)): a reset, nothing drained, and
// no TIME_WAIT (RFC 793 section 3.5) on either end, so that a later epoch
// may bind the same source port towards the same peer at once (back to the
// first plan once the link is mended).
void reset(Fd& fd) {
  if (!fd) return;
  const linger l{1, 0};
  (void)::setsockopt(fd.get(), SOL_SOCKET, SO_LINGER, &l, sizeof l);
  fd = Fd();
}
}  // namespace

void TcpTransport::set_switch_probe(std::chrono::milliseconds after, std::chrono::milliseconds grace,
                                    std::function<uint64_t()> probe) {
  auto l = lock();
  probe_after_ = after;
  lost_grace_ = grace;
  probe_ = std::move(probe);
  last_moved_ = Clock::now();
}

Status TcpTransport::abandoned() const {
  return aborted(fmt::format("abandoned for plan epoch {} (in-call switch started by rank {})",
                             switch_to_.load(std::memory_order_relaxed), switch_origin_.load(std::memory_order_relaxed)));
}

Status TcpTransport::switch_check_locked(bool moved) {
  if (switch_to_.load(std::memory_order_relaxed) != 0) return abandoned();
  if (!probe_) return ok_status();
  const auto now = Clock::now();
  if (moved) last_moved_ = now;
  if (!lost_pending_.empty() && now - lost_at_ >= lost_grace_) {
    fail(unavailable(lost_pending_));
    notify_peers_locked();
    return check();
  }
  if (now - last_moved_ < probe_after_ || now < next_probe_) return ok_status();
  next_probe_ = now + probe_after_;
  const uint64_t epoch = probe_();
  if (epoch == 0) return ok_status();
  request_switch_locked(epoch, cfg_.rank, -1);
  return abandoned();
}

// Once per epoch: to every peer but the notice's origin and the peer it
// came from, which know it.
void TcpTransport::request_switch_locked(uint64_t epoch, int origin, int from) {
  if (epoch == 0 || epoch <= switch_to_.load(std::memory_order_relaxed)) return;
  switch_to_.store(epoch, std::memory_order_relaxed);
  switch_origin_.store(origin, std::memory_order_relaxed);
  const Header h{kMagic, kSwitch, static_cast<uint16_t>(origin + 1), epoch};
  for (auto& p : pairs_) {
    if (!p || !p->ready || p->peer() == origin || p->peer() == from || p->in[0].closed) continue;
    (void)::send(p->in[0].fd.get(), &h, sizeof h, MSG_DONTWAIT | MSG_NOSIGNAL);
  }
}

Status TcpTransport::rebuild(const std::vector<PeerRoute>& routes, uint32_t generation, Deadline deadline) {
  auto l = lock();
  WEFT_RETURN_IF_ERROR(check());
  if (routes.size() != static_cast<size_t>(cfg_.size)) {
    return invalid_argument(fmt::format("tcp transport: {} routes for {} ranks", routes.size(), cfg_.size));
  }
  std::vector<int> again;
  for (auto& pair : pairs_) {
    if (!pair) continue;
    const bool had = pair->ready;
    for (OutConn& o : pair->out) {
      if (o.events != 0) ::epoll_ctl(epoll_fd_.get(), EPOLL_CTL_DEL, o.fd.get(), nullptr);
      reset(o.fd);
      o = OutConn{};  // closes it: what is queued or half sent belongs to the abandoned call
    }
    for (InConn& i : pair->in) {
      if (i.events != 0) ::epoll_ctl(epoll_fd_.get(), EPOLL_CTL_DEL, i.fd.get(), nullptr);
      reset(i.fd);
      reset(i.next);
      i = InConn{};
    }
    pair->sends = internal::Completion{};
    pair->recvs = internal::Completion{};
    pair->ready = false;
    if (had) again.push_back(pair->peer());
  }
  for (Fd& fd : retired_) reset(fd);
  retired_.clear();
  cfg_.routes = routes;
  generation_ = generation;
  std::fill(stall_from_.begin(), stall_from_.end(), kNoStallNotice);
  stall_noticed_.store(false, std::memory_order_relaxed);
  switch_to_.store(0, std::memory_order_relaxed);
  switch_origin_.store(-1, std::memory_order_relaxed);
  lost_pending_.clear();
  // Peers that rebuilt before this rank did: their connections are of this
  // generation now.
  auto early = std::move(early_);
  early_.clear();
  for (auto& [hello, fd] : early) {
    if (!attach(hello, std::move(fd)).empty()) ++dropped_connections_;
  }
  last_moved_ = Clock::now();
  if (again.empty()) return ok_status();
  return establish(again, deadline, false);
}

}  // namespace weft::coll::tcp
