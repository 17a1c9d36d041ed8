// EmulatedFabric (emulated_fabric.h): fork/exec plumbing around the embedded
// scripts/netns-fabric.sh.
#include "emulated_fabric.h"

#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <sstream>
#include <thread>

#include <fmt/format.h>

#include "demo_text.h"
#include "netns_fabric_script.h"  // generated: kNetnsFabricScript
#include "weft/common/file_util.h"

extern char** environ;

namespace weft::cli::demo {
namespace {

std::atomic<int> g_signal{0};
constexpr int kSignals[] = {SIGINT, SIGTERM, SIGHUP};
struct sigaction g_previous[3];

void on_signal(int sig) { g_signal.store(sig); }

bool tool_exists(const char* name) {
  for (const char* dir : {"/usr/sbin/", "/sbin/", "/usr/bin/", "/bin/"}) {
    if (::access((std::string(dir) + name).c_str(), X_OK) == 0) return true;
  }
  return false;
}

// In a freshly forked child: survive nothing of the parent, and leave the
// terminal's process group so that Ctrl-C reaches the parent only.
void child_setup(pid_t parent) {
  ::setpgid(0, 0);
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (::getppid() != parent) ::_exit(127);  // the parent died before prctl
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  for (int s : kSignals) ::signal(s, SIG_DFL);
}

}  // namespace

InterruptGuard::InterruptGuard() {
  g_signal.store(0);
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  for (size_t i = 0; i < std::size(kSignals); ++i) ::sigaction(kSignals[i], &sa, &g_previous[i]);
}

InterruptGuard::~InterruptGuard() {
  for (size_t i = 0; i < std::size(kSignals); ++i) ::sigaction(kSignals[i], &g_previous[i], nullptr);
}

bool InterruptGuard::interrupted() { return g_signal.load() != 0; }
int InterruptGuard::signal_number() { return g_signal.load(); }

std::string emulation_unavailable_reason() {
  if (::geteuid() != 0) return "not running as root (network namespaces, veth pairs and tc need CAP_NET_ADMIN)";
  for (const char* tool : {"ip", "tc", "nft", "nsenter", "bash"}) {
    if (!tool_exists(tool)) return fmt::format("'{}' is not installed (apt-get install iproute2 nftables util-linux)", tool);
  }
  if (::access("/run/netns", F_OK) != 0 && ::mkdir("/run/netns", 0755) != 0) {
    return fmt::format("cannot create /run/netns: {}", std::strerror(errno));
  }
  return "";
}

Status EmulatedFabricConfig::validate() const {
  if (spines < 1 || leaves < 1 || hosts_per_leaf < 1) return invalid_argument("fabric sizes must be >= 1");
  if (rails > 0 && (planes < 1 || rail_hosts < 2 || rail_leaves < 1 || rail_leaves > rail_hosts)) {
    return invalid_argument(fmt::format("rail fabric: {} planes, {} hosts, {} leaves per rail", planes, rail_hosts, rail_leaves));
  }
  if (probe_dscp < 0 || probe_dscp + spines * planes > 63) {
    return invalid_argument(fmt::format("probe DSCP {} + {} spines exceeds 63 (DSCP is 6 bits)", probe_dscp, spines));
  }
  if (leaves > 127 || hosts_per_leaf > 253) return invalid_argument("at most 127 leaves and 253 hosts per leaf");
  if (work_dir.empty()) return invalid_argument("the emulated fabric needs a work directory");
  if (rate_mbit < 0 || rate_mbit > 100000) return invalid_argument(fmt::format("link rate {} Mbit/s is not 0..100000", rate_mbit));
  if (mtu < 576 || mtu > 65535) return invalid_argument(fmt::format("MTU {} is not 576..65535", mtu));
  return check_namespace_prefix(prefix);
}

Status check_namespace_prefix(const std::string& prefix) {
  if (prefix.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789-") != std::string::npos) {
    return invalid_argument(fmt::format("namespace prefix '{}' may hold only a-z, 0-9 and '-'", prefix));
  }
  return ok_status();
}

FabricCounters FabricCounters::operator-(const FabricCounters& before) const {
  FabricCounters d = *this;
  for (auto& [k, v] : d.spine_leaf) {
    auto it = before.spine_leaf.find(k);
    if (it != before.spine_leaf.end()) v = v >= it->second ? v - it->second : 0;
  }
  for (auto& [k, v] : d.host) {
    auto it = before.host.find(k);
    if (it != before.host.end()) v = v >= it->second ? v - it->second : 0;
  }
  return d;
}

Result<std::unique_ptr<EmulatedFabric>> EmulatedFabric::create(const EmulatedFabricConfig& config) {
  WEFT_RETURN_IF_ERROR(config.validate());
  std::unique_ptr<EmulatedFabric> f(new EmulatedFabric());
  f->cfg_ = config;
  if (f->cfg_.prefix.empty()) f->cfg_.prefix = fmt::format("wfdemo{}-", ::getpid());
  f->script_path_ = config.work_dir + "/netns-fabric.sh";
  f->state_dir_ = config.work_dir + "/fabric-state";
  WEFT_RETURN_IF_ERROR(write_file_atomic(f->script_path_, kNetnsFabricScript));

  // The reaper (see the header): `down` also kills, by PID, what still runs
  // in the fabric's namespaces.
  std::string down = fmt::format("WEFT_FABRIC_PREFIX='{}' WEFT_FABRIC_STATE='{}' bash '{}' down >/dev/null 2>&1",
                                 f->cfg_.prefix, f->state_dir_, f->script_path_);
  if (config.remove_work_dir) down += fmt::format("; rm -rf '{}'", config.work_dir);
  WEFT_ASSIGN_OR_RETURN(f->reaper_, Reaper::start(down));

  f->up_ = true;  // from here on teardown must run, also for a half-built fabric
  const bool rail = config.rails > 0;
  const std::vector<std::string> up =
      rail ? std::vector<std::string>{"up-rail", std::to_string(config.planes), std::to_string(config.rails),
                                      std::to_string(config.rail_hosts), std::to_string(config.spines),
                                      std::to_string(config.rail_leaves)}
           : std::vector<std::string>{"up", std::to_string(config.spines), std::to_string(config.leaves),
                                      std::to_string(config.hosts_per_leaf)};
  WEFT_RETURN_IF_ERROR(f->script(up).status().with_context("building the emulated fabric"));
  WEFT_ASSIGN_OR_RETURN(std::string listing, f->script({"hosts"}));
  // `hosts` lists "ns ip leaf index", and on a rail fabric the NIC port too.
  std::istringstream in(listing);
  for (std::string line; std::getline(in, line);) {
    std::istringstream fields(line);
    EmulatedHost h;
    std::string nic;
    if (!(fields >> h.ns >> h.ip >> h.leaf >> h.index)) continue;
    h.machine = h.ns.substr(f->cfg_.prefix.size());
    h.name = rail && (fields >> nic) ? h.machine + ":" + nic : h.machine;
    f->hosts_.push_back(h);
  }
  const int want = rail ? config.planes * config.rails * config.rail_hosts : config.leaves * config.hosts_per_leaf;
  if (f->hosts_.size() != static_cast<size_t>(want)) {
    return internal_error(fmt::format("the fabric script listed {} hosts, expected {}", f->hosts_.size(), want));
  }
  return f;
}

EmulatedFabric::~EmulatedFabric() { (void)teardown(); }

Result<const EmulatedHost*> EmulatedFabric::host(const std::string& name) const {
  for (const auto& h : hosts_) {
    if (h.name == name || h.ns == name) return &h;
  }
  return not_found(fmt::format("no host '{}' in the emulated fabric", name));
}

Result<std::string> EmulatedFabric::script(const std::vector<std::string>& args) {
  int out[2];
  if (::pipe2(out, O_CLOEXEC) != 0) return io_error("pipe", errno);
  const std::string err_path = cfg_.work_dir + "/netns-fabric.err";
  std::vector<std::string> env = {"WEFT_FABRIC_PREFIX=" + cfg_.prefix, "WEFT_FABRIC_STATE=" + state_dir_,
                                  "PROBE_DSCP=" + std::to_string(cfg_.probe_dscp),
                                  "HASH_SEED=" + std::to_string(cfg_.hash_seed), "FABRIC_MTU=" + std::to_string(cfg_.mtu),
                                  "TBF_BURST=" + cfg_.tbf_burst};
  const std::string rate = cfg_.rate_mbit > 0 ? fmt::format("{}mbit", cfg_.rate_mbit) : "";  // "" = unshaped
  env.push_back("LINK_RATE=" + rate);
  env.push_back("HOST_RATE=" + rate);
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) return io_error("fork", errno);
  if (pid == 0) {
    child_setup(parent);
    ::dup2(out[1], 1);
    const int err = ::open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (err >= 0) ::dup2(err, 2);
    for (const auto& e : env) ::putenv(const_cast<char*>(e.c_str()));
    std::vector<char*> argv = {const_cast<char*>("bash"), const_cast<char*>(script_path_.c_str())};
    for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    ::execvp("bash", argv.data());
    ::_exit(127);
  }
  ::close(out[1]);
  std::string text;
  char buf[4096];
  for (;;) {
    const ssize_t n = ::read(out[0], buf, sizeof buf);
    if (n > 0) {
      text.append(buf, static_cast<size_t>(n));
    } else if (n == 0 || errno != EINTR) {
      break;
    }
  }
  ::close(out[0]);
  int st = 0;
  while (::waitpid(pid, &st, 0) < 0 && errno == EINTR) {
  }
  if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
    auto err = read_file(err_path);
    return internal_error(fmt::format("netns-fabric.sh {} failed: {}", args.empty() ? "" : args.front(),
                                      err ? first_line(*err) : "(no message)"));
  }
  return text;
}

