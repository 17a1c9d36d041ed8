// The TCP store's server (store.h): Boost.Asio C++20 coroutines on one
// thread, one coroutine per connection, so a slow, silent or hostile client
// holds up no one. The protocol itself is StoreCore (store_core.h); this
// file moves bytes and enforces time and queue bounds.
#include <utility>  // before asio: Boost 1.74's awaitable.hpp uses std::exchange

#include "bootstrap/tcp_store_server.h"

#include <sys/resource.h>

#include <deque>

#include <boost/asio.hpp>
#include <fmt/format.h>
#include <spdlog/spdlog.h>

namespace weft::coll {

namespace asio = boost::asio;
using Tcp = asio::ip::tcp;  // not `tcp`: weft::coll::tcp is the TCP transport
using boost::system::error_code;

struct TcpStore::Server::Session {
  explicit Session(Tcp::socket s) : sock(std::move(s)), wake(sock.get_executor()), drained(sock.get_executor()) {}
  Tcp::socket sock;
  asio::steady_timer wake;     // the writer waits on it for output
  asio::steady_timer drained;  // the reader waits on it while the output queue is over its bound
  std::deque<std::string> out;
  size_t out_bytes = 0;
  uint64_t id = 0;
  bool closing = false;  // send what is queued, then close
  bool closed = false;

  void send(std::string bytes) {
    out_bytes += bytes.size();
    out.push_back(std::move(bytes));
    wake.cancel();
  }
  void close() {
    if (closed) return;
    closed = true;
    error_code ec;
    sock.shutdown(Tcp::socket::shutdown_both, ec);
    sock.close(ec);
    wake.cancel();
    drained.cancel();
  }
};

struct TcpStore::Server::Loop {
  explicit Loop(const TcpStoreOptions& o) : limits(o.limits), core(o.limits, o.secret) {}
  asio::io_context io;  // first: destroyed last, after everything bound to it
  Tcp::acceptor acceptor{io};
  TcpStoreLimits limits;
  store_internal::StoreCore core;
  std::unordered_map<uint64_t, std::shared_ptr<Session>> sessions;
  std::vector<store_internal::StoreCore::Out> outs;
  char buf[64 << 10];  // one read buffer for every connection: the loop is one thread
  bool warned_descriptors = false;

  // A legitimate client has one reply outstanding at most; past two of the
  // largest, stop reading from a client that does not read its replies.
  size_t out_bound() const { return 2 * (limits.max_value_bytes + store_wire::kReplyHeader); }

  asio::awaitable<void> writer(std::shared_ptr<Session> s) {
    while (!s->closed) {
      if (s->out.empty()) {
        if (s->closing) break;
        s->wake.expires_at(asio::steady_timer::time_point::max());
        error_code ec;
        co_await s->wake.async_wait(asio::redirect_error(asio::use_awaitable, ec));
        continue;
      }
      error_code ec;
      co_await asio::async_write(s->sock, asio::buffer(s->out.front()), asio::redirect_error(asio::use_awaitable, ec));
      s->out_bytes -= s->out.front().size();
      s->out.pop_front();
      s->drained.cancel();
      if (ec) break;
    }
    s->close();
  }

  void deliver() {
    for (auto& o : outs) {
      if (auto it = sessions.find(o.conn); it != sessions.end()) it->second->send(std::move(o.bytes));
    }
    outs.clear();
  }

  asio::awaitable<void> session(std::shared_ptr<Session> s) {
    asio::co_spawn(io, writer(s), asio::detached);
    asio::steady_timer handshake(io);
    handshake.expires_after(limits.handshake_timeout);
    handshake.async_wait([this, s](error_code ec) {
      if (ec || s->closed || core.ready(s->id)) return;
      core.handshake_expired(s->id);
      s->close();
    });
    for (;;) {
      error_code ec;
      if (s->out_bytes > out_bound()) {
        s->drained.expires_at(asio::steady_timer::time_point::max());
        co_await s->drained.async_wait(asio::redirect_error(asio::use_awaitable, ec));
        if (s->closed) break;
        continue;
      }
      co_await s->sock.async_wait(Tcp::socket::wait_read, asio::redirect_error(asio::use_awaitable, ec));
      if (ec || s->closed) break;
      const size_t n = s->sock.read_some(asio::buffer(buf), ec);
      if (ec == asio::error::would_block || ec == asio::error::try_again) continue;
      if (ec) break;  // end of file included
      const bool keep = core.feed(s->id, std::string_view(buf, n), outs);
      deliver();
      if (!keep) {
        s->closing = true;
        s->wake.cancel();
        break;
      }
    }
    handshake.cancel();
    core.close(s->id);
    sessions.erase(s->id);
    if (!s->closing) s->close();
  }

