// A file descriptor that closes itself (RAII for every handle).
#pragma once

#include <sys/socket.h>
#include <unistd.h>

#include <utility>

namespace weft::probe {

class UniqueFd {
 public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) : fd_(fd) {}
  UniqueFd(UniqueFd&& o) noexcept : fd_(std::exchange(o.fd_, -1)) {}
  UniqueFd& operator=(UniqueFd&& o) noexcept {
    if (this != &o) reset(std::exchange(o.fd_, -1));
    return *this;
  }
  ~UniqueFd() { reset(); }
  void reset(int fd = -1) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = fd;
  }
  int get() const { return fd_; }
  explicit operator bool() const { return fd_ >= 0; }

 private:
  int fd_ = -1;
};

// A receive buffer big enough for a burst of answers from every peer at once.
// SO_RCVBUF is capped by net.core.rmem_max (208 KiB by default: ~300 probe
// datagrams, less than one sweep window's answers); SO_RCVBUFFORCE passes the
// cap with CAP_NET_ADMIN (socket(7)). Without it we keep the capped size.
inline void set_rcvbuf(int fd, int bytes) {
  if (::setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &bytes, sizeof bytes) != 0) {
    ::setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &bytes, sizeof bytes);
  }
}

}  // namespace weft::probe
