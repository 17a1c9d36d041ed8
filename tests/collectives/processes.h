// Ranks as processes for tests: fork, run, wait with a deadline; on timeout
// or when the test is done, kill the children this test forked (by PID,
// nothing else) and remove the store directory. A pipe lets the children
// say when they are ready (connected and calling), so that a fault test
// strikes then instead of after a guessed sleep.
#pragma once

#include <gtest/gtest.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <string>
#include <thread>
#include <vector>

namespace weft::coll::testing {

struct Children {
  std::vector<pid_t> pids;
  std::string dir;  // file store directory shared by the ranks
  std::vector<int> status;

  int ready[2] = {-1, -1};    // children write a byte each when ready
  int results[2] = {-1, -1};  // children write a Result each (fault tests)

  struct Result {
    int rank;
    double ms;  // e.g. how long the failing call took
  };

  Children() {
    char tmpl[] = "/tmp/weft-test-XXXXXX";
    if (::mkdtemp(tmpl)) dir = tmpl;
    if (::pipe(ready) != 0) ready[0] = ready[1] = -1;
    if (::pipe2(results, O_NONBLOCK) != 0) results[0] = results[1] = -1;
  }
  ~Children() {
    for (int fd : {ready[0], ready[1], results[0], results[1]}) {
      if (fd >= 0) ::close(fd);
    }
    for (size_t i = 0; i < pids.size(); ++i) {
      if (status[i] == -1) {
        ::kill(pids[i], SIGKILL);
        ::waitpid(pids[i], nullptr, 0);
      }
    }
    std::error_code ec;
    if (!dir.empty()) std::filesystem::remove_all(dir, ec);
  }
  // Forks `n` ranks running body(rank) -> exit code.
  void start(int n, const std::function<int(int)>& body) {
    std::fflush(stdout);
    std::fflush(stderr);
    for (int r = 0; r < n; ++r) {
      pid_t pid = ::fork();
      if (pid == 0) {
        int rc = 99;
        try {
          rc = body(r);
        } catch (...) {
        }
        std::fflush(stderr);
        ::_exit(rc);
      }
      pids.push_back(pid);
      status.push_back(-1);
    }
  }
  // Waits for rank r; -1 if it did not exit before the deadline.
  int wait(size_t r, std::chrono::steady_clock::time_point deadline) {
    while (status[r] == -1) {
      int st = 0;
      pid_t p = ::waitpid(pids[r], &st, WNOHANG);
      if (p == pids[r]) {
        status[r] = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
        break;
      }
      if (std::chrono::steady_clock::now() > deadline) return -1;
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    return status[r];
  }
  void kill_rank(size_t r, int sig) { ::kill(pids[r], sig); }
  // In a child: this rank is ready.
  void signal_ready() const { (void)!::write(ready[1], "r", 1); }
  // In a child: one result (a pipe write of this size is atomic, pipe(7)).
  void send_result(int rank, double ms) const {
    const Result r{rank, ms};
    (void)!::write(results[1], &r, sizeof r);
  }
  // In the parent: the results sent so far.
  std::vector<Result> read_results() const {
    std::vector<Result> out;
    Result r;
    while (::read(results[0], &r, sizeof r) == static_cast<ssize_t>(sizeof r)) out.push_back(r);
    return out;
  }
  // In the parent: true once `n` children said they are ready.
  bool wait_ready(int n, std::chrono::steady_clock::time_point deadline) const {
    for (int got = 0; got < n;) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) return false;
      pollfd pf{ready[0], POLLIN, 0};
      if (::poll(&pf, 1, static_cast<int>(left.count())) != 1) continue;
      char buf[64];
      const ssize_t k = ::read(ready[0], buf, std::min<size_t>(sizeof buf, static_cast<size_t>(n - got)));
      if (k > 0) got += static_cast<int>(k);
    }
    return true;
  }
};

}  // namespace weft::coll::testing
