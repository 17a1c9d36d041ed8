// Socket helpers of the TCP transport (internal): an owning fd, listening,
// connecting from a chosen source port, and blocking-with-deadline I/O for
// the handshake. errno is turned into a Status here, once.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>

#include "weft/collectives/transport.h"

namespace weft::coll::tcp {

class Fd {
 public:
  Fd() = default;
  explicit Fd(int fd) : fd_(fd) {}
  Fd(Fd&& o) noexcept : fd_(o.release()) {}
  Fd& operator=(Fd&& o) noexcept;
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd();
  int get() const { return fd_; }
  int release();
  explicit operator bool() const { return fd_ >= 0; }

 private:
  int fd_ = -1;
};

struct Endpoint {
  std::string host;  // dotted IPv4
  uint16_t port = 0;
  std::string to_string() const;
  static Result<Endpoint> parse(const std::string& s);  // "a.b.c.d:port"
};

// A listening socket on address:port (port 0 = ephemeral). SO_REUSEADDR so a
// planned port is reusable right after a previous job (TIME_WAIT).
Result<Fd> listen_on(const std::string& address, uint16_t port, Endpoint* bound);

// Connects to `to` from `local_address` ("0.0.0.0" or "" = the kernel's
// choice of source), binding source port `sport` first when non-zero (the
// planned route: ECMP hashes the 5-tuple, so the source port picks the
// spine). Buffers are sized before connect so the window scale covers them
// (tcp(7): "set before connect/listen"). Retries refused connections and
// unreachable hosts and networks until the deadline, unless !retry_refused
// (a peer whose listener is known to have been up: refused means it is
// gone). Without `sport`, an attempt whose
// SYN is not answered within kRepath is made again from another source port
// (another ECMP path). Returns a blocking socket with TCP_NODELAY set.
inline constexpr std::chrono::milliseconds kRepath{250};
Result<Fd> connect_to(const Endpoint& to, const std::string& local_address, uint16_t sport,
                      int buffer_bytes, Deadline deadline, bool retry_refused = true);

// Decides on a connection's hello (its first hello_bytes bytes): returns ""
// when it keeps the connection (moving `fd` out), else why it does not.
using HelloFilter = std::function<std::string(Fd& fd, const char* hello)>;
// Accepts connections on listen_fd until `want` of them were kept by
// `take`. The connections are read side by side (poll), so a stray one
// that sends nothing holds up no one. A connection whose hello `take`
// refuses, that hangs up before its hello is whole, or that is still
// pending once `want` were kept, is closed and counted in *dropped; it
// never fails the call. kDeadlineExceeded says how many were kept and why
// the last connection was dropped. Kept sockets are blocking.
Status accept_hellos(int listen_fd, size_t want, size_t hello_bytes, Deadline deadline, const HelloFilter& take,
                     uint64_t* dropped);

void set_buffers_and_nodelay(int fd, int buffer_bytes);
// True when the connected socket's peer is this host: a loopback address at
// either end, or the same address at both.
bool peer_on_this_host(int fd);
// TCP_CONGESTION; the error names the algorithm.
Status set_congestion_control(int fd, const std::string& name);
std::string congestion_control(int fd);  // "" when it cannot be read
Status set_nonblocking(int fd);
Status set_blocking(int fd);
Status write_all(int fd, const void* p, size_t n, Deadline deadline);
Status read_all(int fd, void* p, size_t n, Deadline deadline);
uint16_t local_port(int fd);
uint16_t remote_port(int fd);

}  // namespace weft::coll::tcp
