// One rank of a planned job in tests/integration/multihost_netns_test.cc,
// written as a user's program would be: rank, size and rendezvous from
// torchrun's variables, transport "auto", the route plan of argv[1]. It sums
// a vector over the ranks, counts the elements that are not the exact sum,
// says which transport serves each peer, and then keeps its connections open
// until the file argv[2] exists (at most 30 s), so that the test can read the
// sockets from outside the process (ss in each network namespace).
//   multihost_rank PLAN RELEASE_FILE
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "weft/collectives/communicator.h"

namespace {

int fail(const weft::Status& s) {
  std::fprintf(stderr, "%s\n", s.message().c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace weft::coll;
  if (argc != 3) return std::fprintf(stderr, "usage: multihost_rank PLAN RELEASE_FILE\n"), 2;
  auto info = launch_info_from_env();
  if (!info) return fail(info.status());
  auto store = open_store(info->store, info->rank, Clock::now() + std::chrono::seconds(30));
  if (!store) return fail(store.status());
  auto plan = weft::routing::load_plan(argv[1]);
  if (!plan) return fail(plan.status());
  CommConfig cfg;
  cfg.rank = info->rank;
  cfg.size = info->size;
  cfg.transport = "auto";
  cfg.timeout = std::chrono::seconds(30);
  cfg.plan = std::move(*plan);
  auto comm = Communicator::create(cfg, **store);
  if (!comm) return fail(comm.status());

  // An odd count, values whose sums are exact in float.
  std::vector<float> v(1000003, static_cast<float>(info->rank + 1));
  if (weft::Status s = (*comm)->allreduce(v.data(), v.data(), v.size(), DataType::kF32, ReduceOp::kSum); !s) {
    return fail(s);
  }
  const float want = static_cast<float>(info->size * (info->size + 1) / 2);
  const auto wrong = std::count_if(v.begin(), v.end(), [want](float x) { return x != want; });
  std::string peers;
  for (int p = 0; p < info->size; ++p) {
    const Transport* t = (*comm)->transport_for(p);
    if (!t) continue;
    peers.append(" ").append(std::to_string(p)).append(":").append(t->name());
  }
  std::printf("rank %d of %d: %zu elements wrong; peers%s\n", info->rank, info->size, static_cast<size_t>(wrong),
              peers.c_str());
  std::fflush(stdout);
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (::access(argv[2], F_OK) != 0 && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return wrong == 0 ? 0 : 1;
}