Status EmulatedFabric::set_hash_seed(uint32_t seed) {
  WEFT_RETURN_IF_ERROR(script({"seed", std::to_string(seed)}).status());
  cfg_.hash_seed = seed;
  return ok_status();
}

Status EmulatedFabric::fail_link(int spine, int leaf) {
  return script({"fail", std::to_string(spine), std::to_string(leaf)}).status();
}
Status EmulatedFabric::restore_link(int spine, int leaf) {
  return script({"restore", std::to_string(spine), std::to_string(leaf)}).status();
}
Status EmulatedFabric::cut_link(int spine, int leaf) {
  return script({"cut", std::to_string(spine), std::to_string(leaf)}).status();
}
Status EmulatedFabric::mend_link(int spine, int leaf) {
  return script({"mend", std::to_string(spine), std::to_string(leaf)}).status();
}

Result<std::vector<int>> EmulatedFabric::spines_of(const std::vector<std::string>& lines) {
  // `routes` reads the tuples from a file given as its standard input.
  const std::string in = cfg_.work_dir + "/routes.in";
  std::string text;
  for (const auto& l : lines) text += l + "\n";
  WEFT_RETURN_IF_ERROR(write_file_atomic(in, text));
  WEFT_ASSIGN_OR_RETURN(std::string out, script({"routes", in}));
  std::vector<int> spines;
  std::istringstream is(out);
  for (int s; is >> s;) spines.push_back(s);
  if (spines.size() != lines.size()) {
    return internal_error(fmt::format("netns-fabric.sh routes answered {} lines for {}", spines.size(), lines.size()));
  }
  return spines;
}

