// Runs a check in a forked child (which may unshare namespaces or change
// what only that process should see) and returns the one-character verdict
// it reports through a pipe, or an error naming how the child died.
//
//   auto v = verdict_in_child([] { return ::unshare(CLONE_NEWNET) == 0 ? 'y' : 'n'; });
//   ASSERT_TRUE(v) << v.status().message();
//   EXPECT_EQ(*v, 'y');
//
// Fork only where no other thread of the test runs (glibc's malloc survives
// fork; other locks might not).
#pragma once

#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <functional>

#include <fmt/format.h>

#include "weft/common/status.h"

namespace weft::coll::testing {

inline Result<char> verdict_in_child(const std::function<char()>& check) {
  int pipe_fds[2];
  if (::pipe(pipe_fds) != 0) return io_error("pipe", errno);
  const pid_t child = ::fork();
  if (child == 0) {
    const char verdict = check();
    (void)!::write(pipe_fds[1], &verdict, 1);
    ::_exit(0);
  }
  ::close(pipe_fds[1]);
  char verdict = 0;
  const bool got = child > 0 && ::read(pipe_fds[0], &verdict, 1) == 1;
  ::close(pipe_fds[0]);
  int status = 0;
  if (child > 0) ::waitpid(child, &status, 0);
  if (child < 0) return io_error("fork", errno);
  if (!got) {
    return internal_error(WIFSIGNALED(status) ? fmt::format("the child died of signal {}", WTERMSIG(status))
                                              : fmt::format("the child exited ({}) without a verdict", status));
  }
  return verdict;
}

}  // namespace weft::coll::testing
