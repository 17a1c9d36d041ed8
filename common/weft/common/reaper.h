// Reaper: a process that runs a cleanup command if its owner dies before
// saying it is done — SIGKILL, a crash, the OOM killer, a test runner's
// timeout — so that what the owner built outside itself (network namespaces,
// processes in them, a work directory) never outlives it.
//
//   auto reaper = weft::Reaper::start("ip netns del demo-1; rm -rf /tmp/demo-1").value();
//   ... build, run ...
//   teardown();                  // the owner cleans up itself, then
//   reaper.done();               // (or ~Reaper) the reaper exits without running it
//
// How: a forked child in its own session (a kill of the owner's process
// group misses it) with SIGINT/SIGTERM/SIGHUP ignored blocks reading a pipe
// whose write end only the owner holds (close-on-exec, so the owner's own
// children do not keep it open). EOF without the byte 'D' means the owner is
// gone: it execs `sh -c command`.
#pragma once

#include <sys/types.h>

#include <string>

#include "weft/common/status.h"

namespace weft {

class Reaper {
 public:
  static Result<Reaper> start(const std::string& shell_command);
  Reaper() = default;
  Reaper(Reaper&& o) noexcept;
  Reaper& operator=(Reaper&& o) noexcept;
  Reaper(const Reaper&) = delete;
  Reaper& operator=(const Reaper&) = delete;
  ~Reaper() { done(); }

  // The owner cleaned up: the reaper exits without running the command (and
  // is waited for). Idempotent.
  void done();
  pid_t pid() const { return pid_; }

 private:
  int fd_ = -1;
  pid_t pid_ = -1;
};

}  // namespace weft
