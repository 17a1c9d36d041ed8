// NetnsFabric: a spine-leaf fabric of network namespaces for integration tests,
// built and torn down by scripts/netns-fabric.sh (see its header for names,
// addresses and commands).
//
// Cleanup is guaranteed three ways: the destructor tears the fabric down (also
// when an assertion failed); a reaper process, started before the fabric and in
// its own session, tears it down when the test process dies without reaching the
// destructor (ctest's timeout kill, SIGKILL, abort); and `down` kills every
// process still inside the fabric's namespaces, by PID.
//
//   TEST(Probe, SeesEverySpine) {
//     WEFT_SKIP_UNLESS_NETNS();
//     auto fabric = weft::test::NetnsFabric::create(weft::test::FabricOptions::clos(3, 3, 2));
//     ASSERT_TRUE(fabric) << fabric.status().to_string();
//     pid_t agent = (*fabric)->spawn("h1-1", {"/path/to/weft", "agent"});
//     ...
//   }
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "weft/common/ipv4.h"  // ipv4_or_zero, ipv4_str: the tests use them
#include "weft/common/reaper.h"
#include "weft/common/status.h"

namespace weft::test {

struct FabricOptions {
  int spines = 4;          // per plane
  int leaves = 4;          // in all
  int hosts_per_leaf = 4;  // rail: hosts in all
  int planes = 1;          // a rail fabric's planes
  int rails = 0;           // 0: spine-leaf (`up`); else NICs per host (`up-rail`)
  int probe_dscp = 8;          // spine N rewrites DSCP X -> X+N
  std::string link_rate;       // "" = unshaped, else tbf rate such as "100mbit"
  std::string prefix_tag = "t";  // namespaces are "wf<tag><pid>-..."

  static FabricOptions clos(int s, int l, int h) {
    FabricOptions o;
    o.spines = s;
    o.leaves = l;
    o.hosts_per_leaf = h;
    return o;
  }
  // P planes x G rails, H hosts, S spines per plane, R leaves per rail: NIC
  // g's port k of every host on a leaf of rail g in plane k, hosts in
  // contiguous blocks over a rail's leaves (scripts/netns-fabric.sh up-rail).
  static FabricOptions rail(int planes, int rails, int hosts, int spines_per_plane, int leaves_per_rail = 1) {
    FabricOptions o = clos(spines_per_plane, planes * rails * leaves_per_rail, hosts);
    o.planes = planes;
    o.rails = rails;
    return o;
  }
};

// One probed address: a host of a spine-leaf fabric, or one NIC port of a
// rail fabric's host (several share a namespace).
struct FabricHost {
  std::string name;  // "h<leaf>-<k>"; rail: "h<k>:eth<g>p<plane>" (topology NIC name)
  std::string ns;    // full namespace name
  std::string ip;    // 10.0.<leaf>.<k>
  int leaf = 0;
  int index = 0;
};

struct FiveTuple {
  std::string src_ip, dst_ip;
  int protocol = 17;  // IPPROTO_UDP / IPPROTO_TCP
  int sport = 0, dport = 0;
};

// Why this machine cannot run netns tests ("" when it can).
std::string netns_unavailable_reason();

// Moves the calling thread into the named namespace (setns(2) is per thread;
// threads it starts afterwards are born there).
Status enter_netns(const std::string& ns);

#define WEFT_SKIP_UNLESS_NETNS()                                         \
  do {                                                                   \
    const std::string weft_why_ = ::weft::test::netns_unavailable_reason(); \
    if (!weft_why_.empty()) GTEST_SKIP() << weft_why_;                   \
  } while (0)

class NetnsFabric {
 public:
  static Result<std::unique_ptr<NetnsFabric>> create(const FabricOptions& opt);
  ~NetnsFabric();
  NetnsFabric(const NetnsFabric&) = delete;
  NetnsFabric& operator=(const NetnsFabric&) = delete;

  const FabricOptions& options() const { return opt_; }
  const std::string& prefix() const { return prefix_; }
  const std::vector<FabricHost>& hosts() const { return hosts_; }
  const FabricHost& host(const std::string& name) const;

  // Runs `argv` inside the host's namespace as a child of this process; it is
  // killed (SIGKILL, by PID) at teardown if still running.
  pid_t spawn(const std::string& host, const std::vector<std::string>& argv,
              const std::string& stdout_path = "/dev/null", const std::string& stderr_path = "");
  // Waits up to timeout_ms for a spawned child; returns its exit status
  // (waitpid encoding) or -1 on timeout (the child is left running).
  int wait_child(pid_t pid, int timeout_ms);
  // Runs a shell command in a host's namespace to completion; returns stdout.
  Result<std::string> run_in(const std::string& host, const std::string& shell_cmd);

  // Ground truth from the fabric itself: spine number per 5-tuple (0 = same
  // leaf, -1 = unreachable), asked of the source leaf's FIB.
  Result<std::vector<int>> ground_truth(const std::vector<FiveTuple>& tuples);
  Status fail_link(int spine, int leaf);
  Status restore_link(int spine, int leaf);
  // A gray failure (scripts/netns-fabric.sh `cut`): the spine drops what it
  // would forward over the link, routes stay as they are. mend_link undoes it.
  Status cut_link(int spine, int leaf);
  Status mend_link(int spine, int leaf);
  // Runs the fabric script with the given arguments; returns stdout.
  Result<std::string> script(const std::string& args, const std::string& stdin_text = "");

  Status teardown();

 private:
  NetnsFabric() = default;
  FabricOptions opt_;
  std::string prefix_;
  std::string state_dir_;
  std::vector<FabricHost> hosts_;
  std::vector<pid_t> children_;
  Reaper reaper_;
  bool up_ = false;
};

// Runs a shell command (sh -c) with a timeout; returns stdout, or an error with
// the exit code and stderr's first line.
Result<std::string> run_shell(const std::string& cmd, const std::string& stdin_text = "", int timeout_s = 120);

}  // namespace weft::test
