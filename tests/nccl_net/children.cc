#include "children.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <thread>

#include "../verbs/verbs_env.h"
#include "weft/verbs/device.h"

namespace weft::nccl_net::testing {

Children fork_children(int n, const std::function<int(int, std::uint16_t)>& child) {
  Children c;
  for (int i = 0; i < n; ++i) {
    int fds[2];
    if (pipe(fds) != 0) std::abort();
    std::fflush(nullptr);  // nothing buffered is written twice
    pid_t pid = fork();
    if (pid == 0) {
      close(fds[1]);
      std::uint16_t port = 0;
      if (read(fds[0], &port, sizeof(port)) != sizeof(port)) _exit(3);
      int code = child(i, port);
      std::fflush(nullptr);
      _exit(code);
    }
    close(fds[0]);
    c.pids.push_back(pid);
    c.pipes.push_back(fds[1]);
  }
  return c;
}

std::vector<int> release_and_wait(Children& c, std::uint16_t port, std::chrono::seconds timeout) {
  for (int fd : c.pipes) {
    if (write(fd, &port, sizeof(port)) != sizeof(port)) std::perror("write");
    close(fd);
  }
  std::vector<int> codes(c.pids.size(), -1);
  const auto end = std::chrono::steady_clock::now() + timeout;
  std::size_t left = c.pids.size();
  while (left > 0) {
    for (std::size_t i = 0; i < c.pids.size(); ++i) {
      if (codes[i] != -1) continue;
      int st = 0;
      if (waitpid(c.pids[i], &st, WNOHANG) == c.pids[i]) {
        codes[i] = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
        --left;
      }
    }
    if (left > 0 && std::chrono::steady_clock::now() > end) {
      for (std::size_t i = 0; i < c.pids.size(); ++i) {
        if (codes[i] == -1) {
          kill(c.pids[i], SIGKILL);
          waitpid(c.pids[i], nullptr, 0);
          codes[i] = 124;
        }
      }
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return codes;
}

std::string ip_of(const std::string& device) {
  auto d = verbs::Device::open(verbs::testing::device_named(device));
  return d ? d->gid().ipv4() : "";
}

}  // namespace weft::nccl_net::testing
