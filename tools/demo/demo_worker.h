// The rank worker of `weft demo` (hidden: `weft demo worker`): one process
// per host for the whole demo, running every AllReduce of it as a new
// communicator, the way a training job's process outlives many collectives.
//
// Why not a process per run (`weft bench --once` does the same work): here
// 16 processes faulting in 200 MiB each at once took 10-15 s a run (page
// faults in parallel are slow in this VM, huge_buffer.h); a worker faults
// its memory in once, one worker after another, and recycles it.
//
// Protocol, through files in the demo's work directory (written atomically):
//   ready-<host>           the worker has its memory and waits for jobs
//   job-<k>.json           job k = 1, 2, ...: {"hosts": [rank order], "store":
//                          "tcp://ip:port", "bytes", "plan" ("" = ephemeral
//                          ports), "timeout_s", "socket_buffer"}
//   result-<k>-<host>.json {"rank", "ok", "seconds" (slowest rank), "wrong"
//                          (elements off the exact sum, all ranks), "error"}
// A job with "series": {"start_file", "duration_s"} runs back-to-back calls
// for that long from a start rank 0 picks once all are connected and writes
// to start_file (weft demo --fail-during); rank 0's result lists them as "calls": [[first rank's start
// s, seconds until the last rank's end, wrong elements on the worst rank], ...].
// A worker whose host is not in a job skips it. Each job: fill the input,
// rendezvous through the TCP store (rank 0 serves it), connect (the plan's
// source ports bound), barrier, one timed in-place HD AllReduce (f32 sum),
// verify every element, agree on the slowest time.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "weft/common/status.h"

namespace weft::cli::demo {

struct WorkerArgs {
  std::string dir;
  std::string host;  // CommConfig::host: ranks with equal host are one machine (hybrid)
  std::string name;  // the rank's name in jobs and its files ("" = host); rail: "h1:eth0p1"
  std::string ip;    // the rank's fabric address (listen and bind): its NIC port's
  uint64_t max_bytes = 0;
};

int run_worker(const WorkerArgs& a);

// The memory the workers of a demo hold at once: each its data buffer and
// one scratch buffer of the AllReduce's size (run_worker), and
// kWorkerOverheadBytes besides (code, socket buffers; a worker of a 32 MiB
// demo measured 80 MiB resident).
inline constexpr uint64_t kWorkerOverheadBytes = 16ull << 20;
uint64_t workers_memory_bytes(int workers, uint64_t bytes);
// Refuses a demo whose workers would not fit in `available` bytes: they
// fault their memory in one after another, and the OOM killer would end one
// of them (or other work) part way through. `flag` names the size option.
Status check_workers_memory(std::string_view flag, int workers, uint64_t bytes, uint64_t available);
// MemAvailable of /proc/meminfo (proc(5)), in bytes; nullopt where it cannot be read.
std::optional<uint64_t> mem_available_bytes();

}  // namespace weft::cli::demo
