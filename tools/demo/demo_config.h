// What `weft demo` runs: the fabric, the collective, the trials (cmd_demo.cc
// fills it from the command line; validate() names the first bad value).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>

#include "weft/common/status.h"

namespace weft::cli::demo {

struct DemoConfig {
  // The fabric: a 2-tier Clos of network namespaces (or of the simulator).
  int spines = 4;
  int leaves = 4;
  int hosts_per_leaf = 4;
  // "spine-leaf" (the sizes above) or "rail": a rail-optimised fabric of
  // `planes` planes that share no switch, `rails` NICs per host (NIC g on
  // rail g), `rail_hosts` hosts; each rail has 2 leaves per plane and each
  // plane 2 spines, so that half of the inter-host flows cross a spine, two
  // per leaf on its two uplinks: ECMP may put both on one, a plan never.
  // One rank per (host, NIC port), rail order, hybrid AllReduce (demo_rail.h).
  std::string fabric = "spine-leaf";
  int planes = 2;
  int rails = 2;
  int rail_hosts = 4;
  static constexpr int kRailLeaves = 2, kRailSpines = 2;
  int rate_mbit = 200;  // tbf rate of every link, both directions
  int mtu = 9000;
  // The collective: HD AllReduce of `bytes` (f32 sum) over TCP, run twice
  // per trial: (a) allocation order + ephemeral ports, (b) weft order + plan.
  uint64_t bytes = 64ull << 20;
  int trials = 5;                  // trial t uses fabric hash seed `seed + t - 1`
  uint32_t seed = 1;               // also shuffles the allocation order
  std::string order = "shuffled";  // the allocation's order: shuffled | interleaved | sorted
  // --fail SPINE:LEAF: after the trials, fail that link, re-probe, re-plan, rerun.
  std::optional<std::pair<int, int>> fail;
  // --fail-during SPINE:LEAF@CUT[:RESTORE]: instead of trials, a timeline of
  // back-to-back AllReduce calls of `call_bytes` for `timeline_s`, (a) and
  // (b) in turn, during which the link is cut at CUT s (a gray failure:
  // scripts/netns-fabric.sh `cut`), withdrawn by the routing `converge_ms`
  // later (`fail`; 0 = never: the fabric keeps hashing flows onto it) and
  // restored at RESTORE s (0 = never).
  struct FaultDuring {
    int spine = 0, leaf = 0;
    double cut_s = 10, restore_s = 20;
  };
  std::optional<FaultDuring> fail_during;
  double timeline_s = 30;
  int converge_ms = 500;
  uint64_t call_bytes = 4ull << 20;
  // Probing and ports.
  int probe_ports = 32;     // source ports per pair in the bring-up campaign
  uint16_t dport = 29500;   // the TCP data port (planned flows' dport, probed by TCP SYN)
  uint16_t store_port = 29400;
  int timeout_s = 300;      // per AllReduce run (setup + call + verification)
  uint64_t socket_buffer = 0;  // TCP SO_SNDBUF/SO_RCVBUF; 0 = 5 ms of the link rate (demo_session.cc)
  // Output and housekeeping.
  std::string svg = "weft-demo.svg";
  std::string json;         // machine-readable results ("" = none)
  std::string work_dir;     // "" = a fresh directory under $TMPDIR, removed at the end
  std::string prefix;       // namespace prefix; "" = "wfdemo<pid>-"
  bool simulate = false;    // the simulator even when the fabric could be emulated

  int hosts() const { return leaves * hosts_per_leaf; }
  Status validate() const;
};

}  // namespace weft::cli::demo
