// Single copy refused (collectives/shm/shm_single_copy.h): rank 1's thread
// runs under a seccomp filter that makes process_vm_readv fail with EPERM,
// as Yama's ptrace_scope 1 does between sibling ranks and a container
// without CAP_SYS_PTRACE does between any. Every call must still sum
// exactly — the messages into rank 1 come through the ring, the others are
// still copied straight from the sender — and rank 1 logs exactly one line
// naming the peers it may not read.
#include <spdlog/sinks/ringbuffer_sink.h>
#include <spdlog/spdlog.h>
#include <sys/syscall.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "exact_sum.h"
#include "harness.h"
#include "seccomp_refuse.h"
#include "shm/shm_transport.h"

namespace weft::coll::testing {
namespace {

using namespace std::chrono_literals;

// Captures what the library logs through spdlog's default logger while it
// lives.
class LogCapture {
 public:
  LogCapture() : sink_(std::make_shared<spdlog::sinks::ringbuffer_sink_mt>(64)) {
    spdlog::default_logger()->sinks().push_back(sink_);
  }
  ~LogCapture() {
    auto& sinks = spdlog::default_logger()->sinks();
    sinks.erase(std::remove(sinks.begin(), sinks.end(), sink_), sinks.end());
  }
  std::vector<std::string> lines_with(const std::string& what) const {
    std::vector<std::string> out;
    for (const std::string& l : sink_->last_formatted()) {
      if (l.find(what) != std::string::npos) out.push_back(l);
    }
    return out;
  }

 private:
  std::shared_ptr<spdlog::sinks::ringbuffer_sink_mt> sink_;
};

struct RefusedCase {
  size_t mib;
  Algorithm algo;  // one-shot: every message is the whole vector, so every pair moves large ones
};

void PrintTo(const RefusedCase& k, std::ostream* os) { *os << k.mib << " MiB, " << algorithm_name(k.algo); }

int32_t value(int rank, size_t i) {
  return static_cast<int32_t>(static_cast<uint32_t>((i * 2654435761u) >> 7) + static_cast<uint32_t>(rank) * 1000003u);
}

class SingleCopyRefused : public ::testing::TestWithParam<RefusedCase> {};

TEST_P(SingleCopyRefused, OneRankThatMayNotReadItsPeersStillSumsExactlyAndLogsOneLine) {
  const RefusedCase& k = GetParam();
  constexpr int kRanks = 3, kRefusing = 1;
  const size_t count = (k.mib << 20) / sizeof(int32_t) + 3;  // a little more: messages of odd lengths
  LogCapture log;
  run_ranks(
      kRanks,
      [&](Communicator& comm) {
        std::vector<int32_t> v(count);
        for (size_t i = 0; i < count; ++i) v[i] = value(comm.rank(), i);
        CollectiveOptions o;
        o.algorithm = k.algo;
        Status s = comm.allreduce(v.data(), v.data(), count, DataType::kI32, ReduceOp::kSum, o);
        ASSERT_TRUE(s) << "rank " << comm.rank() << ": " << s.to_string();
        const SumCheck c = check_sum(v.data(), count, kRanks, value);
        EXPECT_EQ(c.wrong, 0u) << "rank " << comm.rank() << ": first wrong element " << c.first;
        // Rank 1 reads no one; everyone else reads everyone, rank 1 too.
        uint64_t single = 0;
        for (int p = 0; p < kRanks; ++p) {
          if (p == comm.rank()) continue;
          auto* info = dynamic_cast<shm::ShmTransportInfo*>(comm.transport_for(p));
          ASSERT_NE(info, nullptr);
          EXPECT_EQ(info->reads_single_copy(p), comm.rank() != kRefusing) << "rank " << comm.rank() << " from " << p;
          single = info->single_copy_bytes();
        }
        if (comm.rank() == kRefusing) {
          EXPECT_EQ(single, 0u) << "rank 1 read single-copy although process_vm_readv is refused to it";
        } else if (k.algo == Algorithm::kOneShot) {
          EXPECT_GE(single, 2 * count * sizeof(int32_t)) << "rank " << comm.rank() << " copied from both peers";
        }
      },
      [&](CommConfig& c) {
        c.transport = "shm";
        c.timeout = 60s;
        // On rank 1's own thread, before its communicator probes.
        if (c.rank == kRefusing) {
          ASSERT_TRUE(refuse_syscall_in_this_thread(__NR_process_vm_readv, EPERM)) << std::strerror(errno);
        }
      });
  const auto lines = log.lines_with("weft shm:");
  ASSERT_EQ(lines.size(), 1u) << fmt::format("{}", fmt::join(lines, "\n"));
  EXPECT_NE(lines[0].find("rank 1 may not read the memory of rank(s) 0 (Operation not permitted), 2 (Operation not "
                          "permitted) with process_vm_readv"),
            std::string::npos)
      << lines[0];
}

INSTANTIATE_TEST_SUITE_P(Shm, SingleCopyRefused,
                         ::testing::Values(RefusedCase{1, Algorithm::kOneShot}, RefusedCase{16, Algorithm::kOneShot},
                                           RefusedCase{64, Algorithm::kOneShot}, RefusedCase{16, Algorithm::kAuto},
                                           RefusedCase{64, Algorithm::kAuto}),
                         [](const ::testing::TestParamInfo<RefusedCase>& p) {
                           return fmt::format("{}MiB_{}", p.param.mib, algorithm_name(p.param.algo));
                         });

}  // namespace
}  // namespace weft::coll::testing
