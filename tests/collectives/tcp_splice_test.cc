// Held sends over TCP (Pair::send_held, collectives/tcp/tcp_splice.cc): a
// held message at least TcpOptions::splice_min_bytes long goes out from the
// sender's pages through a pipe. Each case sends a mix of held and copied
// messages (unaligned starts, lengths around the thresholds, striped over
// two connections or not), checks every byte and the framing behind them,
// and that exactly the held parts long enough were spliced
// (TcpTransportInfo::spliced_bytes): a path that silently copied fails.
#include <fmt/format.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstring>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <ostream>
#include <string>
#include <thread>
#include <vector>

#include "exact_sum.h"
#include "harness.h"
#include "seccomp_refuse.h"
#include "tcp/tcp_transport.h"

namespace weft::coll::testing {
namespace {

using namespace std::chrono_literals;

constexpr size_t kStripeMin = 256 << 10;  // tcp_internal.h: messages this long are striped

char splice_pattern(size_t message, size_t i) { return static_cast<char>((i * 13 + message * 71 + i / 4093) & 0xff); }

struct Msg {
  size_t len;
  size_t start;  // offset into the sender's buffer: page-unaligned starts
  bool held;
};

struct SpliceCase {
  std::string name;
  std::vector<Msg> msgs;
  int connections;
  size_t splice_min;
  bool late;  // the receiver posts only after every send has left
};

void PrintTo(const SpliceCase& c, std::ostream* os) { *os << c.name; }

// What the transport must have spliced: the held messages' parts (one per
// connection once striped) of at least splice_min bytes.
uint64_t expected_spliced(const SpliceCase& k) {
  uint64_t sum = 0;
  for (const Msg& m : k.msgs) {
    if (!m.held || k.splice_min == 0) continue;
    const size_t parts = m.len >= kStripeMin ? static_cast<size_t>(k.connections) : 1;
    for (size_t j = 0; j < parts; ++j) {
      const size_t part = m.len * (j + 1) / parts - m.len * j / parts;
      if (part >= k.splice_min) sum += part;
    }
  }
  return sum;
}

class HeldSends : public ::testing::TestWithParam<SpliceCase> {};

TEST_P(HeldSends, ArriveWholeInOrderAndOnlyTheLongHeldPartsAreSpliced) {
  const SpliceCase& k = GetParam();
  std::atomic<bool> sent{false};
  run_ranks(
      2,
      [&](Communicator& comm) {
        Transport* t = comm.transport_for(1 - comm.rank());
        ASSERT_NE(t, nullptr);
        auto* info = dynamic_cast<tcp::TcpTransportInfo*>(t);
        ASSERT_NE(info, nullptr);
        Pair& p = *t->pair(1 - comm.rank());
        const Deadline deadline = Clock::now() + 30s;
        std::vector<std::vector<char>> bufs;
        std::vector<std::unique_ptr<Memory>> mems;
        for (size_t m = 0; m < k.msgs.size(); ++m) {
          bufs.emplace_back(k.msgs[m].start + k.msgs[m].len, '\0');
          if (comm.rank() == 0) {
            for (size_t i = 0; i < k.msgs[m].len; ++i) bufs[m][k.msgs[m].start + i] = splice_pattern(m, i);
          }
          auto mem = t->register_memory(bufs[m].data(), bufs[m].size());
          ASSERT_TRUE(mem) << mem.status().to_string();
          mems.push_back(std::move(*mem));
        }
        const uint64_t before = info->spliced_bytes();
        Ticket last = 0;
        if (comm.rank() == 0) {
          for (size_t m = 0; m < k.msgs.size(); ++m) {
            const Msg& g = k.msgs[m];
            auto tk = g.held ? p.send_held(*mems[m], g.start, g.len) : p.send(*mems[m], g.start, g.len);
            ASSERT_TRUE(tk) << tk.status().to_string();
            last = *tk;
          }
          Status s = p.wait_send(last, deadline);
          ASSERT_TRUE(s) << s.to_string();
          sent = true;
          EXPECT_EQ(info->spliced_bytes() - before, expected_spliced(k));
        } else {
          while (k.late && !sent) std::this_thread::sleep_for(1ms);
          for (size_t m = 0; m < k.msgs.size(); ++m) {
            auto tk = p.recv(*mems[m], k.msgs[m].start, k.msgs[m].len);
            ASSERT_TRUE(tk) << tk.status().to_string();
            last = *tk;
          }
          Status s = p.wait_recv(last, deadline);
          ASSERT_TRUE(s) << s.to_string();
          for (size_t m = 0; m < k.msgs.size(); ++m) {
            size_t wrong = 0, first = k.msgs[m].len;
            for (size_t i = 0; i < k.msgs[m].len; ++i) {
              if (bufs[m][k.msgs[m].start + i] != splice_pattern(m, i)) {
                ++wrong;
                first = std::min(first, i);
              }
            }
            EXPECT_EQ(wrong, 0u) << "message " << m << " (" << k.msgs[m].len << " B): first wrong byte " << first;
          }
        }
        // The senders' pages are read until the receiver has them: the
        // sender keeps its buffers until this collective says it had.
        int32_t x = comm.rank() + 1;
        ASSERT_TRUE(comm.allreduce(&x, &x, 1, DataType::kI32, ReduceOp::kSum));
        EXPECT_EQ(x, 3);
      },
      [&](CommConfig& c) {
        c.transport = "tcp";
        c.timeout = 30s;
        c.tcp.connections_per_peer = k.connections;
        c.tcp.splice_min_bytes = k.splice_min;
      });
}

constexpr size_t K = 1024;
const std::vector<Msg> kMix = {{3, 1, true},
                               {64 * K - 1, 7, true},  // one byte short of splicing
                               {64 * K, 4095, true},   // exactly the threshold
                               {100 * K + 3, 0, false},
                               {(1u << 20) + 5, 333, true},  // striped when two connections
                               {17, 5, true},
                               {(6u << 20) + 11, 4097, true}};  // more than a socket buffer and a pipe

INSTANTIATE_TEST_SUITE_P(
    Tcp, HeldSends,
    ::testing::Values(SpliceCase{"mix_posted_first", kMix, 1, 64 * K, false},
                      SpliceCase{"mix_late", kMix, 1, 64 * K, true},
                      SpliceCase{"mix_two_connections", kMix, 2, 64 * K, false},
                      SpliceCase{"mix_never_spliced", kMix, 1, 0, false},
                      SpliceCase{"mix_only_the_largest", kMix, 1, 2u << 20, true},
                      SpliceCase{"back_to_back_held", {{300 * K + 1, 1, true}, {300 * K + 2, 2, true}, {9, 3, true}},
                                 2, 64 * K, true}),
    [](const ::testing::TestParamInfo<SpliceCase>& p) { return p.param.name; });

struct HeldAllreduce {
  Algorithm algo;
  int ranks;
  size_t count;
  bool in_place;
};

class HeldAllreduces : public ::testing::TestWithParam<HeldAllreduce> {};

// The held contract end to end: HD's and ring's reduce-scatter sends go out
// from the ranks' own pages (splice_min_bytes 4 KiB: nearly every one), and
// every rank rewrites its buffers the moment a call returns. A send whose
// pages were still read after that would hand a peer the next call's
// values: every integer sum is checked exactly, call after call.
TEST_P(HeldAllreduces, ConsecutiveCallsThatRewriteTheirBuffersAtOnceSumExactly) {
  const HeldAllreduce& k = GetParam();
  constexpr int kCalls = 6;
  run_ranks(
      k.ranks,
      [&](Communicator& comm) {
        auto* info = dynamic_cast<tcp::TcpTransportInfo*>(comm.transport_for((comm.rank() + 1) % k.ranks));
        ASSERT_NE(info, nullptr);
        const uint64_t before = info->spliced_bytes();
        std::vector<int64_t> in(k.count), out(k.count);
        auto value = [&](int call, int rank, size_t i) {
          return static_cast<int64_t>(i * 31 + static_cast<size_t>(call) * 1000003 + static_cast<size_t>(rank) * 7919);
        };
        for (int call = 0; call < kCalls; ++call) {
          for (size_t i = 0; i < k.count; ++i) in[i] = value(call, comm.rank(), i);
          CollectiveOptions o;
          o.algorithm = k.algo;
          int64_t* dst = k.in_place ? in.data() : out.data();
          Status s = comm.allreduce(in.data(), dst, k.count, DataType::kI64, ReduceOp::kSum, o);
          ASSERT_TRUE(s) << s.to_string();
          const SumCheck c = check_sum(dst, k.count, k.ranks, [&](int r, size_t i) { return value(call, r, i); });
          ASSERT_EQ(c.wrong, 0u) << "call " << call << ": first wrong element " << c.first;
          // At once: the peers may not have read this call's last messages.
          std::fill(in.begin(), in.end(), -1);
          std::fill(out.begin(), out.end(), -1);
        }
        EXPECT_GT(info->spliced_bytes(), before) << "no send was spliced: the case tests nothing";
      },
      [&](CommConfig& c) {
        c.transport = "tcp";
        c.timeout = 60s;
        c.tcp.splice_min_bytes = 4096;
      });
}

INSTANTIATE_TEST_SUITE_P(
    Tcp, HeldAllreduces,
    ::testing::Values(HeldAllreduce{Algorithm::kHalvingDoubling, 2, 262147, true},
                      HeldAllreduce{Algorithm::kHalvingDoubling, 3, 100003, false},  // the fold's send is held too
                      HeldAllreduce{Algorithm::kHalvingDoubling, 4, 65537, true},
                      HeldAllreduce{Algorithm::kHalvingDoubling, 5, 262147, true},
                      HeldAllreduce{Algorithm::kRing, 2, 262147, false},
                      HeldAllreduce{Algorithm::kRing, 3, 100003, true},
                      HeldAllreduce{Algorithm::kRing, 4, 65537, true}),
    [](const ::testing::TestParamInfo<HeldAllreduce>& p) {
      return fmt::format("{}_{}ranks_{}_{}", p.param.algo == Algorithm::kRing ? "ring" : "hd", p.param.ranks,
                         p.param.count, p.param.in_place ? "in_place" : "out_of_place");
    });

// Rank 0 runs `impede` on its own thread, sends `messages` held messages of
// `len` bytes and runs `restore`; the sends must be copied (spliced_bytes
// stays 0), every byte must arrive, and the connection must stay usable.
void expect_copied_when(size_t len, int messages, const std::function<bool()>& impede,
                        const std::function<void()>& restore) {
  run_ranks(
      2,
      [&](Communicator& comm) {
        Transport* t = comm.transport_for(1 - comm.rank());
        ASSERT_NE(t, nullptr);
        auto* info = dynamic_cast<tcp::TcpTransportInfo*>(t);
        ASSERT_NE(info, nullptr);
        Pair& p = *t->pair(1 - comm.rank());
        std::vector<char> buf(len, '\0');
        auto mem = t->register_memory(buf.data(), buf.size());
        ASSERT_TRUE(mem) << mem.status().to_string();
        const Deadline deadline = Clock::now() + 30s;
        if (comm.rank() == 0) {
          for (size_t i = 0; i < len; ++i) buf[i] = splice_pattern(9, i);
          ASSERT_TRUE(impede()) << std::strerror(errno);
          Status s;
          for (int m = 0; m < messages && s; ++m) {
            auto tk = p.send_held(**mem, 0, len);
            s = tk ? p.wait_send(*tk, deadline) : tk.status();
          }
          restore();
          ASSERT_TRUE(s) << s.to_string();
          EXPECT_EQ(info->spliced_bytes(), 0u);
        } else {
          for (int m = 0; m < messages; ++m) {
            auto tk = p.recv(**mem, 0, len);
            ASSERT_TRUE(tk) << tk.status().to_string();
            Status s = p.wait_recv(*tk, deadline);
            ASSERT_TRUE(s) << s.to_string();
            size_t wrong = 0;
            for (size_t i = 0; i < len; ++i) wrong += buf[i] != splice_pattern(9, i);
            EXPECT_EQ(wrong, 0u) << "message " << m;
            std::fill(buf.begin(), buf.end(), '\0');
          }
        }
        int32_t x = comm.rank() + 1;
        ASSERT_TRUE(comm.allreduce(&x, &x, 1, DataType::kI32, ReduceOp::kSum));
        EXPECT_EQ(x, 3);
      },
      [](CommConfig& c) {
        c.transport = "tcp";
        c.timeout = 30s;
      });
}

// Where vmsplice is refused, held sends are copied.
TEST(TcpSpliceRefused, HeldSendsAreCopiedWhereVmspliceIsNotAllowed) {
  // The filter stays on the rank's thread, which ends with run_ranks.
  // vmsplice(2) fails with EPERM on rank 0's thread only.
  expect_copied_when((3u << 20) + 17, 2, [] { return refuse_syscall_in_this_thread(__NR_vmsplice, EPERM); }, [] {});
}

// Where no pipe can be made (here: no descriptor left; in production also a
// user over its pipe quota, whose pipes cannot grow), held sends are copied.
TEST(TcpSpliceNoPipe, HeldSendsAreCopiedWhereNoPipeCanBeMade) {
  rlimit old{};
  ASSERT_EQ(::getrlimit(RLIMIT_NOFILE, &old), 0);
  // The lowest free descriptor becomes the limit: pipe2 fails with EMFILE,
  // the sockets already open keep working.
  auto impede = [&] {
    const int lowest = ::dup(0);
    if (lowest < 0) return false;
    ::close(lowest);
    rlimit tight = old;
    tight.rlim_cur = static_cast<rlim_t>(lowest);
    return ::setrlimit(RLIMIT_NOFILE, &tight) == 0;
  };
  expect_copied_when((2u << 20) + 3, 1, impede, [&] { ::setrlimit(RLIMIT_NOFILE, &old); });
}

// A rank that gives up halfway through a spliced message first finishes
// that frame, copied from where the socket took it to (the pipe's bytes are
// dropped), so the peer reads every byte of it and then the reason, which
// it names, not a garbled stream.
TEST(TcpSpliceAbort, AReasonSentBehindAHalfSplicedMessageIsReported) {
  std::atomic<bool> queued{false};
  run_ranks(
      2,
      [&](Communicator& comm) {
        Transport* t = comm.transport_for(1 - comm.rank());
        ASSERT_NE(t, nullptr);
        Pair& p = *t->pair(1 - comm.rank());
        std::vector<char> buf(24u << 20, 'y');  // more than the socket buffers and the pipe hold
        if (comm.rank() == 0) {
          for (size_t i = 0; i < buf.size(); ++i) buf[i] = splice_pattern(5, i);
        }
        auto mem = t->register_memory(buf.data(), buf.size());
        ASSERT_TRUE(mem) << mem.status().to_string();
        if (comm.rank() == 0) {
          auto tk = p.send_held(**mem, 0, buf.size());
          ASSERT_TRUE(tk) << tk.status().to_string();
          queued = true;
          std::this_thread::sleep_for(50ms);  // the pipe and the socket fill; the frame is half out
          comm.abort("gave up mid-message");
          (void)p.wait_send(*tk, Clock::now() + 10s);
        } else {
          while (!queued) std::this_thread::sleep_for(1ms);
          std::this_thread::sleep_for(20ms);
          auto tk = p.recv(**mem, 0, buf.size());
          ASSERT_TRUE(tk) << tk.status().to_string();
          ASSERT_TRUE(p.wait_recv(*tk, Clock::now() + 10s));  // the frame was finished before the notice
          size_t wrong = 0;
          for (size_t i = 0; i < buf.size(); ++i) wrong += buf[i] != splice_pattern(5, i);
          EXPECT_EQ(wrong, 0u);
          // The reason follows: the next receive fails with it, when it is
          // posted or when it is waited for.
          auto tk2 = p.recv(**mem, 0, 4);
          const Status s = tk2 ? p.wait_recv(*tk2, Clock::now() + 10s) : tk2.status();
          ASSERT_FALSE(s);
          EXPECT_NE(s.message().find("rank 0 gave up: rank 0: gave up mid-message"), std::string::npos) << s.to_string();
        }
      },
      [](CommConfig& c) {
        c.transport = "tcp";
        c.timeout = 30s;
      });
}

}  // namespace
}  // namespace weft::coll::testing
