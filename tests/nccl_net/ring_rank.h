// One rank of a ring driven through the plugin as NCCL's proxy drives a net
// plugin: init, devices, getProperties, listen, handle exchange through the
// rendezvous store, connect and accept polled together until both return a
// comm, regMr, irecv/isend/test (single, grouped, and pipelined with 8 in
// flight), iflush, deregMr, close. Rank r sends to r+1 and receives from
// r-1; every byte it receives is checked against what r-1 sent, and the
// bytes past it must be untouched.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace weft::nccl_net::testing {

struct RingRank {
  int version = 11;
  int rank = 0;
  int nranks = 2;
  std::string device;       // WEFT_NCCL_DEVICES for this process
  int qps = 1;              // WEFT_NCCL_QPS
  std::string plan_path;    // WEFT_PLAN ("" = none)
  std::uint16_t store_port = 0;
  std::vector<std::size_t> payloads;  // one message each, then one grouped receive of 8
  int expect_planned_qps = 0;         // the plugin's "planned" counter at the end
  int traffic_class = -1;             // NCCL's config (v10: connect's, v11: init's)
  // After the ring, exit(0) with every comm open and a thread polling a
  // receive nobody sends to, as a job that skips ncclCommDestroy while
  // NCCL's proxy thread runs: run_ring_rank then returns only a failure.
  bool exit_with_live_comms = false;
};

// "" when every step worked and every byte matched; else the first failure.
std::string run_ring_rank(const RingRank& r);

// The 8 sizes of the grouped receive (awkward ones, zero included).
const std::vector<std::size_t>& grouped_sizes();

}  // namespace weft::nccl_net::testing
