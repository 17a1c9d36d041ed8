#include "weft/verbs/oob.h"

#include <poll.h>
#include <sys/socket.h>

#include <cerrno>

#include <fmt/format.h>

#include "weft/verbs/completion_queue.h"

namespace weft::verbs {

Result<EndpointInfo> exchange_endpoint(int fd, const EndpointInfo& mine, std::chrono::milliseconds timeout,
                                       const std::string& peer_name) {
  const auto deadline = Clock::now() + timeout;
  EndpointWire out = encode(mine);
  EndpointWire in{};
  std::size_t sent = 0, got = 0;
  while (sent < sizeof out || got < sizeof in) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) {
      return deadline_exceeded(fmt::format("no endpoint record from {} within {} ms", peer_name, timeout.count()));
    }
    pollfd p{fd, static_cast<short>((got < sizeof in ? POLLIN : 0) | (sent < sizeof out ? POLLOUT : 0)), 0};
    if (::poll(&p, 1, static_cast<int>(left)) < 0) {
      if (errno == EINTR) continue;
      return io_error("poll", errno);
    }
    if ((p.revents & POLLOUT) && sent < sizeof out) {
      ssize_t n = ::send(fd, out.bytes + sent, sizeof out - sent, MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n < 0 && errno != EAGAIN && errno != EINTR) return io_error(fmt::format("sending to {}", peer_name), errno);
      if (n > 0) sent += static_cast<std::size_t>(n);
    }
    if ((p.revents & (POLLIN | POLLHUP | POLLERR)) && got < sizeof in) {
      ssize_t n = ::recv(fd, in.bytes + got, sizeof in - got, MSG_DONTWAIT);
      if (n == 0) return unavailable(fmt::format("{} closed the connection during the endpoint exchange", peer_name));
      if (n < 0 && errno != EAGAIN && errno != EINTR) return io_error(fmt::format("receiving from {}", peer_name), errno);
      if (n > 0) got += static_cast<std::size_t>(n);
    }
  }
  auto info = decode(in);
  if (!info) return info.status().with_context(fmt::format("endpoint record from {}", peer_name));
  return info;
}

}  // namespace weft::verbs