Result<FabricCounters> EmulatedFabric::counters() {
  if (cfg_.rails > 0) return FabricCounters{};  // link utilisation is the spine-leaf demo's (demo_report.h)
  if (spine_stats_.empty()) {
    for (int sp = 1; sp <= cfg_.spines; ++sp) {
      WEFT_ASSIGN_OR_RETURN(LinkStats st, LinkStats::open(fmt::format("/run/netns/{}s{}", cfg_.prefix, sp)));
      spine_stats_.push_back(std::move(st));
    }
    for (int l = 1; l <= cfg_.leaves; ++l) {
      WEFT_ASSIGN_OR_RETURN(LinkStats st, LinkStats::open(fmt::format("/run/netns/{}l{}", cfg_.prefix, l)));
      leaf_stats_.push_back(std::move(st));
    }
  }
  FabricCounters c;
  // Spine N's port dn<M> faces leaf M: what it receives went up.
  for (int sp = 1; sp <= cfg_.spines; ++sp) {
    WEFT_ASSIGN_OR_RETURN(auto ifs, spine_stats_[static_cast<size_t>(sp - 1)].read());
    for (int l = 1; l <= cfg_.leaves; ++l) {
      auto it = ifs.find(fmt::format("dn{}", l));
      if (it == ifs.end()) return internal_error(fmt::format("spine {} has no port dn{}", sp, l));
      c.spine_leaf[{sp, l, true}] = it->second.rx;
      c.spine_leaf[{sp, l, false}] = it->second.tx;
    }
  }
  // Leaf M's port h<K> faces host h<M>-<K>: what it receives came from the host.
  for (int l = 1; l <= cfg_.leaves; ++l) {
    WEFT_ASSIGN_OR_RETURN(auto ifs, leaf_stats_[static_cast<size_t>(l - 1)].read());
    for (int k = 1; k <= cfg_.hosts_per_leaf; ++k) {
      auto it = ifs.find(fmt::format("h{}", k));
      if (it == ifs.end()) return internal_error(fmt::format("leaf {} has no port h{}", l, k));
      c.host[{fmt::format("h{}-{}", l, k), true}] = it->second.rx;
      c.host[{fmt::format("h{}-{}", l, k), false}] = it->second.tx;
    }
  }
  return c;
}

