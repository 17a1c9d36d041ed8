#include "loopback_agents.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <thread>

#include <fmt/format.h>
#include "../scratch_name.h"

namespace weft::test {

Child::Child(const std::vector<std::string>& argv, const std::string& out, const std::string& err) {
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_ = ::fork();
  if (pid_ == 0) {
    if (!std::freopen(out.c_str(), "w", stdout) || !std::freopen(err.c_str(), "w", stderr)) ::_exit(126);
    ::execv(args[0], args.data());
    ::_exit(127);
  }
}

Child::~Child() {
  if (pid_ > 0 && !reaped_) {
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
  }
}

void Child::signal(int sig) const {
  if (pid_ > 0 && !reaped_) ::kill(pid_, sig);
}

int Child::wait(int timeout_ms) {
  int status = -1;
  const bool ended = wait_until([&] { return ::waitpid(pid_, &status, WNOHANG) == pid_; }, timeout_ms);
  if (!ended) return -1;
  reaped_ = true;
  return status;
}

std::string slurp(const std::string& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

bool wait_until(const std::function<bool()>& done, int timeout_ms) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  for (;;) {
    if (done()) return true;
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

uint16_t free_port(int type) {
  const int fd = ::socket(AF_INET, type, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  uint16_t port = 0;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0) {
    port = ntohs(a.sin_port);
  }
  ::close(fd);
  return port;
}

void LoopbackAgents::SetUp() {
  dir_ = "/tmp/" + weft::test::scratch_name("weft-agents");
  std::filesystem::remove_all(dir_);
  std::filesystem::create_directories(dir_);
  write("secret", fmt::format("weft-loopback-secret-{}\n", ::getpid()));
  ::chmod(path("secret").c_str(), 0600);
  udp_port_ = free_port(SOCK_DGRAM);
  ASSERT_NE(udp_port_, 0);
}

std::string LoopbackAgents::ip(int i) const {
  const int pid = ::getpid();
  return fmt::format("127.{}.{}.{}", 1 + pid / 250 % 250, pid % 250, i + 1);
}

void LoopbackAgents::TearDown() {
  for (auto& a : agents_) a.reset();
  std::filesystem::remove_all(dir_);
}

void LoopbackAgents::write(const std::string& name, const std::string& text) const {
  std::ofstream(path(name)) << text;
}

void LoopbackAgents::write_config(int i, const std::string& extra, uint16_t udp_port) const {
  write(fmt::format("agent{}.toml", i),
        fmt::format("# agent {}\nsecret-file = \"{}\"\nip = \"{}\"\nlisten = \"{}:0\"\n"
                    "name = \"a{}\"\nudp-port = {}\nmetrics = \"127.0.0.1:0\"\n{}",
                    i, path("secret"), ip(i), ip(i), i, udp_port ? udp_port : udp_port_, extra));
}

void LoopbackAgents::start_agent(int i, const std::vector<std::string>& args) {
  std::vector<std::string> argv = {std::string(WEFT_BINARY_DIR) + "/weft", "agent", "--config",
                                   path(fmt::format("agent{}.toml", i))};
  argv.insert(argv.end(), args.begin(), args.end());
  const std::string logf = path(fmt::format("agent{}.log", i));
  agents_[i] = std::make_unique<Child>(argv, path(fmt::format("agent{}.out", i)), logf);
  std::smatch m;
  std::string l;  // m points into it
  const std::regex control(R"(control on 127\.\d+\.\d+\.\d+:(\d+))"), metrics(R"(metrics on http://127\.0\.0\.1:(\d+)/)");
  ASSERT_TRUE(wait_until([&] { l = slurp(logf); return std::regex_search(l, m, control); }, 20000))
      << "agent " << i << " did not start: " << slurp(logf);
  control_port_[i] = static_cast<uint16_t>(std::stoi(m[1]));
  metrics_port_[i] = std::regex_search(l, m, metrics) ? static_cast<uint16_t>(std::stoi(m[1])) : 0;
}

void LoopbackAgents::write_hosts() const {
  std::string hosts;
  for (int i = 0; i < kAgents; ++i) hosts += fmt::format("a{} {} {}\n", i, ip(i), control_port_[i]);
  write("hosts", hosts);
}

std::unique_ptr<Child> LoopbackAgents::start_probe(const std::string& args, const std::string& secret) {
  write_hosts();
  std::vector<std::string> argv = {std::string(WEFT_BINARY_DIR) + "/weft", "probe", "-q", "--hosts", path("hosts"),
                                   "--secret-file", path(secret), "--db", path("fabric.db"), "--dport",
                                   std::to_string(udp_port_), "--sport-first", "21000"};
  std::istringstream in(args);
  for (std::string w; in >> w;) argv.push_back(w);
  ++probes_;
  return std::make_unique<Child>(argv, path(fmt::format("probe{}.out", probes_)),
                                 path(fmt::format("probe{}.err", probes_)));
}

bool LoopbackAgents::Probe::ok() const { return status >= 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0; }

LoopbackAgents::Probe LoopbackAgents::probe(const std::string& args, const std::string& secret, int timeout_ms) {
  auto c = start_probe(args, secret);
  Probe p;
  p.status = c->wait(timeout_ms);
  p.out = slurp(path(fmt::format("probe{}.out", probes_)));
  p.err = slurp(path(fmt::format("probe{}.err", probes_)));
  return p;
}

}  // namespace weft::test
