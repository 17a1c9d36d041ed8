#include "tcp/socket.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <thread>

#include <fmt/format.h>

namespace weft::coll::tcp {

Fd& Fd::operator=(Fd&& o) noexcept {
  if (this != &o) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = o.release();
  }
  return *this;
}
Fd::~Fd() {
  if (fd_ >= 0) ::close(fd_);
}
int Fd::release() {
  int f = fd_;
  fd_ = -1;
  return f;
}

std::string Endpoint::to_string() const { return fmt::format("{}:{}", host, port); }

Result<Endpoint> Endpoint::parse(const std::string& s) {
  auto colon = s.rfind(':');
  if (colon == std::string::npos) return invalid_argument(fmt::format("address '{}' has no ':port'", s));
  Endpoint e;
  e.host = s.substr(0, colon);
  try {
    int p = std::stoi(s.substr(colon + 1));
    if (p < 1 || p > 65535) throw std::out_of_range("port");
    e.port = static_cast<uint16_t>(p);
  } catch (const std::exception&) {
    return invalid_argument(fmt::format("address '{}' has no valid port", s));
  }
  return e;
}

namespace {

Result<sockaddr_in> sockaddr_of(const std::string& host, uint16_t port) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  if (::inet_pton(AF_INET, host.c_str(), &a.sin_addr) != 1) {
    return invalid_argument(fmt::format("'{}' is not an IPv4 address", host));
  }
  return a;
}

int wait_fd(int fd, short events, Deadline deadline) {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
  if (left < 0) return 0;
  pollfd p{fd, events, 0};
  int r = ::poll(&p, 1, static_cast<int>(std::min<long>(left, 1000)));
  return r < 0 && errno == EINTR ? 0 : r;
}

}  // namespace

void set_buffers_and_nodelay(int fd, int buffer_bytes) {
  ::setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &buffer_bytes, sizeof buffer_bytes);
  ::setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &buffer_bytes, sizeof buffer_bytes);
  int one = 1;
  // Nagle's algorithm (RFC 896) holds back a small tail segment until the
  // previous one is ACKed, and the receiver delays that ACK by up to 40 ms
  // (delayed ACKs, RFC 1122 4.2.3.2; tcp(7) TCP_NODELAY, TCP_QUICKACK).
  // Every message here is written whole, so Nagle buys nothing.
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

bool peer_on_this_host(int fd) {
  sockaddr_in me{}, peer{};
  socklen_t lm = sizeof me, lp = sizeof peer;
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&me), &lm) != 0 ||
      ::getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &lp) != 0 || me.sin_family != AF_INET) {
    return false;
  }
  const auto loopback = [](const sockaddr_in& a) { return (ntohl(a.sin_addr.s_addr) >> 24) == 127; };
  return loopback(me) || loopback(peer) || me.sin_addr.s_addr == peer.sin_addr.s_addr;
}

Status set_congestion_control(int fd, const std::string& name) {
  if (::setsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, name.data(), static_cast<socklen_t>(name.size())) != 0) {
    return io_error(fmt::format("TCP_CONGESTION {} (see net.ipv4.tcp_available_congestion_control and "
                                "tcp_allowed_congestion_control)", name),
                    errno);
  }
  return ok_status();
}

std::string congestion_control(int fd) {
  char name[16] = {};  // TCP_CA_NAME_MAX
  socklen_t len = sizeof name;
  if (::getsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, name, &len) != 0) return "";
  return std::string(name, strnlen(name, len));
}

Status set_nonblocking(int fd) {
  int fl = ::fcntl(fd, F_GETFL);
  if (fl < 0 || ::fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0) return io_error("fcntl(O_NONBLOCK)", errno);
  return ok_status();
}

Status set_blocking(int fd) {
  int fl = ::fcntl(fd, F_GETFL);
  if (fl < 0 || ::fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) < 0) return io_error("fcntl(~O_NONBLOCK)", errno);
  return ok_status();
}