Result<pid_t> EmulatedFabric::spawn(const std::string& host_name, const std::vector<std::string>& argv,
                                    const std::vector<std::string>& env, const std::string& out_path,
                                    const std::string& err_path) {
  WEFT_ASSIGN_OR_RETURN(const EmulatedHost* h, host(host_name));
  if (argv.empty() || argv[0].empty() || argv[0][0] != '/') return invalid_argument("spawn: argv[0] must be absolute");
  const std::string ns_path = "/run/netns/" + h->ns;
  // The child reports a failed setns/exec through a close-on-exec pipe:
  // EOF = exec succeeded.
  int report[2];
  if (::pipe2(report, O_CLOEXEC) != 0) return io_error("pipe", errno);
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) return io_error("fork", errno);
  if (pid == 0) {
    child_setup(parent);
    auto die = [&](const char* what) {
      const int e = errno;
      const std::string msg = fmt::format("{}: {}", what, std::strerror(e));
      (void)!::write(report[1], msg.data(), msg.size());
      ::_exit(127);
    };
    const int nsfd = ::open(ns_path.c_str(), O_RDONLY | O_CLOEXEC);
    if (nsfd < 0 || ::setns(nsfd, CLONE_NEWNET) != 0) die(ns_path.c_str());
    const int o = ::open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    const int e = ::open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (o < 0 || e < 0) die("opening the log files");
    ::dup2(o, 1);
    ::dup2(e, 2);
    const int null = ::open("/dev/null", O_RDONLY);
    if (null >= 0) ::dup2(null, 0);
    for (const auto& kv : env) ::putenv(const_cast<char*>(kv.c_str()));
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    ::execve(args[0], args.data(), environ);
    die(argv[0].c_str());
  }
  ::close(report[1]);
  ::setpgid(pid, pid);  // also here: no window in which Ctrl-C reaches it
  children_.push_back(pid);
  std::string msg;
  char buf[512];
  for (ssize_t n; (n = ::read(report[0], buf, sizeof buf)) != 0;) {
    if (n > 0) msg.append(buf, static_cast<size_t>(n));
    if (n < 0 && errno != EINTR) break;
  }
  ::close(report[0]);
  if (!msg.empty()) {
    ::waitpid(pid, nullptr, 0);
    forget(pid);
    return internal_error(fmt::format("cannot start {} on {}: {}", argv[0], host_name, msg));
  }
  return pid;
}

