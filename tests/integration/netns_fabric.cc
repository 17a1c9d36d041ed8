// NetnsFabric: see netns_fabric.h. Shell plumbing is deliberately plain
// (system(3) with files) — these are tests, and the script is the interface.
#include "netns_fabric.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include <fmt/format.h>
#include "weft/common/ipv4.h"

namespace weft::test {
namespace {

namespace fs = std::filesystem;

const std::string kScript = std::string(WEFT_SOURCE_DIR) + "/scripts/netns-fabric.sh";

std::string shell_quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

std::string slurp(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace

Status enter_netns(const std::string& ns) {
  const int fd = ::open(("/run/netns/" + ns).c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return io_error("/run/netns/" + ns, errno);
  const int rc = ::setns(fd, CLONE_NEWNET);
  const int err = errno;
  ::close(fd);
  return rc == 0 ? ok_status() : io_error("setns " + ns, err);
}

std::string netns_unavailable_reason() {
  if (::geteuid() != 0) return "needs root (network namespaces, veth, nftables)";
  for (const char* tool : {"/usr/sbin/ip", "/usr/sbin/nft", "/usr/bin/nsenter"}) {
    if (::access(tool, X_OK) != 0 && ::access((std::string("/bin/") + fs::path(tool).filename().string()).c_str(), X_OK) != 0) {
      return fmt::format("{} not found (install iproute2, nftables, util-linux)", tool);
    }
  }
  if (::access(kScript.c_str(), R_OK) != 0) return "missing " + kScript;
  return "";
}

Result<std::string> run_shell(const std::string& cmd, const std::string& stdin_text, int timeout_s) {
  static int counter = 0;
  const fs::path dir = fs::temp_directory_path() / fmt::format("weft-sh-{}-{}", ::getpid(), counter++);
  fs::create_directories(dir);
  std::ofstream(dir / "in") << stdin_text;
  const std::string full = fmt::format("timeout -s KILL {} sh -c {} <{} >{} 2>{}", timeout_s, shell_quote(cmd),
                                       (dir / "in").string(), (dir / "out").string(), (dir / "err").string());
  const int rc = std::system(full.c_str());
  std::string out = slurp(dir / "out"), err = slurp(dir / "err");
  fs::remove_all(dir);
  if (rc != 0) {
    const int code = WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
    return internal_error(fmt::format("`{}` exited {}: {}", cmd.substr(0, 120), code, err.substr(0, err.find('\n'))));
  }
  return out;
}

Result<std::unique_ptr<NetnsFabric>> NetnsFabric::create(const FabricOptions& opt) {
  if (opt.spines < 1 || opt.leaves < 1 || opt.hosts_per_leaf < 1 || opt.planes < 1 || opt.rails < 0 ||
      (opt.rails > 0 && opt.leaves % (opt.planes * opt.rails) != 0)) {
    return invalid_argument("fabric sizes must be >= 1");
  }
  std::unique_ptr<NetnsFabric> f(new NetnsFabric());
  f->opt_ = opt;
  f->prefix_ = fmt::format("wf{}{}-", opt.prefix_tag, ::getpid());
  f->state_dir_ = (fs::temp_directory_path() / ("weft-fabric-" + f->prefix_)).string();

  // The reaper (common/reaper.h): tears the fabric down if we die first.
  WEFT_ASSIGN_OR_RETURN(f->reaper_, Reaper::start(fmt::format(
      "WEFT_FABRIC_PREFIX={} WEFT_FABRIC_STATE={} bash {} down >/dev/null 2>&1", f->prefix_, f->state_dir_, kScript)));

  std::string env = fmt::format("WEFT_FABRIC_PREFIX={} WEFT_FABRIC_STATE={} PROBE_DSCP={}", f->prefix_,
                                f->state_dir_, opt.probe_dscp);
  if (!opt.link_rate.empty()) env += " LINK_RATE=" + opt.link_rate;
  f->up_ = true;  // from here on teardown must run, also for a half-built fabric
  if (opt.rails > 0) {
    auto up = run_shell(fmt::format("{} bash {} up-rail {} {} {} {} {}", env, kScript, opt.planes, opt.rails,
                                    opt.hosts_per_leaf, opt.spines, opt.leaves / (opt.planes * opt.rails)));
    if (!up) return up.status().with_context("building the netns rail fabric");
    WEFT_ASSIGN_OR_RETURN(std::string listing, f->script("hosts"));
    std::istringstream in(listing);
    std::string nic;
    for (FabricHost h; in >> h.ns >> h.ip >> h.leaf >> h.index >> nic;) {
      h.name = h.ns.substr(f->prefix_.size()) + ":" + nic;
      f->hosts_.push_back(h);
    }
    return f;
  }
  auto up = run_shell(fmt::format("{} bash {} up {} {} {}", env, kScript, opt.spines, opt.leaves, opt.hosts_per_leaf));
  if (!up) return up.status().with_context("building the netns fabric");
  for (int l = 1; l <= opt.leaves; ++l) {
    for (int h = 1; h <= opt.hosts_per_leaf; ++h) {
      const std::string name = fmt::format("h{}-{}", l, h);
      f->hosts_.push_back({name, f->prefix_ + name, fmt::format("10.0.{}.{}", l, h), l, h});
    }
  }
  return f;
}

NetnsFabric::~NetnsFabric() { (void)teardown(); }

const FabricHost& NetnsFabric::host(const std::string& name) const {
  for (const auto& h : hosts_) if (h.name == name || h.ns == name) return h;
  throw std::out_of_range("no fabric host " + name);
}

Result<std::string> NetnsFabric::script(const std::string& args, const std::string& stdin_text) {
  return run_shell(fmt::format("WEFT_FABRIC_PREFIX={} WEFT_FABRIC_STATE={} bash {} {}", prefix_, state_dir_,
                               kScript, args), stdin_text);
}

pid_t NetnsFabric::spawn(const std::string& host_name, const std::vector<std::string>& argv,
                         const std::string& stdout_path, const std::string& stderr_path) {
  const std::string ns_path = "/run/netns/" + host(host_name).ns;
  const pid_t pid = ::fork();
  if (pid != 0) {
    if (pid > 0) children_.push_back(pid);
    return pid;
  }
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);  // a killed test takes its agents along
  const int nsfd = ::open(ns_path.c_str(), O_RDONLY | O_CLOEXEC);
  if (nsfd < 0 || ::setns(nsfd, CLONE_NEWNET) != 0) ::_exit(126);
  const int out = ::open(stdout_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (out >= 0) ::dup2(out, 1);
  if (!stderr_path.empty()) {
    const int err = ::open(stderr_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (err >= 0) ::dup2(err, 2);
  }
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  ::execv(args[0], args.data());
  ::_exit(127);
}

int NetnsFabric::wait_child(pid_t pid, int timeout_ms) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  for (;;) {
    int st = 0;
    const pid_t r = ::waitpid(pid, &st, WNOHANG);
    if (r == pid) {
      children_.erase(std::remove(children_.begin(), children_.end(), pid), children_.end());
      return st;
    }
    if (r < 0 || std::chrono::steady_clock::now() > deadline) return -1;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

Result<std::string> NetnsFabric::run_in(const std::string& host_name, const std::string& shell_cmd) {
  return run_shell(fmt::format("ip netns exec {} sh -c {}", host(host_name).ns, shell_quote(shell_cmd)));
}

Result<std::vector<int>> NetnsFabric::ground_truth(const std::vector<FiveTuple>& tuples) {
  std::string in;
  for (const auto& t : tuples) {
    in += fmt::format("{} {} {} {} {}\n", t.src_ip, t.dst_ip, t.protocol == 6 ? "tcp" : "udp", t.sport, t.dport);
  }
  WEFT_ASSIGN_OR_RETURN(std::string out, script("routes", in));
  std::vector<int> spines;
  std::istringstream ss(out);
  for (int v; ss >> v;) spines.push_back(v);
  if (spines.size() != tuples.size()) {
    return internal_error(fmt::format("routes answered {} lines for {} tuples", spines.size(), tuples.size()));
  }
  return spines;
}

Status NetnsFabric::fail_link(int spine, int leaf) { return script(fmt::format("fail {} {}", spine, leaf)).status(); }
Status NetnsFabric::restore_link(int spine, int leaf) {
  return script(fmt::format("restore {} {}", spine, leaf)).status();
}
Status NetnsFabric::cut_link(int spine, int leaf) { return script(fmt::format("cut {} {}", spine, leaf)).status(); }
Status NetnsFabric::mend_link(int spine, int leaf) { return script(fmt::format("mend {} {}", spine, leaf)).status(); }

Status NetnsFabric::teardown() {
  for (pid_t pid : children_) {
    ::kill(pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);
  }
  children_.clear();
  Status st;
  if (up_) {
    st = script("down").status();
    up_ = false;
  }
  reaper_.done();
  return st;
}

}  // namespace weft::test
