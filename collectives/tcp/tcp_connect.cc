// Connecting the TCP transport's pairs (tcp_transport.h), at setup and on
// demand (Transport::connect_peers; communicator.h "Connections").
//
// Each rank opens the connections that carry its data to a peer and
// accepts the peer's: the two ends need no order between them. A rank
// connects first — the peer's kernel completes the handshake into its
// listen backlog whether or not the peer is accepting just then — and then
// takes in the peer's connections as they arrive: every connection waiting
// on the listening socket is accepted, and each one's Hello (which rank,
// which connection) is read when it is there, so that one slow peer holds
// up no other. A connection may come from a rank this one does not wait for
// yet (a rank already in a later call, whose plan needs this pair): it is
// kept with the pair, which becomes usable once this rank connects back.
//
// A connection that is not a peer's — a port scanner, a health check, a
// stale process of an earlier job — is closed and counted, never fatal: a
// hello that names no peer of this transport (or a connection it already
// has), a connection that closes before its hello, one whose hello has not
// arrived kHelloTimeout after it was accepted (a peer writes it right after
// connect). At most kMaxPendingHellos accepted connections wait for their
// hello at once (a flood must not take the descriptors the peers need);
// beyond that, connections stay queued on the listening socket until hellos
// make room — never closed unread: a rank with many peers or connections
// per peer (one-shot on 300 ranks, 64 per pair) has more than that many
// peers' connections queued when it first accepts.
#include <poll.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "bootstrap/listen_address.h"
#include "tcp/tcp_internal.h"