void EmulatedFabric::forget(pid_t pid) { children_.erase(std::remove(children_.begin(), children_.end(), pid), children_.end()); }

Result<std::vector<int>> EmulatedFabric::wait_all(const std::vector<pid_t>& pids, Clock::time_point deadline,
                                                  const std::string& what) {
  std::vector<int> status(pids.size(), -1);
  std::vector<bool> done(pids.size(), false);
  size_t left = pids.size();
  while (left > 0) {
    for (size_t i = 0; i < pids.size(); ++i) {
      if (done[i]) continue;
      int st = 0;
      const pid_t r = ::waitpid(pids[i], &st, WNOHANG);
      if (r == 0) continue;
      done[i] = true;
      --left;
      forget(pids[i]);
      status[i] = r == pids[i] ? st : -1;
      if (r != pids[i] || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
        stop(pids, std::chrono::milliseconds(0));
        const std::string how = r != pids[i]            ? "vanished"
                                : WIFSIGNALED(st)       ? fmt::format("was killed by signal {}", WTERMSIG(st))
                                                        : fmt::format("exited with status {}", WEXITSTATUS(st));
        return internal_error(fmt::format("{}: process {} (#{}) {}", what, pids[i], i, how));
      }
    }
    if (left == 0) break;
    if (InterruptGuard::interrupted()) {
      stop(pids, std::chrono::milliseconds(0));
      return aborted(fmt::format("interrupted by signal {} during {}", InterruptGuard::signal_number(), what));
    }
    if (Clock::now() > deadline) {
      stop(pids, std::chrono::milliseconds(0));
      return deadline_exceeded(fmt::format("{} did not finish in time", what));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return status;
}

bool EmulatedFabric::running(pid_t pid) {
  if (std::find(children_.begin(), children_.end(), pid) == children_.end()) return false;
  if (::waitpid(pid, nullptr, WNOHANG) == 0) return true;
  forget(pid);
  return false;
}

void EmulatedFabric::stop(const std::vector<pid_t>& pids, std::chrono::milliseconds grace) {
  std::vector<pid_t> mine;
  for (pid_t p : pids) {
    if (std::find(children_.begin(), children_.end(), p) != children_.end()) mine.push_back(p);
  }
  for (pid_t p : mine) ::kill(p, grace.count() > 0 ? SIGTERM : SIGKILL);
  const auto deadline = Clock::now() + grace;
  for (pid_t p : mine) {
    for (;;) {
      const pid_t r = ::waitpid(p, nullptr, WNOHANG);
      if (r != 0) break;
      if (Clock::now() > deadline) {
        ::kill(p, SIGKILL);
        ::waitpid(p, nullptr, 0);
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    forget(p);
  }
}

Status EmulatedFabric::teardown() {
  stop(std::vector<pid_t>(children_), std::chrono::milliseconds(0));
  spine_stats_.clear();  // their sockets would keep the namespaces alive
  leaf_stats_.clear();
  Status st;
  if (up_) {
    st = script({"down"}).status();
    up_ = false;
  }
  reaper_.done();
  return st;
}

}  // namespace weft::cli::demo
