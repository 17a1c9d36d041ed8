// Ranks as processes for tests: fork, run, wait with a deadline; on timeout
// or when the test is done, kill the children this test forked (by PID,
// nothing else) and remove the store directory.
#pragma once

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

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

  Children() {
    char tmpl[] = "/tmp/weft-test-XXXXXX";
    if (::mkdtemp(tmpl)) dir = tmpl;
  }
  ~Children() {
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
};

}  // namespace weft::coll::testing
