// Running `weft demo` from a test: the process, its output, and what it
// must leave behind (nothing). Shared by the demo netns tests.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <string>
#include <vector>

namespace weft::test {

struct Demo {
  pid_t pid = -1;
  std::string out, err;  // files
};

// Starts `weft demo ARGS` with stdout/stderr to files in `dir`.
Demo start_demo(const std::string& dir, const std::vector<std::string>& args);
// waitpid with a deadline; kills (SIGKILL) and fails the test on timeout.
int wait_for(pid_t pid, std::chrono::seconds limit);
std::string slurp(const std::string& path);
// The 1-, 5- and 15-minute load averages (proc(5)): the bandwidth figures
// assume the CPU the kernel forwards with; a failure under a load far above
// the core count says the machine was shared, not that the plan was wrong.
std::string load_average();
// Waits until the file contains `text` (or the process ended, or time ran out).
bool wait_for_text(const std::string& path, const std::string& text, pid_t pid, std::chrono::seconds limit);
std::vector<std::string> namespaces_with(const std::string& prefix);
// Processes whose command line mentions `marker` (every process the demo
// starts names its work directory: agents' secret, workers' --dir, probe's db).
std::vector<pid_t> processes_with(const std::string& marker);
// Everything gone: namespaces (the reaper may still be at it: wait a little),
// processes, and the demo's own work directory when it made one.
void expect_clean(const std::string& prefix, const std::string& marker, const std::string& owned_dir = "");
// A fresh directory for this test.
std::string test_dir();

}  // namespace weft::test
