#include "cpu_placement.h"

#include <sched.h>

#include "idle_wait.h"

namespace weft::coll::internal {

int block_cpu(int index, int count, const std::vector<int>& allowed) {
  if (allowed.empty() || count < 1 || index < 0 || index >= count) return -1;
  const long slot = static_cast<long>(index) * static_cast<long>(allowed.size()) / count;
  return allowed[static_cast<size_t>(slot)];
}

int move_to_block_cpu(int index, int count) {
  cpu_set_t all;
  if (::sched_getaffinity(0, sizeof all, &all) != 0) return -1;
  std::vector<int> allowed;
  for (int c = 0; c < CPU_SETSIZE; ++c) {
    if (CPU_ISSET(c, &all)) allowed.push_back(c);
  }
  if (allowed.size() < 2 || count <= static_cast<int>(allowed.size())) return -1;
  const int cpu = block_cpu(index, count, allowed);
  if (cpu < 0) return -1;
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(cpu, &one);
  migrate_now(one, all);
  return cpu;
}

}  // namespace weft::coll::internal
