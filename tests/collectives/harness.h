// Test harness: ranks as threads of this process, one communicator each.
//
// The transport comes from WEFT_TEST_TRANSPORT (default "loopback"), so the
// same suites run over tcp, shm, or a transport registered by another
// library (the verbs runner sets WEFT_TEST_TRANSPORT=verbs inside its VM).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <functional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "weft/collectives/communicator.h"

namespace weft::coll::testing {

// "h<index>": a pretend host name (a stream: GCC 12 warns falsely,
// -Wrestrict, on "h" + std::to_string(i)).
inline std::string host_name(int index) {
  std::ostringstream s;
  s << "h" << index;
  return s.str();
}

inline std::string test_transport() {
  const char* t = std::getenv("WEFT_TEST_TRANSPORT");
  return t && *t ? t : "loopback";
}

// What a backend's test environment adds to every run_ranks (the verbs
// matrix in the soft-RoCE VM: devices per rank, and the check that the data
// really crossed the veth). All optional; set before the tests run.
struct RunHooks {
  std::function<void(CommConfig&)> configure;  // each rank's config, after the test's tweak
  std::function<void(int ranks)> before;        // the whole run, before any rank starts; may GTEST_SKIP()
  std::function<void(Communicator&)> finished;  // each rank after its body, still connected
  std::function<void(int ranks)> after;         // the whole run, after every rank is done
};
inline RunHooks& run_hooks() {
  static RunHooks hooks;
  return hooks;
}

// The matrix's largest count moves megabytes per call. Where the wire is
// slow (soft-RoCE under emulation: ~5 MB/s) a run may give it to every
// stride-th (type, op) combination only: combination c of a test with
// `ranks` ranks runs it when (c + ranks) % stride == 0. The matrices' rank
// counts {1, 2, 3, 4, 5, 7, 8, 13} leave every residue mod 2, 3, 4 and 7 to
// a count >= 2, so with those strides every combination still runs the
// largest count, over the wire, with every algorithm. 1 (default) = all;
// WEFT_TEST_BIG_COUNT_STRIDE or a backend's environment sets it.
inline int& big_count_stride() {
  static int stride = [] {
    const char* s = std::getenv("WEFT_TEST_BIG_COUNT_STRIDE");
    return s && *s ? std::max(1, std::atoi(s)) : 1;
  }();
  return stride;
}
inline bool runs_count(size_t count, size_t largest, int combination, int ranks) {
  return count < largest || (combination + ranks) % big_count_stride() == 0;
}

// Runs body(comm) on `ranks` threads. `tweak` edits each rank's config
// (host names, plans, timeouts) before the communicator is created.
inline void run_ranks(int ranks, const std::function<void(Communicator&)>& body,
                      const std::function<void(CommConfig&)>& tweak = {}) {
  const RunHooks& hooks = run_hooks();
  if (hooks.before) hooks.before(ranks);
  if (::testing::Test::IsSkipped()) return;
  MemoryStore store;
  std::vector<std::thread> threads;
  for (int r = 0; r < ranks; ++r) {
    threads.emplace_back([&, r] {
      CommConfig cfg;
      cfg.rank = r;
      cfg.size = ranks;
      cfg.transport = test_transport();
      cfg.timeout = std::chrono::seconds(120);
      if (tweak) tweak(cfg);
      if (hooks.configure) hooks.configure(cfg);
      auto comm = Communicator::create(cfg, store);
      if (!comm) {
        ADD_FAILURE() << comm.status().to_string();
        return;
      }
      body(**comm);
      if (hooks.finished) hooks.finished(**comm);
    });
  }
  for (auto& t : threads) t.join();
  if (hooks.after) hooks.after(ranks);
}

}  // namespace weft::coll::testing
