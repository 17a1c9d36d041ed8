// A rank that cannot allocate a call's scratch: std::bad_alloc (HugeBuffer
// throws it as std::vector does) used to leave the library as an exception
// through the Status API, and the peers, already in the call, waited until
// their deadline. Now the call fails with a Status naming the bytes and the
// communicator fails, so the peers hear of it at once.
//
// The ranks run in a child process whose address space is capped
// (setrlimit(2) RLIMIT_AS) just above what it maps: rank 1 reserved its
// scratch at create(), rank 0 must allocate it in the call, and cannot.
#include <sys/resource.h>

#include <barrier>
#include <chrono>
#include <fstream>
#include <thread>
#include <vector>

#include "child_verdict.h"
#include "harness.h"

namespace weft::coll::testing {
namespace {

// Bytes of address space this process maps now (proc(5): /proc/self/statm's
// first field, in pages).
size_t mapped_bytes() {
  std::ifstream statm("/proc/self/statm");
  size_t pages = 0;
  statm >> pages;
  return pages * static_cast<size_t>(::sysconf(_SC_PAGESIZE));
}

TEST(OutOfMemory, ARankThatCannotAllocateScratchFailsNamingItAndItsPeerAtOnce) {
#if defined(__SANITIZE_ADDRESS__)
  GTEST_SKIP() << "AddressSanitizer reserves terabytes of shadow address space: RLIMIT_AS cannot be capped";
#endif
  // 96 MiB of floats: more than glibc malloc serves from the heaps it has
  // reserved already (a thread's arena heap is 64 MiB, mallopt(3)), so the
  // scratch needs new address space.
  constexpr size_t kCount = size_t{24} << 20;
  const auto verdict = verdict_in_child([] {
    MemoryStore store;
    std::barrier sync(2);
    std::vector<Status> got(2);
    std::vector<double> seconds(2);
    std::vector<float> data0(kCount, 1.0f), data1(kCount, 2.0f);
    std::vector<std::thread> ranks;
    for (int r = 0; r < 2; ++r) {
      ranks.emplace_back([&, r] {
        CommConfig cfg;
        cfg.rank = r;
        cfg.size = 2;
        cfg.transport = "loopback";
        cfg.timeout = std::chrono::seconds(30);
        if (r == 1) cfg.scratch_reserve_bytes = kCount * sizeof(float);
        auto c = Communicator::create(cfg, store);
        sync.arrive_and_wait();
        if (r == 0) {
          const rlimit cap{mapped_bytes() + (size_t{8} << 20), RLIM_INFINITY};
          if (!c || ::setrlimit(RLIMIT_AS, &cap) != 0) got[0] = internal_error("no communicator or no cap");
        }
        sync.arrive_and_wait();
        if (!c || !got[0].is_ok()) return;
        CollectiveOptions o;
        o.algorithm = Algorithm::kRing;  // its scratch is the whole vector (HD runs in pieces)
        float* v = r == 0 ? data0.data() : data1.data();
        const auto t0 = std::chrono::steady_clock::now();
        got[static_cast<size_t>(r)] = (*c)->allreduce(v, v, kCount, DataType::kF32, ReduceOp::kSum, o);
        seconds[static_cast<size_t>(r)] = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      });
    }
    for (auto& t : ranks) t.join();
    const std::string want0 = fmt::format("rank 0: {} bytes of scratch cannot be allocated", kCount * sizeof(float));
    if (got[0].code() != StatusCode::kIo || got[0].message().find(want0) == std::string::npos) return '0';
    if (got[1].is_ok() || got[1].message().find(want0) == std::string::npos) return '1';
    return seconds[1] < 10.0 ? 'y' : 't';
  });
  ASSERT_TRUE(verdict) << "the ranks' process: " << verdict.status().message();
  // 0: rank 0 did not name its allocation; 1: rank 1 did not hear of it;
  // t: rank 1 heard of it only at its deadline.
  EXPECT_EQ(*verdict, 'y');
}

}  // namespace
}  // namespace weft::coll::testing
