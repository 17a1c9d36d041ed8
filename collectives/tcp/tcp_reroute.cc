// A new plan epoch on the TCP transport (Transport::reroute): the
// connections whose planned source port changed are made again on the new
// port; every other connection carries on untouched.
//
// The communicator calls it on every rank at the same call boundary, after
// an agreement that every rank entered only once its earlier calls had
// ended: every message sent on a connection before the switch has been
// received by then, except perhaps the agreement's own last ones, which
// the receiver still reads when this rank has already switched. So:
//   - the sender of a changed direction does not close its old connection:
//     it stops watching it and keeps it (retired_) until the next reroute,
//     by when the peer has read everything on it and closed its end;
//   - the receiver closes the old connection when it switches, having read
//     everything on it (its own calls ended), and takes the new one, which
//     may have arrived already (InConn::next) or is accepted as at setup.
// The receiver closes first, so TIME_WAIT (RFC 793 section 3.5) stays on
// the listening end, and the sender may bind the same source port again at
// the next epoch (A -> B -> A) without waiting it out.
#include <sys/epoll.h>
#include <sys/socket.h>

#include <algorithm>

#include <fmt/format.h>

#include "tcp/tcp_internal.h"

namespace weft::coll::tcp {

Status TcpTransport::reroute(const std::vector<PeerRoute>& routes, const std::vector<int>& inbound,
                             Deadline deadline) {
  auto l = lock();
  WEFT_RETURN_IF_ERROR(check());
  if (routes.size() != static_cast<size_t>(cfg_.size)) {
    return invalid_argument(fmt::format("tcp transport: {} routes for {} ranks", routes.size(), cfg_.size));
  }
  retired_.clear();  // their peers closed them at the previous epoch's switch
  const auto route = [&](const std::vector<PeerRoute>& r, size_t p) { return r.empty() ? PeerRoute{} : r[p]; };
  std::vector<int> again;
  for (size_t p = 0; p < pairs_.size(); ++p) {
    TcpPair* pair = pairs_[p].get();
    if (pair == nullptr || !pair->ready) continue;
    const bool out = route(cfg_.routes, p) != routes[p];
    const bool in = std::find(inbound.begin(), inbound.end(), static_cast<int>(p)) != inbound.end();
    if (!out && !in) continue;
    for (size_t c = 0; c < pair->out.size(); ++c) {
      OutConn& o = pair->out[c];
      InConn& i = pair->in[c];
      // A call boundary: nothing may be queued or half-read on a connection
      // this rank drops (it would be lost with it). An outgoing one may be
      // closed already: the peer switched first and closed its end.
      if ((out && !o.q.empty()) || (in && (!i.q.empty() || i.in_frame || i.lo != i.hi || i.closed))) {
        return internal_error(
            fmt::format("tcp transport: the connections with rank {} are busy or closed at a plan epoch switch", p));
      }
      if (out) {
        if (o.events != 0) ::epoll_ctl(epoll_fd_.get(), EPOLL_CTL_DEL, o.fd.get(), nullptr);
        retired_.push_back(std::move(o.fd));
        o = OutConn{};
      }
      if (in) {
        if (i.events != 0) ::epoll_ctl(epoll_fd_.get(), EPOLL_CTL_DEL, i.fd.get(), nullptr);
        // Nothing unread may be left at close(2), or the kernel resets the
        // connection (RFC 2525 section 2.17): the peer's stall notices on
        // the reverse direction are all it could hold.
        char buf[256];
        while (::recv(i.fd.get(), buf, sizeof buf, MSG_DONTWAIT) > 0) {
        }
        Fd next = std::move(i.next);
        i = InConn{};
        i.fd = std::move(next);
      }
    }
    pair->ready = false;
    again.push_back(static_cast<int>(p));
  }
  cfg_.routes = routes;
  if (again.empty()) return ok_status();
  return establish(again, deadline, false);
}

}  // namespace weft::coll::tcp
