// Process plumbing of the plugin harness: ranks are forked processes (each
// loads its own copy of the plugin, as NCCL's ranks do), released together
// once the parent's rendezvous store is up, and waited for with a timeout.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace weft::nccl_net::testing {

struct Children {
  std::vector<pid_t> pids;
  std::vector<int> pipes;
};

// Forks `n` children that block until release_and_wait sends them the store's
// port, then run `child(i, port)` in child i (its return is the exit status).
Children fork_children(int n, const std::function<int(int, std::uint16_t)>& child);

// Releases the children (port 0 = "give up") and collects their exit codes;
// a child still running after `timeout` is killed (by its pid) and reads 124.
std::vector<int> release_and_wait(Children& c, std::uint16_t port, std::chrono::seconds timeout);

// The IPv4 address of a verbs device's RoCE v2 GID, "" when it cannot be opened.
std::string ip_of(const std::string& device);

}  // namespace weft::nccl_net::testing
