// Reaper (reaper.h).
#include "weft/common/reaper.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <utility>

namespace weft {

Result<Reaper> Reaper::start(const std::string& shell_command) {
  int p[2];
  if (::pipe(p) != 0) return io_error("pipe", errno);
  const pid_t r = ::fork();
  if (r < 0) {
    const int err = errno;
    ::close(p[0]);
    ::close(p[1]);
    return io_error("fork", err);
  }
  if (r == 0) {
    ::setsid();
    for (int s : {SIGINT, SIGTERM, SIGHUP}) ::signal(s, SIG_IGN);  // only the pipe decides
    for (int fd = 3; fd < 1024; ++fd) {
      if (fd != p[0]) ::close(fd);
    }
    char c = 0;
    ssize_t n;
    do {
      n = ::read(p[0], &c, 1);
    } while (n < 0 && errno == EINTR);
    if (n == 1 && c == 'D') ::_exit(0);
    ::execl("/bin/sh", "sh", "-c", shell_command.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  ::close(p[0]);
  ::fcntl(p[1], F_SETFD, FD_CLOEXEC);
  Reaper reaper;
  reaper.fd_ = p[1];
  reaper.pid_ = r;
  return reaper;
}

Reaper::Reaper(Reaper&& o) noexcept : fd_(std::exchange(o.fd_, -1)), pid_(std::exchange(o.pid_, -1)) {}

Reaper& Reaper::operator=(Reaper&& o) noexcept {
  if (this != &o) {
    done();
    fd_ = std::exchange(o.fd_, -1);
    pid_ = std::exchange(o.pid_, -1);
  }
  return *this;
}

void Reaper::done() {
  if (fd_ < 0) return;
  const char d = 'D';
  (void)!::write(fd_, &d, 1);
  ::close(fd_);
  fd_ = -1;
  ::waitpid(pid_, nullptr, 0);
  pid_ = -1;
}

}  // namespace weft
