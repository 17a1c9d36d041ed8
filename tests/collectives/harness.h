// Test harness: ranks as threads of this process, one communicator each.
//
// The transport comes from WEFT_TEST_TRANSPORT (default "loopback"), so the
// same suites run over tcp, shm, or a transport registered by another
// library (the verbs runner sets WEFT_TEST_TRANSPORT=verbs inside its VM).
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "weft/collectives/communicator.h"

namespace weft::coll::testing {

inline std::string test_transport() {
  const char* t = std::getenv("WEFT_TEST_TRANSPORT");
  return t && *t ? t : "loopback";
}

// Runs body(comm) on `ranks` threads. `tweak` edits each rank's config
// (host names, plans, timeouts) before the communicator is created.
inline void run_ranks(int ranks, const std::function<void(Communicator&)>& body,
                      const std::function<void(CommConfig&)>& tweak = {}) {
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
      auto comm = Communicator::create(cfg, store);
      if (!comm) {
        ADD_FAILURE() << comm.status().to_string();
        return;
      }
      body(**comm);
    });
  }
  for (auto& t : threads) t.join();
}

}  // namespace weft::coll::testing
