// 500 strangers holding pre-authentication frames open at a real `weft agent`
// process: the agent's resident
// memory stays under 64 MiB and the real controller still gets in and
// completes its campaign.
#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "loopback.h"
#include "weft/db/stores.h"

namespace weft::agent::testing {
namespace {

using nlohmann::json;

std::string slurp(const std::string& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// VmRSS of `pid` in KiB (proc(5)), or -1.
long rss_kib(pid_t pid) {
  std::ifstream in(fmt::format("/proc/{}/status", pid));
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::stol(line.substr(6));
  }
  return -1;
}

// A `weft agent` child on `ip`, killed and reaped on destruction.
class AgentProcess {
 public:
  AgentProcess(const std::string& dir, const std::string& ip, uint16_t udp_port, std::vector<std::string> extra)
      : log_(dir + "/agent.log") {
    const std::string secret = dir + "/secret";
    {
      std::ofstream(secret) << "the loopback test's shared secret\n";
      ::chmod(secret.c_str(), 0600);
    }
    std::vector<std::string> argv = {std::string(WEFT_BINARY_DIR) + "/weft", "agent", "--secret-file", secret, "--ip",
                                     ip, "--name", "a", "--udp-port", std::to_string(udp_port)};
    argv.insert(argv.end(), extra.begin(), extra.end());
    pid_ = ::fork();
    if (pid_ == 0) {
      const int fd = ::open(log_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
      ::dup2(fd, 2);
      std::vector<char*> args;
      for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
      args.push_back(nullptr);
      ::execv(args[0], args.data());
      ::_exit(127);
    }
    for (int i = 0; i < 500 && port_ == 0; ++i) {  // up to 10 s: the ASan build starts slowly
      const std::string text = slurp(log_);
      if (auto at = text.find("control on " + ip + ":"); at != std::string::npos) {
        port_ = static_cast<uint16_t>(std::stoi(text.substr(at + 12 + ip.size())));
      } else {
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      }
    }
  }
  ~AgentProcess() {
    if (pid_ > 0) {
      ::kill(pid_, SIGTERM);
      int st = 0;
      ::waitpid(pid_, &st, 0);
    }
  }
  pid_t pid() const { return pid_; }
  uint16_t port() const { return port_; }
  std::string log() const { return slurp(log_); }

 private:
  std::string log_;
  pid_t pid_ = -1;
  uint16_t port_ = 0;
};

TEST(StrangerLoadTest, FiveHundredStrangersNeitherBloatTheAgentNorLockOutTheController) {
  rlimit nofile{};
  ::getrlimit(RLIMIT_NOFILE, &nofile);
  if (nofile.rlim_cur < 2048 && nofile.rlim_max >= 2048) {
    nofile.rlim_cur = 2048;
    ::setrlimit(RLIMIT_NOFILE, &nofile);
  }
  const std::string dir = fmt::format("/tmp/weft-stranger-test-{}", ::getpid());
  ::mkdir(dir.c_str(), 0700);
  const uint16_t udp = free_udp_port();
  {
    AgentProcess a(dir, "127.0.0.1", udp, {"--listen", "127.0.0.1:0"});
    ASSERT_GT(a.port(), 0) << a.log();
    auto b = LoopbackAgent::start("127.0.0.2", udp);
    ASSERT_TRUE(b);
    const long idle_kib = rss_kib(a.pid());

    // 50 source addresses x 10 connections. Half hold a maximal pre-auth
    // frame one byte short of complete; half announce the largest
    // authenticated frame (4 MiB) and send 4 KiB of it, which an agent that
    // read it before authentication would have to buffer.
    std::vector<std::unique_ptr<Client>> strangers;
    for (int i = 0; i < 500; ++i) {
      strangers.push_back(std::make_unique<Client>("127.0.0.1", a.port(), fmt::format("127.0.1.{}", 1 + i % 50)));
      ASSERT_TRUE(strangers.back()->connected()) << i;
      const uint32_t n = i % 2 ? kMaxFrame : kMaxPreAuthFrame;
      std::string f = {static_cast<char>(n >> 24), static_cast<char>(n >> 16 & 0xff), static_cast<char>(n >> 8 & 0xff),
                       static_cast<char>(n & 0xff)};
      f += std::string(i % 2 ? 4096 : kMaxPreAuthFrame - 1, 'x');
      strangers.back()->send_raw(f);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    const long loaded_kib = rss_kib(a.pid());
    EXPECT_LT(loaded_kib, 64 * 1024) << "idle " << idle_kib << " KiB";

    const std::string db_path = dir + "/fabric.db";
    {
      auto db = db::Database::open(db_path);
      ASSERT_TRUE(db);
      ProbeRunConfig cfg;
      cfg.sport_count = 8;
      cfg.rate_pps = 2000;
      cfg.timeout_ms = 100;
      cfg.retries = 0;
      const std::vector<HostEntry> hosts = {{"a", "127.0.0.1", a.port()}, {"b", "127.0.0.2", b->port()}};
      auto sum = run_probe(*db, hosts, test_secret(), cfg);
      ASSERT_TRUE(sum) << sum.status().to_string() << "\n" << a.log();
      EXPECT_EQ(sum->flows_total, 2 * 8);
    }
    Client admin("127.0.0.1", a.port(), "127.0.0.1");
    ASSERT_TRUE(admin.authenticate(test_secret(), {0x7f000001}));
    admin.send({{"type", "status"}});
    const json st = admin.read();
    EXPECT_LE(st.value("strangers", 1000), 128);
    EXPECT_EQ(st["control_rejected"].value("oversize", 0), 250) << "refused before reading";
    EXPECT_GE(st["control_rejected"].value("evicted", 0), 250 - 128);
    EXPECT_LT(rss_kib(a.pid()), 64 * 1024);
    fmt::print("agent RSS: {} KiB idle, {} KiB with 500 strangers, {} KiB after the campaign; {} evicted\n", idle_kib,
               loaded_kib, rss_kib(a.pid()), st["control_rejected"].value("evicted", 0));
  }
  for (const char* f : {"/secret", "/agent.log", "/fabric.db", "/fabric.db-wal", "/fabric.db-shm"}) {
    std::remove((dir + f).c_str());
  }
  ::rmdir(dir.c_str());
}

// Without --listen the control port is the --ip address's port 7400, not
// every interface's.
TEST(AgentProcessTest, ListensOnTheIpAddressByDefault) {
  const std::string dir = fmt::format("/tmp/weft-listen-test-{}", ::getpid());
  ::mkdir(dir.c_str(), 0700);
  {
    AgentProcess a(dir, "127.0.0.9", free_udp_port(), {});
    ASSERT_EQ(a.port(), 7400) << a.log();
    Client c("127.0.0.9", 7400);
    EXPECT_EQ(c.hello().value("type", ""), "hello");
    std::ifstream tcp("/proc/net/tcp");  // proc(5): local address in hex, state 0A = LISTEN
    std::string line;
    int listening = 0;
    while (std::getline(tcp, line)) {
      if (line.find(":1CE8 ") != std::string::npos && line.find(" 0A ") != std::string::npos) {
        EXPECT_NE(line.find("0900007F:1CE8"), std::string::npos) << "port 7400 listens beyond 127.0.0.9: " << line;
        ++listening;
      }
    }
    EXPECT_GE(listening, 1);
  }
  for (const char* f : {"/secret", "/agent.log"}) std::remove((dir + f).c_str());
  ::rmdir(dir.c_str());
}

}  // namespace
}  // namespace weft::agent::testing