Result<Fd> listen_on(const std::string& address, uint16_t port, Endpoint* bound) {
  WEFT_ASSIGN_OR_RETURN(sockaddr_in a, sockaddr_of(address, port));
  Fd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd) return io_error("socket", errno);
  int one = 1;
  ::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (::bind(fd.get(), reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    return io_error(fmt::format("bind {}:{}", address, port), errno);
  }
  if (::listen(fd.get(), SOMAXCONN) != 0) return io_error("listen", errno);
  if (bound) *bound = Endpoint{address, local_port(fd.get())};
  return fd;
}

namespace {

// One non-blocking connect(2), waited for with poll(2) until the deadline
// (connect(2), EINPROGRESS; the result is SO_ERROR). A blocking connect
// would wait for the kernel's SYN retries instead (about two minutes,
// tcp_syn_retries in tcp(7)) where the address drops SYNs. Returns the
// errno of the attempt, ETIMEDOUT when the deadline passed first.
int connect_once(int fd, const sockaddr_in& dst, Deadline deadline) {
  if (::connect(fd, reinterpret_cast<const sockaddr*>(&dst), sizeof dst) == 0) return 0;
  if (errno != EINPROGRESS) return errno;
  for (;;) {
    if (Clock::now() >= deadline) return ETIMEDOUT;
    if (wait_fd(fd, POLLOUT, deadline) > 0) break;
  }
  int err = 0;
  socklen_t len = sizeof err;
  if (::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0) return errno;
  return err;
}

// A connection to a local port nobody listens on can be "accepted" by the
// connecting socket itself: when the kernel happens to pick the destination
// port as the ephemeral source port, the SYN meets its own socket and the
// simultaneous open of RFC 9293 section 3.5 completes. Such a connection is
// refused in all but name.
bool connected_to_itself(int fd, const sockaddr_in& dst) {
  sockaddr_in self{};
  socklen_t len = sizeof self;
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&self), &len) != 0) return false;
  return self.sin_port == dst.sin_port && self.sin_addr.s_addr == dst.sin_addr.s_addr;
}

}  // namespace