  // The store holds a connection per rank: past ~1000 ranks, the usual
  // soft limit of 1024 descriptors (getrlimit(2)) is reached and the
  // ranks still to come would wait silently until their deadline. The soft
  // limit is raised to the hard one, as Go's runtime does for every
  // program; past that, the limit is named once.
  void out_of_descriptors() {
    rlimit lim{};
    if (::getrlimit(RLIMIT_NOFILE, &lim) != 0) return;
    if (lim.rlim_cur < lim.rlim_max) {
      const rlim_t was = lim.rlim_cur;
      lim.rlim_cur = lim.rlim_max;
      if (::setrlimit(RLIMIT_NOFILE, &lim) == 0) {
        spdlog::info("weft: TCP store: out of file descriptors with {} clients connected: soft limit raised from {} to "
                     "the hard limit, {}", sessions.size(), was, lim.rlim_max);
        return;
      }
    }
    if (warned_descriptors) return;
    warned_descriptors = true;
    spdlog::warn("weft: TCP store: out of file descriptors with {} clients connected (RLIMIT_NOFILE {}, or the "
                 "system's): the ranks still to connect wait until one closes; raise `ulimit -n` on rank 0's host",
                 sessions.size(), lim.rlim_cur);
  }

  asio::awaitable<void> accept_loop() {
    asio::steady_timer pause(io);
    for (;;) {
      error_code ec;
      Tcp::socket sock = co_await acceptor.async_accept(asio::redirect_error(asio::use_awaitable, ec));
      if (ec == asio::error::operation_aborted) co_return;
      if (ec) {
        if (ec == asio::error::no_descriptors || ec == boost::system::errc::too_many_files_open_in_system) {
          out_of_descriptors();
        }
        // The pending connection stays in the backlog; try again shortly
        // instead of spinning.
        pause.expires_after(std::chrono::milliseconds(50));
        co_await pause.async_wait(asio::redirect_error(asio::use_awaitable, ec));
        continue;
      }
      if (sessions.size() >= limits.max_clients) {
        core.over_capacity();
        continue;  // the socket closes here
      }
      sock.set_option(Tcp::no_delay(true), ec);
      sock.non_blocking(true, ec);
      auto s = std::make_shared<Session>(std::move(sock));
      s->id = core.open();
      sessions.emplace(s->id, s);
      asio::co_spawn(io, session(s), asio::detached);
    }
  }
};

TcpStore::Server::Server(const TcpStoreOptions& options) : loop_(std::make_unique<Loop>(options)) {}

Status TcpStore::Server::start(const std::string& address, uint16_t port) {
  Loop& l = *loop_;
  error_code ec;
  const auto addr = asio::ip::make_address_v4(address, ec);
  if (ec) return invalid_argument(fmt::format("store bind address '{}' is not an IPv4 address", address));
  const Tcp::endpoint ep(addr, port);
  l.acceptor.open(ep.protocol(), ec);
  // SO_REUSEADDR: the port of the previous job may still be in TIME_WAIT.
  if (!ec) l.acceptor.set_option(Tcp::acceptor::reuse_address(true), ec);
  if (!ec) l.acceptor.bind(ep, ec);
  if (ec == boost::system::errc::address_not_available) {
    return unavailable(fmt::format("bind {}:{}: {} (the store listens on MASTER_ADDR or WEFT_STORE_BIND, which must "
                                   "be an address of rank 0's host; WEFT_STORE_BIND=0.0.0.0 listens on every address)",
                                   address, port, ec.message()));
  }
  if (ec == boost::system::errc::address_in_use) {
    // The port is served by another process: another job's store, or a
    // second process that also took rank 0, as every process does that reads
    // a launcher's variables outside the launcher (a Slurm batch script's own
    // SLURM_PROCID is 0 in each process it starts without srun).
    return unavailable(fmt::format("bind {}:{}: {} (another process serves this port: another job's store, so pick "
                                   "another port, or a second process that also took rank 0: each process needs "
                                   "its own RANK, OMPI_COMM_WORLD_RANK or SLURM_PROCID, as torchrun, mpirun and "
                                   "srun give them)",
                                   address, port, ec.message()));
  }
  if (!ec) l.acceptor.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) return unavailable(fmt::format("bind {}:{}: {}", address, port, ec.message()));
  port_ = l.acceptor.local_endpoint().port();
  asio::co_spawn(l.io, l.accept_loop(), asio::detached);
  thread_ = std::thread([&l] { l.io.run(); });
  return ok_status();
}

TcpStore::Server::~Server() {
  if (!thread_.joinable()) return;
  Loop& l = *loop_;
  asio::post(l.io, [&l] {
    error_code ec;
    l.acceptor.close(ec);
    for (auto& [id, s] : l.sessions) s->close();
    l.io.stop();
  });
  thread_.join();
}

TcpStoreCounters TcpStore::Server::counters() const { return loop_->core.counters(); }

}  // namespace weft::coll
