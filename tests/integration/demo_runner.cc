// demo_runner.h: `weft demo` as a child process of a test.
#include "demo_runner.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <thread>

#include <fmt/format.h>

#include "weft/common/file_util.h"
#include "../scratch_name.h"

namespace weft::test {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

// Starts `weft demo ARGS` with stdout/stderr to files in `dir`.
Demo start_demo(const std::string& dir, const std::vector<std::string>& args) {
  Demo d{-1, dir + "/demo.out", dir + "/demo.err"};
  std::vector<std::string> argv = {std::string(WEFT_BINARY_DIR) + "/weft", "demo"};
  argv.insert(argv.end(), args.begin(), args.end());
  d.pid = ::fork();
  if (d.pid == 0) {
    if (!std::freopen(d.out.c_str(), "w", stdout) || !std::freopen(d.err.c_str(), "w", stderr)) ::_exit(127);
    std::vector<char*> a;
    for (auto& s : argv) a.push_back(s.data());
    a.push_back(nullptr);
    ::execv(a[0], a.data());
    ::_exit(127);
  }
  return d;
}

// waitpid with a deadline; kills (SIGKILL) and fails the test on timeout.
int wait_for(pid_t pid, std::chrono::seconds limit) {
  const auto deadline = Clock::now() + limit;
  for (;;) {
    int st = 0;
    if (::waitpid(pid, &st, WNOHANG) == pid) return st;
    if (Clock::now() > deadline) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &st, 0);
      ADD_FAILURE() << "weft demo did not end within " << limit.count() << " s";
      return -1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

std::string slurp(const std::string& path) {
  auto text = read_file(path);
  return text ? *text : std::string();
}

// The 1-, 5- and 15-minute load averages (proc(5)): the bandwidth figures
// assume the CPU the kernel forwards with; a failure under a load far above
// the core count says the machine was shared, not that the plan was wrong.
std::string load_average() {
  const std::string l = slurp("/proc/loadavg");
  size_t end = 0;
  for (int field = 0; field < 3 && end != std::string::npos; ++field) end = l.find(' ', end + (field ? 1 : 0));
  return fmt::format("load average {} on {} cores", l.substr(0, end), std::thread::hardware_concurrency());
}

// Waits until the file contains `text` (or the process ended, or time ran out).
bool wait_for_text(const std::string& path, const std::string& text, pid_t pid, std::chrono::seconds limit) {
  const auto deadline = Clock::now() + limit;
  while (Clock::now() < deadline) {
    if (slurp(path).find(text) != std::string::npos) return true;
    if (::waitpid(pid, nullptr, WNOHANG) == pid) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return false;
}

std::vector<std::string> namespaces_with(const std::string& prefix) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator("/run/netns")) {
    if (e.path().filename().string().rfind(prefix, 0) == 0) out.push_back(e.path().filename().string());
  }
  return out;
}

// Processes whose command line mentions `marker` (every process the demo
// starts names its work directory: agents' secret, workers' --dir, probe's db).
std::vector<pid_t> processes_with(const std::string& marker) {
  std::vector<pid_t> out;
  for (const auto& e : fs::directory_iterator("/proc")) {
    const std::string name = e.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::string cmd = slurp(e.path().string() + "/cmdline");
    std::replace(cmd.begin(), cmd.end(), '\0', ' ');
    if (cmd.find(marker) != std::string::npos && std::stoi(name) != ::getpid()) {
      out.push_back(std::stoi(name));
    }
  }
  return out;
}

// Everything gone: namespaces and processes. The reaper may still be at it
// (its own shell and the fabric script's `down` name the work directory
// too, and `down` removes the state directory after the last namespace):
// wait a little for both.
void expect_clean(const std::string& prefix, const std::string& marker, const std::string& owned_dir) {
  const auto deadline = Clock::now() + std::chrono::seconds(30);
  while ((!namespaces_with(prefix).empty() || !processes_with(marker).empty()) && Clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  EXPECT_EQ(namespaces_with(prefix), std::vector<std::string>{}) << "namespaces left behind";
  EXPECT_EQ(processes_with(marker), std::vector<pid_t>{}) << "processes left behind";
  if (!owned_dir.empty()) {
    EXPECT_FALSE(fs::exists(owned_dir)) << "the demo's own work dir is gone";
  }
}

std::string test_dir() {
  const std::string d = "/tmp/" + scratch_name("weft-demo-test");
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

}  // namespace weft::test