Result<Fd> connect_to(const Endpoint& to, const std::string& local_address, uint16_t sport,
                      int buffer_bytes, Deadline deadline, bool retry_refused) {
  WEFT_ASSIGN_OR_RETURN(sockaddr_in dst, sockaddr_of(to.host, to.port));
  const auto what = [&] { return fmt::format("connect to {}{}", to.to_string(), sport ? fmt::format(" from port {}", sport) : ""); };
  auto pause = std::chrono::milliseconds(1);
  int repaths = 0;
  for (;;) {
    Fd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
    if (!fd) return io_error("socket", errno);
    set_buffers_and_nodelay(fd.get(), buffer_bytes);
    if (sport != 0) {
      // Bind before connect: the kernel then uses exactly this source port.
      int one = 1;
      ::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
      WEFT_ASSIGN_OR_RETURN(sockaddr_in src, sockaddr_of(local_address, sport));
      if (::bind(fd.get(), reinterpret_cast<sockaddr*>(&src), sizeof src) != 0) {
        return io_error(fmt::format("bind planned source port {}", sport), errno);
      }
    } else if (!local_address.empty() && local_address != "0.0.0.0") {
      // An ephemeral port still leaves from this rank's address: on a host
      // with a NIC per rank (rail-optimised) the kernel would take the
      // source from the main routing table, i.e. another rank's NIC.
      // IP_BIND_ADDRESS_NO_PORT (ip(7)) leaves the port to connect(), which
      // needs only the 4-tuple unique, not the port (no ephemeral port
      // exhaustion from bind-before-connect).
      int one = 1;
      ::setsockopt(fd.get(), IPPROTO_IP, IP_BIND_ADDRESS_NO_PORT, &one, sizeof one);
      WEFT_ASSIGN_OR_RETURN(sockaddr_in src, sockaddr_of(local_address, 0));
      if (::bind(fd.get(), reinterpret_cast<sockaddr*>(&src), sizeof src) != 0) {
        return io_error(fmt::format("bind source address {}", local_address), errno);
      }
    }
    // A source port of the kernel's choosing is an ECMP path of chance: one
    // across a link that drops everything (a gray failure, cut mid-job)
    // never answers the SYN, and TCP resends it on the same 5-tuple, hence
    // the same path, after 1, 3, 7 s... (RFC 6298, tcp(7) tcp_syn_retries).
    // So an unanswered attempt is given up after kRepath and made again from
    // a new socket: another port, most likely another path. A planned port
    // is the plan's path and keeps its SYN until the deadline.
    const Deadline attempt = sport == 0 ? std::min(deadline, Clock::now() + kRepath) : deadline;
    int err = connect_once(fd.get(), dst, attempt);
    if (err == 0 && connected_to_itself(fd.get(), dst)) err = ECONNREFUSED;
    if (err == 0) {
      WEFT_RETURN_IF_ERROR(set_blocking(fd.get()));
      return fd;
    }
    if (err == ETIMEDOUT && attempt < deadline && Clock::now() >= attempt) {
      ++repaths;
      continue;
    }
    if (Clock::now() >= deadline) {
      return deadline_exceeded(fmt::format("{}: no connection before the deadline ({}{})", what(), std::strerror(err),
                                           repaths ? fmt::format("; {} source ports tried", repaths + 1) : ""));
    }
    // At setup, a peer's host or the route to it may come up after this
    // rank (EHOSTUNREACH: no ARP answer yet): as a refused connection,
    // asked again until the deadline.
    const bool not_yet = err == ECONNREFUSED || err == EHOSTUNREACH || err == ENETUNREACH;
    if ((!not_yet && err != ETIMEDOUT && err != EADDRNOTAVAIL) || (not_yet && !retry_refused)) {
      return io_error(what(), err);
    }
    std::this_thread::sleep_for(std::min<Clock::duration>(pause, deadline - Clock::now()));
    pause = std::min(pause * 2, std::chrono::milliseconds(100));
  }
}

Status write_all(int fd, const void* p, size_t n, Deadline deadline) {
  auto* c = static_cast<const char*>(p);
  while (n > 0) {
    ssize_t w = ::send(fd, c, n, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (w > 0) {
      c += w;
      n -= static_cast<size_t>(w);
      continue;
    }
    if (w < 0 && errno != EAGAIN && errno != EINTR) return io_error("send", errno);
    if (Clock::now() > deadline) return deadline_exceeded("send did not finish in time");
    wait_fd(fd, POLLOUT, deadline);
  }
  return ok_status();
}

Status read_all(int fd, void* p, size_t n, Deadline deadline) {
  auto* c = static_cast<char*>(p);
  while (n > 0) {
    ssize_t r = ::recv(fd, c, n, MSG_DONTWAIT);
    if (r > 0) {
      c += r;
      n -= static_cast<size_t>(r);
      continue;
    }
    if (r == 0) return unavailable("connection closed by the peer");
    if (errno != EAGAIN && errno != EINTR) return io_error("recv", errno);
    if (Clock::now() > deadline) return deadline_exceeded("receive did not finish in time");
    wait_fd(fd, POLLIN, deadline);
  }
  return ok_status();
}

uint16_t local_port(int fd) {
  sockaddr_in a{};
  socklen_t l = sizeof a;
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &l) != 0) return 0;
  return ntohs(a.sin_port);
}

uint16_t remote_port(int fd) {
  sockaddr_in a{};
  socklen_t l = sizeof a;
  if (::getpeername(fd, reinterpret_cast<sockaddr*>(&a), &l) != 0) return 0;
  return ntohs(a.sin_port);
}

}  // namespace weft::coll::tcp
