// Two `weft agent` processes on loopback (127.B.C.1 and 127.B.C.2, B.C from
// the test's PID so that tests running at the same time bind different
// addresses; a reflector each on one free UDP port) started from TOML config
// files, and `weft probe` between them: a campaign without namespaces or root.
// Every child is killed by its PID and reaped when the fixture ends, also when
// a test fails.
#pragma once

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "http_get.h"  // http_get, prometheus_sample: the tests scrape agents
#include "weft/common/status.h"

namespace weft::test {

// A child process: argv[0] run with stdout and stderr to files.
class Child {
 public:
  Child(const std::vector<std::string>& argv, const std::string& out, const std::string& err);
  ~Child();  // SIGKILL and reap, unless it was reaped already
  Child(const Child&) = delete;
  Child& operator=(const Child&) = delete;
  pid_t pid() const { return pid_; }
  void signal(int sig) const;
  // The waitpid status, or -1 when it did not end within timeout_ms.
  int wait(int timeout_ms);

 private:
  pid_t pid_ = -1;
  bool reaped_ = false;
};

std::string slurp(const std::string& path);
// Polls `done` every 20 ms until it holds or timeout_ms passes.
bool wait_until(const std::function<bool()>& done, int timeout_ms);
// A port no socket of `type` (SOCK_STREAM, SOCK_DGRAM) on 127.0.0.1 holds now.
uint16_t free_port(int type);

class LoopbackAgents : public ::testing::Test {
 protected:
  static constexpr int kAgents = 2;
  void SetUp() override;
  void TearDown() override;

  std::string path(const std::string& name) const { return dir_ + "/" + name; }
  // Agent i's address.
  std::string ip(int i) const;
  void write(const std::string& name, const std::string& text) const;
  // Agent i's config file: the keys every agent needs and `extra` TOML lines;
  // udp_port 0 = the fixture's.
  void write_config(int i, const std::string& extra = "", uint16_t udp_port = 0) const;
  // Starts agent i from its config file (and `args`), waits for its control port.
  void start_agent(int i, const std::vector<std::string>& args = {});
  std::string log(int i) const { return slurp(path("agent" + std::to_string(i) + ".log")); }
  // Writes the hosts file from the agents' control ports.
  void write_hosts() const;
  // Starts `weft probe` over both agents (with `secret` and ARGS). Source
  // ports start at 21000, below the ephemeral range (ip_local_port_range),
  // where no connection of the machine can hold one.
  std::unique_ptr<Child> start_probe(const std::string& args, const std::string& secret = "secret");
  struct Probe {
    int status = -1;
    std::string out, err;
    bool ok() const;
  };
  Probe probe(const std::string& args, const std::string& secret = "secret", int timeout_ms = 30000);

  std::string dir_;
  uint16_t udp_port_ = 0;
  std::unique_ptr<Child> agents_[kAgents];
  uint16_t control_port_[kAgents] = {};
  uint16_t metrics_port_[kAgents] = {};
  int probes_ = 0;
};

}  // namespace weft::test