namespace weft::coll::tcp {
namespace {
constexpr auto kHelloTimeout = std::chrono::seconds(10);
constexpr size_t kMaxPendingHellos = 256;
}  // namespace

Status TcpTransport::connect(Store& store, Deadline deadline) {
  // A listening socket per address (address_choice.h), each published with
  // its port: "10.0.1.1:47000,10.0.3.1:47000".
  WEFT_ASSIGN_OR_RETURN(const std::vector<internal::NetInterface> ifs, internal::local_interfaces());
  std::vector<Endpoint> published;
  for (const std::string& a : internal::address_list(cfg_.tcp.listen_address)) {
    LocalAddress local{a, 32};
    for (const auto& i : ifs) {
      if (i.address == a) local.prefix_len = i.prefix_len;
    }
    // One port on every address: a plan gives each destination rank one
    // dport (routing/plan.h), so an ephemeral first port is reused.
    Endpoint bound;
    const uint16_t port = listen_fds_.empty() ? cfg_.tcp.listen_port : listen_port_;
    WEFT_ASSIGN_OR_RETURN(Fd fd, listen_on(a, port, &bound));
    WEFT_RETURN_IF_ERROR(set_nonblocking(fd.get()));  // accept_ready takes what is there
    if (listen_fds_.empty()) listen_port_ = bound.port;
    listen_fds_.push_back(std::move(fd));
    locals_.push_back(std::move(local));
    published.push_back(std::move(bound));
  }
  epoll_fd_ = Fd(::epoll_create1(EPOLL_CLOEXEC));
  wake_fd_ = Fd(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
  if (!epoll_fd_ || !wake_fd_) return io_error("epoll_create1/eventfd", errno);
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u64 = kWakeTag;
  ::epoll_ctl(epoll_fd_.get(), EPOLL_CTL_ADD, wake_fd_.get(), &ev);
  const std::string key = cfg_.store_prefix + "/tcp/";
  WEFT_RETURN_IF_ERROR(store.set_by(key + std::to_string(cfg_.rank), endpoints_to_string(published), deadline));

  const auto n = static_cast<size_t>(cfg_.size);
  pairs_.resize(n);
  stall_from_.assign(n, kNoStallNotice);
  served_.assign(n, false);
  addrs_.resize(n);
  // Every served peer's addresses now: the communicator keeps no store
  // after setup, and a pair may be connected later.
  for (int p : cfg_.peer_ranks()) {
    WEFT_ASSIGN_OR_RETURN(std::string addr, store.get(key + std::to_string(p), deadline));
    WEFT_ASSIGN_OR_RETURN(addrs_[static_cast<size_t>(p)], parse_endpoints(addr));
    served_[static_cast<size_t>(p)] = true;
  }
  auto l = lock();
  return establish(cfg_.setup_peer_ranks(), deadline, true);
}

Status TcpTransport::connect_peers(const std::vector<int>& peers, Deadline deadline) {
  auto l = lock();
  WEFT_RETURN_IF_ERROR(check());
  for (int p : peers) {
    if (p < 0 || p >= cfg_.size || !served_[static_cast<size_t>(p)]) {
      return invalid_argument(fmt::format("tcp transport: rank {} is not a peer of this transport", p));
    }
  }
  return establish(peers, deadline, false);
}

TcpPair& TcpTransport::slot(int peer) {
  auto& p = pairs_[static_cast<size_t>(peer)];
  if (!p) {
    p = std::make_unique<TcpPair>(this, peer);
    p->out.resize(static_cast<size_t>(cfg_.tcp.connections_per_peer));
    p->in.resize(static_cast<size_t>(cfg_.tcp.connections_per_peer));
  }
  return *p;
}

Status TcpTransport::establish(const std::vector<int>& peers, Deadline deadline, bool at_setup) {
  const int me = cfg_.rank, k = cfg_.tcp.connections_per_peer;
  for (int p : peers) {
    TcpPair& pair = slot(p);
    for (int c = 0; c < k; ++c) {
      OutConn& out = pair.out[static_cast<size_t>(c)];
      if (out.fd) continue;
      static const PeerRoute kUnplanned;
      const PeerRoute& route = cfg_.routes.empty() ? kUnplanned : cfg_.routes[static_cast<size_t>(p)];
      const uint16_t sport = route.sport_of(static_cast<size_t>(c));
      WEFT_ASSIGN_OR_RETURN(const AddressPair via, choose_addresses(locals_, addrs_[static_cast<size_t>(p)], route, me, p));
      // At setup a refused connection is retried until the deadline (as
      // before); later the peer's listener was up at setup, so refused
      // means the peer is gone.
      auto fd = connect_to(via.remote, via.local, sport, cfg_.tcp.socket_buffer_bytes, deadline, at_setup);
      if (!fd && !at_setup) {
        // The peer's listener is gone: it exited. If it gave up because of
        // another rank, it told the ranks it was connected to why, and that
        // may be on its way through the pairs connected here: the real
        // cause, where "refused" would blame a messenger.
        const Deadline grace = std::min(deadline, Clock::now() + std::chrono::milliseconds(200));
        while (check().is_ok() && Clock::now() < grace) run_once(10);
        WEFT_RETURN_IF_ERROR(check());
      }
      if (!fd) {
        return fd.status().with_context(
            fmt::format("connecting to rank {} from {} to {} (rank {} listens on {}; {} sockets open in this rank's tcp "
                        "transport)",
                        p, via.local, via.remote.to_string(), p, endpoints_to_string(addrs_[static_cast<size_t>(p)]),
                        socket_count()));
      }
      WEFT_RETURN_IF_ERROR(choose_congestion_control(fd->get()).with_context(fmt::format("connection to rank {}", p)));
      Hello h{kMagic, me, c, static_cast<int32_t>(::gettid()), generation_, 0};
      WEFT_RETURN_IF_ERROR(write_all(fd->get(), &h, sizeof h, deadline));
      out.fd = std::move(*fd);
    }
  }
  std::vector<int> missing;
  for (;;) {
    WEFT_RETURN_IF_ERROR(accept_ready());
    WEFT_RETURN_IF_ERROR(read_hellos());
    missing.clear();
    for (int p : peers) {
      for (const InConn& in : pairs_[static_cast<size_t>(p)]->in) {
        if (!in.fd) {
          missing.push_back(p);
          break;
        }
      }
    }
    if (missing.empty()) break;
    // The pairs already connected keep moving (and report an abort).
    run_once(0);
    WEFT_RETURN_IF_ERROR(check());
    if (stall_noticed_.load(std::memory_order_relaxed)) {
      return deadline_exceeded(fmt::format("a peer reported a stalled call (waiting for rank {} to connect)", missing[0]));
    }
    if (switch_to_.load(std::memory_order_relaxed) != 0) return abandoned();
    if (Clock::now() >= deadline) {
      return deadline_exceeded(fmt::format("timed out waiting for rank{} {} to connect", missing.size() == 1 ? "" : "s",
                                           fmt::join(missing, ", ")));
    }
    WEFT_RETURN_IF_ERROR(wait_for_connections(missing, deadline));
  }
  for (int p : peers) {
    TcpPair& pair = *pairs_[static_cast<size_t>(p)];
    if (!pair.ready) WEFT_RETURN_IF_ERROR(make_ready(pair));
  }
  return ok_status();
}

// Sleeps until a connection or a hello arrives, something happens on the
// connected pairs (the epoll set is readable then), or 100 ms pass. A peer
// still `missing` that hangs up the connection this rank opened to it died
// or gave up before it connected back: said at once, not at the deadline.
Status TcpTransport::wait_for_connections(const std::vector<int>& missing, Deadline deadline) {
  std::vector<pollfd> fds{{epoll_fd_.get(), POLLIN, 0}};
  // With no room for another connection, a queued one must not wake this
  // loop (it would spin until a hello makes room): the pending ones do.
  if (pending_.size() < kMaxPendingHellos) {
    for (const Fd& l : listen_fds_) fds.push_back({l.get(), POLLIN, 0});
  }
  for (const Pending& q : pending_) fds.push_back({q.fd.get(), POLLIN, 0});
  const size_t outs = fds.size();
  for (int p : missing) {
    for (const OutConn& c : pairs_[static_cast<size_t>(p)]->out) fds.push_back({c.fd.get(), POLLRDHUP, 0});
  }
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
  if (::poll(fds.data(), fds.size(), static_cast<int>(std::clamp<long long>(left, 0, 100))) <= 0) return ok_status();
  const size_t k = static_cast<size_t>(cfg_.tcp.connections_per_peer);
  for (size_t i = outs; i < fds.size(); ++i) {
    if (fds[i].revents & (POLLRDHUP | POLLHUP | POLLERR)) {
      return unavailable(fmt::format("rank {} closed the connection this rank opened before it connected back "
                                     "(it exited, died or gave up)",
                                     missing[(i - outs) / k]));
    }
  }
  return ok_status();
}

Status TcpTransport::accept_ready() {
  for (size_t i = 0; i < listen_fds_.size(); ++i) {
    for (;;) {
      if (pending_.size() >= kMaxPendingHellos) return ok_status();  // the rest wait in the backlog
      const int fd = ::accept4(listen_fds_[i].get(), nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
      if (fd < 0) {
        if (errno == EAGAIN || errno == EWOULDBLOCK) break;
        if (errno == EINTR || errno == ECONNABORTED) continue;
        return io_error(fmt::format("accept on {} ({} sockets open in this rank's tcp transport)",
                                    Endpoint{locals_[i].address, local_port(listen_fds_[i].get())}.to_string(),
                                    socket_count()),
                        errno);
      }
      set_buffers_and_nodelay(fd, cfg_.tcp.socket_buffer_bytes);
      pending_.push_back(Pending{Fd(fd), Clock::now()});
    }
  }
  return ok_status();
}

Status TcpTransport::read_hellos() {
  for (size_t i = 0; i < pending_.size();) {
    Pending& q = pending_[i];
    const ssize_t n = ::recv(q.fd.get(), reinterpret_cast<char*>(&q.hello) + q.have, sizeof(Hello) - q.have, MSG_DONTWAIT);
    const bool waiting = n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR);
    if (waiting && Clock::now() - q.since < kHelloTimeout) {
      ++i;
      continue;
    }
    if (n <= 0) {
      // Gone (or silent) before it said who it is: not a rank's connection
      // to count on (a rank that dies is seen when this one connects to it).
      pending_.erase(pending_.begin() + static_cast<std::ptrdiff_t>(i));
      ++dropped_connections_;
      continue;
    }
    q.have += static_cast<size_t>(n);
    if (q.have < sizeof(Hello)) continue;  // read again: the rest may be there
    const Hello h = q.hello;
    Fd fd = std::move(q.fd);
    pending_.erase(pending_.begin() + static_cast<std::ptrdiff_t>(i));
    if (!attach(h, std::move(fd)).empty()) ++dropped_connections_;  // closed with `fd`
  }
  return ok_status();
}

std::string TcpTransport::attach(const Hello& h, Fd fd) {
  const int k = cfg_.tcp.connections_per_peer;
  if (h.magic != kMagic) return fmt::format("a connection that is not a weft tcp peer (magic {:#x})", h.magic);
  if (h.rank < 0 || h.rank >= cfg_.size || !served_[static_cast<size_t>(h.rank)] || h.conn < 0 || h.conn >= k) {
    return fmt::format("unexpected hello (rank {}, connection {})", h.rank, h.conn);
  }
  // tcp_rebuild.cc: a connection from before an in-call switch carries
  // bytes of the abandoned call; one from a peer that rebuilt first waits
  // for this rank's rebuild.
  if (h.generation < generation_) return fmt::format("a connection of rank {} from before an in-call switch", h.rank);
  if (h.generation > generation_) {
    early_.emplace_back(h, std::move(fd));
    return "";
  }
  TcpPair& pair = slot(h.rank);
  InConn& in = pair.in[static_cast<size_t>(h.conn)];
  if (in.fd) {
    // A connected peer that already switched to a new plan epoch connects
    // again before this rank has switched (tcp_reroute.cc): kept for the
    // switch. A second one is no peer's.
    if (!pair.ready || in.next) return fmt::format("unexpected hello (rank {}, connection {})", h.rank, h.conn);
    in.next = std::move(fd);
    return "";
  }
  if (h.conn == 0 && peer_on_this_host(fd.get())) pair.cpu = PeerCpu(h.tid);
  pair.in[static_cast<size_t>(h.conn)].fd = std::move(fd);
  return "";
}

Status TcpTransport::make_ready(TcpPair& pair) {
  // Only the connections not set up yet: after a reroute the others carry
  // on as they were (their staged bytes, their epoll interest).
  for (size_t c = 0; c < pair.out.size(); ++c) {
    if (!pair.out[c].set_up) {
      WEFT_RETURN_IF_ERROR(set_nonblocking(pair.out[c].fd.get()));
      watch_out(pair, c, EPOLLRDHUP);
      pair.out[c].set_up = true;
      const auto& silent = cfg_.tcp.test_silent_sports;
      pair.out[c].silent = !silent.empty() && std::find(silent.begin(), silent.end(), local_port(pair.out[c].fd.get())) != silent.end();
    }
    if (!pair.in[c].stage) {
      WEFT_RETURN_IF_ERROR(set_nonblocking(pair.in[c].fd.get()));
      pair.in[c].stage = std::make_unique<char[]>(kStageBytes);
      const auto& silent = cfg_.tcp.test_silent_sports;
      pair.in[c].silent = !silent.empty() && std::find(silent.begin(), silent.end(), remote_port(pair.in[c].fd.get())) != silent.end();
      watch_in(pair, c, EPOLLIN | EPOLLRDHUP);
    }
  }
  pair.ready = true;
  return ok_status();
}

Result<std::unique_ptr<Transport>> make_tcp_transport(const TransportConfig& config, Store& store,
                                                      Deadline deadline) {
  // The communicator chooses an address for "" (TcpOptions); a transport
  // made on its own knows nothing of hosts, and stays on loopback.
  TransportConfig c = config;
  if (c.tcp.listen_address.empty()) c.tcp.listen_address = "127.0.0.1";
  auto t = std::make_unique<TcpTransport>(c);
  WEFT_RETURN_IF_ERROR(t->connect(store, deadline));
  return std::unique_ptr<Transport>(std::move(t));
}

}  // namespace weft::coll::tcp
