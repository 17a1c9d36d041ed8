// Accepting the connections of a job's peers while strangers knock
// (socket.h, accept_hellos): every pending connection is read side by side,
// so a port scanner, a load balancer's health check or a stale process of
// an earlier job that connects and says nothing (or the wrong thing) is
// closed and counted instead of holding up, or failing, the job.
#include <poll.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include <fmt/format.h>

#include "tcp/socket.h"

namespace weft::coll::tcp {
namespace {

// Connections without a whole hello held at once; more are closed at once
// (a flood must not exhaust the descriptors the job's peers need).
constexpr size_t kMaxPending = 256;

struct Pending {
  Fd fd;
  std::string got;
};

}  // namespace

Status accept_hellos(int listen_fd, size_t want, size_t hello_bytes, Deadline deadline, const HelloFilter& take,
                     uint64_t* dropped) {
  std::vector<Pending> pending;
  size_t kept = 0;
  std::string last_drop;
  const auto drop = [&](std::string why) {
    ++*dropped;
    last_drop = std::move(why);
  };
  std::vector<pollfd> pf;
  while (kept < want) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) {
      return deadline_exceeded(fmt::format("{} of {} connections arrived in time{}", kept, want,
                                           last_drop.empty() ? "" : fmt::format(" ({} dropped, the last: {})", *dropped, last_drop)));
    }
    pf.assign(1, pollfd{listen_fd, POLLIN, 0});
    for (const Pending& p : pending) pf.push_back({p.fd.get(), POLLIN, 0});
    if (::poll(pf.data(), pf.size(), static_cast<int>(std::min<long>(left, 1000))) < 0) {
      if (errno == EINTR) continue;
      return io_error("poll", errno);
    }
    // Backwards, so that erasing keeps the indices of those not seen yet.
    for (size_t i = pending.size(); i-- > 0;) {
      if (!pf[i + 1].revents) continue;
      Pending& p = pending[i];
      char buf[256];
      const ssize_t n = ::recv(p.fd.get(), buf, std::min(sizeof buf, hello_bytes - p.got.size()), MSG_DONTWAIT);
      if (n < 0 && (errno == EAGAIN || errno == EINTR)) continue;
      if (n <= 0) {
        drop(n == 0 ? "a connection closed before its hello" : fmt::format("a connection failed: {}", std::strerror(errno)));
        pending.erase(pending.begin() + static_cast<long>(i));
        continue;
      }
      p.got.append(buf, static_cast<size_t>(n));
      if (p.got.size() < hello_bytes) continue;
      WEFT_RETURN_IF_ERROR(set_blocking(p.fd.get()));
      if (std::string why = take(p.fd, p.got.data()); why.empty()) {
        ++kept;
      } else {
        drop(std::move(why));
      }
      pending.erase(pending.begin() + static_cast<long>(i));
    }
    if (pf[0].revents & POLLIN) {
      const int fd = ::accept4(listen_fd, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
      if (fd >= 0 && pending.size() < kMaxPending) {
        pending.push_back({Fd(fd), {}});
      } else if (fd >= 0) {
        Fd closed(fd);
        drop(fmt::format("more than {} connections without a hello", kMaxPending));
      } else if (errno != EINTR && errno != EAGAIN && errno != ECONNABORTED) {
        return io_error("accept", errno);
      }
    }
  }
  // Whatever is still pending is no peer of this job: every peer was kept.
  for (size_t i = 0; i < pending.size(); ++i) drop("a connection with no hello");
  return ok_status();
}

}  // namespace weft::coll::tcp
