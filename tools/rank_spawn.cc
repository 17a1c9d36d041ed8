#include "rank_spawn.h"

#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <thread>
#include <vector>

#include "cli_common.h"

namespace weft::cli {

int spawn_ranks(int ranks, std::chrono::seconds timeout, const std::function<int(int, const std::string&)>& rank_fn,
                const std::function<int(const std::string&)>& collect) {
  char tmpl[] = "/tmp/weft-bench-XXXXXX";
  if (!::mkdtemp(tmpl)) return fail(io_error("mkdtemp", errno));
  const std::string dir = tmpl;
  std::fflush(stdout);
  std::vector<pid_t> kids;
  int rc = 0;
  for (int r = 0; r < ranks && rc == 0; ++r) {
    pid_t pid = ::fork();
    if (pid < 0) {
      rc = fail(io_error("fork", errno));
      break;
    }
    if (pid == 0) ::_exit(rank_fn(r, dir));
    kids.push_back(pid);
  }
  if (rc) {
    for (pid_t k : kids) ::kill(k, SIGKILL);
  }
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  size_t alive = kids.size();
  while (alive > 0) {
    int status = 0;
    pid_t done = ::waitpid(-1, &status, WNOHANG);
    if (done > 0) {
      --alive;
      // A rank that exits non-zero said why; one a signal killed could not
      // (SIGBUS, SIGSEGV): say which, unless this process killed it.
      if (WIFSIGNALED(status) && rc == 0) {
        const auto r = std::find(kids.begin(), kids.end(), done) - kids.begin();
        std::fprintf(stderr, "weft: rank %d (pid %d) was killed by signal %d (%s)\n", static_cast<int>(r),
                     static_cast<int>(done), WTERMSIG(status), ::strsignal(WTERMSIG(status)));
      }
      if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        if (rc == 0) {
          for (pid_t k : kids) ::kill(k, SIGKILL);
        }
        rc = 1;
      }
      continue;
    }
    if (rc == 0 && std::chrono::steady_clock::now() > deadline) {
      for (pid_t k : kids) ::kill(k, SIGKILL);
      rc = fail(deadline_exceeded("bench ranks did not finish in time"));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  if (rc == 0 && collect) rc = collect(dir);
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
  return rc;
}

}  // namespace weft::cli
