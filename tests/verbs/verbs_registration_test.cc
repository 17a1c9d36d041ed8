// Registration you can trust, over soft-RoCE in the VM: a buffer that is
// mapped again at the same address between two calls (mmap MAP_FIXED: the
// old pages go, new ones with new contents take the address) gives exact
// sums on every path of the communicator's buffer placement
// (registry.cc, place_buffers):
//   - staged: an unregistered buffer up to CommConfig::stage_max_bytes,
//     copied through the registered scratch (no registration per call);
//   - per call: a larger unregistered buffer, registered for the call and
//     deregistered after it (exactly one registration per call);
//   - registered: Communicator::register_buffer (zero registrations per
//     call), deregistered before the remap and registered again after it.
// A registration kept by address across calls (what the communicator did
// before) makes RDMA move the old, still pinned pages: the second call's
// sums come out wrong.
#include <sys/mman.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>

#include "../collectives/exact_sum.h"
#include "../collectives/harness.h"
#include "verbs_env.h"
#include "weft/verbs/verbs_transport.h"

namespace weft::verbs::testing {
namespace {

using namespace std::chrono_literals;

// An anonymous mapping that can be mapped again in place.
class Mapping {
 public:
  explicit Mapping(std::size_t bytes) : bytes_(bytes) {
    void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    base_ = p == MAP_FAILED ? nullptr : static_cast<char*>(p);
  }
  ~Mapping() {
    if (base_ != nullptr) ::munmap(base_, bytes_);
  }
  Mapping(const Mapping&) = delete;
  Mapping& operator=(const Mapping&) = delete;
  char* data() const { return base_; }
  std::size_t size() const { return bytes_; }
  // New zero pages at the same address (MAP_FIXED replaces the old mapping
  // in one step, so no other thread can map something into the gap).
  bool remap() {
    void* p = ::mmap(base_, bytes_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
    return p == base_;
  }

 private:
  char* base_ = nullptr;
  std::size_t bytes_;
};

enum class Path { kStaged, kPerCall, kRegistered };

struct RemapCase {
  std::string name;
  std::size_t count;  // int32 elements
  Path path;
};
void PrintTo(const RemapCase& c, std::ostream* os) { *os << c.name; }

// Values that differ by round, rank and element: a call that moved an
// older round's pages, or another rank's, gets a different sum.
std::int32_t value(int round, int rank, std::size_t i) {
  const std::size_t v = i * 2654435761u + static_cast<std::size_t>(round) * 1000003u + static_cast<std::size_t>(rank) * 7919u;
  return static_cast<std::int32_t>(static_cast<std::uint32_t>(v));
}

constexpr std::size_t kOffset = 100;  // the call's buffer starts this far into the mapping
constexpr int kRounds = 3;

class BufferMappedAgain : public ::testing::TestWithParam<RemapCase> {};

TEST_P(BufferMappedAgain, GivesExactSumsEveryRoundAndRegistersOnlyWhatThePathSays) {
  WEFT_REQUIRE_VERBS_ENV(env);
  const RemapCase& k = GetParam();
  constexpr int kRanks = 2;
  coll::testing::run_ranks(
      kRanks,
      [&](coll::Communicator& comm) {
        auto* info = dynamic_cast<VerbsTransportInfo*>(comm.transport_for(1 - comm.rank()));
        ASSERT_NE(info, nullptr);
        const std::size_t page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
        Mapping m((kOffset + k.count * sizeof(std::int32_t) + page - 1) / page * page);
        ASSERT_NE(m.data(), nullptr);
        auto* v = reinterpret_cast<std::int32_t*>(m.data() + kOffset);
        for (int round = 0; round < kRounds; ++round) {
          if (round > 0) {
            ASSERT_TRUE(m.remap()) << "mmap MAP_FIXED";
          }
          for (std::size_t i = 0; i < k.count; ++i) v[i] = value(round, comm.rank(), i);
          coll::BufferRegistration reg;
          if (k.path == Path::kRegistered) {
            auto r = comm.register_buffer(m.data(), m.size());
            ASSERT_TRUE(r) << r.status().to_string();
            reg = std::move(*r);
          }
          const std::uint64_t before = info->memory_registrations();
          const auto t0 = std::chrono::steady_clock::now();
          Status s = comm.allreduce(v, v, k.count, coll::DataType::kI32, coll::ReduceOp::kSum);
          const auto us = std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - t0);
          ASSERT_TRUE(s) << s.to_string();
          const std::uint64_t made = info->memory_registrations() - before;
          const coll::testing::SumCheck c =
              coll::testing::check_sum(v, k.count, kRanks, [&](int r, std::size_t i) { return value(round, r, i); });
          EXPECT_EQ(c.wrong, 0u) << "round " << round << ": first wrong element " << c.first << " of " << k.count;
          switch (k.path) {
            case Path::kRegistered: EXPECT_EQ(made, 0u) << "a registered buffer is used in place"; break;
            case Path::kPerCall: EXPECT_EQ(made, 1u) << "a large unregistered buffer is registered for the call"; break;
            case Path::kStaged: EXPECT_EQ(made, 0u) << "a small unregistered buffer is copied, not registered"; break;
          }
          if (comm.rank() == 0) {
            std::printf("%s round %d: %lld us, %llu registrations\n", k.name.c_str(), round,
                        static_cast<long long>(us.count()), static_cast<unsigned long long>(made));
          }
          if (k.path == Path::kRegistered) {
            ASSERT_TRUE(comm.deregister(reg));
          }
        }
      },
      [&](coll::CommConfig& c) {
        c.transport = "verbs";
        c.verbs.devices = {env.dev_a, env.dev_b};
        c.verbs.spin_polls = 64;  // the ranks share the VM's 2 vCPUs with rxe
        c.timeout = 60s;
        // Scratch registered at setup: a call's registrations are then only
        // the ones its path makes.
        c.scratch_reserve_bytes = 4 << 20;
      });
}

// CommConfig::stage_max_bytes is 256 KiB: 48 KiB + 12 B is staged, 1 MiB +
// 12 B is not.
INSTANTIATE_TEST_SUITE_P(Verbs, BufferMappedAgain,
                         ::testing::Values(RemapCase{"staged_48KiB", 12291, Path::kStaged},
                                           RemapCase{"per_call_1MiB", 262147, Path::kPerCall},
                                           RemapCase{"registered_1MiB", 262147, Path::kRegistered}),
                         [](const ::testing::TestParamInfo<RemapCase>& p) { return p.param.name; });

}  // namespace
}  // namespace weft::verbs::testing
