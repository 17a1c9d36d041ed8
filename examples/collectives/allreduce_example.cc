// Sums a vector over every rank with weft's communicator (C++ API).
// Rank, size and rendezvous come from the launcher: torchrun's RANK,
// WORLD_SIZE, MASTER_ADDR, MASTER_PORT (or mpirun, srun; see store.h).
#include <algorithm>
#include <cstdio>
#include <vector>

#include "weft/collectives/communicator.h"

int main() {
  using namespace weft::coll;
  auto info = launch_info_from_env();
  if (!info) return std::fprintf(stderr, "%s\n", info.status().message().c_str()), 1;
  // One deadline for the whole setup: the store and then the peers.
  const auto deadline = Clock::now() + std::chrono::seconds(60);
  auto store = open_store(info->store, info->rank, deadline);
  if (!store) return std::fprintf(stderr, "%s\n", store.status().message().c_str()), 1;
  CommConfig cfg;
  cfg.rank = info->rank;
  cfg.size = info->size;
  cfg.transport = "auto";  // shared memory to ranks on this host, TCP to the others
  auto comm = Communicator::create(cfg, **store, deadline);
  if (!comm) return std::fprintf(stderr, "%s\n", comm.status().message().c_str()), 1;

  std::vector<float> grad(1 << 20, static_cast<float>(info->rank + 1));
  weft::Status s = (*comm)->allreduce(grad.data(), grad.data(), grad.size(), DataType::kF32, ReduceOp::kSum);
  if (!s) return std::fprintf(stderr, "%s\n", s.message().c_str()), 1;
  // Small integers add up exactly in float: every element must be the sum.
  const float want = static_cast<float>(info->size * (info->size + 1) / 2);
  const auto wrong = std::count_if(grad.begin(), grad.end(), [want](float x) { return x != want; });
  std::printf("rank %d of %d: sum %g (expected %g), %zu of %zu elements wrong\n", info->rank, info->size, grad[12345],
              want, static_cast<size_t>(wrong), grad.size());
  return wrong == 0 ? 0 : 1;
}
