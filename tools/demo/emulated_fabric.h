// EmulatedFabric: the spine-leaf fabric of network namespaces `weft demo`
// measures on, built and torn down by scripts/netns-fabric.sh (embedded in
// the weft binary at build time, so an installed weft needs no source tree;
// the script's header documents names, addresses and commands).
//
//   InterruptGuard sigs;                        // Ctrl-C ends waits, then RAII cleans up
//   auto fabric = EmulatedFabric::create({.spines = 4, .leaves = 4, .hosts_per_leaf = 4,
//                                         .rate_mbit = 100, .work_dir = dir}).value();
//   pid_t agent = fabric->spawn("h1-1", {weft, "agent", ...}, {}, "out.log", "err.log").value();
//   WEFT_RETURN_IF_ERROR(fabric->fail_link(1, 2));
//
// Nothing outlives it, however weft ends:
//   - the destructor kills every process it started (by PID) and runs `down`;
//   - its processes get PR_SET_PDEATHSIG(SIGKILL), so they die with weft;
//   - a reaper (common/reaper.h), started before the fabric exists, runs
//     `down` (which also kills, by PID, whatever still runs in the fabric's
//     namespaces) and deletes the work directory when weft owned it, if weft
//     dies without tearing down (SIGKILL, OOM, a crash);
//   - processes run in their own process group, so a terminal's Ctrl-C
//     reaches weft alone: weft stops waiting (InterruptGuard) and cleans up
//     in order instead of racing its dying children.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "link_stats.h"
#include "weft/common/reaper.h"
#include "weft/common/status.h"

namespace weft::cli::demo {

// SIGINT, SIGTERM and SIGHUP set a flag for the lifetime of the guard (the
// previous handlers come back after it); long waits poll interrupted().
class InterruptGuard {
 public:
  InterruptGuard();
  ~InterruptGuard();
  InterruptGuard(const InterruptGuard&) = delete;
  InterruptGuard& operator=(const InterruptGuard&) = delete;
  static bool interrupted();
  static int signal_number();  // the signal that arrived, 0 if none
};

struct EmulatedFabricConfig {
  int spines = 4;
  int leaves = 4;
  int hosts_per_leaf = 4;
  // rails > 0: a rail fabric (netns-fabric.sh up-rail planes rails
  // rail_hosts spines rail_leaves), spines per plane; leaves, hosts_per_leaf unused.
  int planes = 1, rails = 0, rail_hosts = 0, rail_leaves = 1;
  int rate_mbit = 0;        // tbf rate of every link, Mbit/s; 0 = unshaped
  std::string tbf_burst = "256kb";  // tbf bucket: slack for late qdisc timers on a busy host
  int mtu = 9000;           // every veth
  uint32_t hash_seed = 1;   // fib_multipath_hash_seed of every switch
  int probe_dscp = 8;       // spine N rewrites DSCP X -> X+N
  std::string prefix;       // namespace prefix; "" = "wfdemo<pid>-"
  std::string work_dir;     // holds the script copy and the fabric's state (must exist)
  bool remove_work_dir = false;  // the reaper deletes it too (weft made it)

  Status validate() const;
};

struct EmulatedHost {
  std::string name;  // h<leaf>-<k>; on a rail fabric one entry per NIC port, h<K>:eth<g>p<k>
  std::string machine;  // the host it is a port of: its name, on a rail fabric h<K>
  std::string ns;    // network namespace
  std::string ip;    // 10.0.<leaf>.<k>
  int leaf = 0;
  int index = 0;
};

// Bytes per direction, read from interface counters (rtnetlink, link_stats.h;
// the script's `counters` prints the same): spine-leaf links keyed
// (spine, leaf, up) with up = leaf -> spine; host links keyed (host, up)
// with up = host -> leaf.
struct FabricCounters {
  std::map<std::tuple<int, int, bool>, uint64_t> spine_leaf;
  std::map<std::pair<std::string, bool>, uint64_t> host;
  FabricCounters operator-(const FabricCounters& before) const;
};

using Clock = std::chrono::steady_clock;

class EmulatedFabric {
 public:
  static Result<std::unique_ptr<EmulatedFabric>> create(const EmulatedFabricConfig& cfg);
  ~EmulatedFabric();
  EmulatedFabric(const EmulatedFabric&) = delete;
  EmulatedFabric& operator=(const EmulatedFabric&) = delete;

  const EmulatedFabricConfig& config() const { return cfg_; }
  const std::vector<EmulatedHost>& hosts() const { return hosts_; }
  Result<const EmulatedHost*> host(const std::string& name) const;

  Status set_hash_seed(uint32_t seed);
  Status fail_link(int spine, int leaf);
  Status restore_link(int spine, int leaf);
  // A gray failure (netns-fabric.sh `cut`): spine drops what it forwards over
  // the link; nothing is withdrawn. mend_link undoes it.
  Status cut_link(int spine, int leaf);
  Status mend_link(int spine, int leaf);
  const std::string& prefix() const { return cfg_.prefix; }
  Result<FabricCounters> counters();
  // The spine (1.., Switch::id) the fabric forwards each TCP 5-tuple
  // through ("SRC_IP DST_IP tcp SPORT DPORT" per line, netns-fabric.sh
  // `routes`), in order; 0 = one leaf, -1 = no route.
  Result<std::vector<int>> spines_of(const std::vector<std::string>& lines);

  // Starts argv (argv[0] an absolute path) inside the host's namespace with
  // `env` ("K=V") added to weft's environment, stdout and stderr to files.
  Result<pid_t> spawn(const std::string& host, const std::vector<std::string>& argv,
                      const std::vector<std::string>& env, const std::string& out_path,
                      const std::string& err_path);
  // Waits for every pid until `deadline`. The first process that fails makes
  // the others be killed (a collective cannot finish without it). Returns
  // the waitpid statuses, or an error naming the first failure (`what` names
  // the group), a timeout, or the interrupting signal.
  Result<std::vector<int>> wait_all(const std::vector<pid_t>& pids, Clock::time_point deadline,
                                    const std::string& what);
  // Whether a process it started still runs (an exited one is reaped).
  bool running(pid_t pid);
  // SIGTERM, then SIGKILL after `grace`; reaps. Unknown pids are ignored.
  void stop(const std::vector<pid_t>& pids, std::chrono::milliseconds grace = std::chrono::milliseconds(2000));

  // Kills what it started and deletes the namespaces; idempotent.
  Status teardown();

 private:
  EmulatedFabric() = default;
  Result<std::string> script(const std::vector<std::string>& args);
  void forget(pid_t pid);

  EmulatedFabricConfig cfg_;
  std::string script_path_;
  std::string state_dir_;
  std::vector<EmulatedHost> hosts_;
  std::vector<pid_t> children_;
  std::vector<LinkStats> spine_stats_, leaf_stats_;  // counters, opened once
  Reaper reaper_;
  bool up_ = false;
};

// Why this process cannot build an emulated fabric ("" when it can).
std::string emulation_unavailable_reason();

// A namespace prefix the fabric script accepts: a-z, 0-9 and '-' ("" = the default).
Status check_namespace_prefix(const std::string& prefix);

}  // namespace weft::cli::demo
