// The TCP transport's receive paths (collectives/tcp/tcp_progress.cc): a
// message whose receive is posted before it arrives is read header and
// payload in one readv; one that arrives first waits in the staging buffer
// when small and in the kernel when large ("parked"), and is read straight
// into the receive once that is posted. Each case checks every byte and the
// framing of the messages behind it. Also the waits' view of a same-host
// peer's CPU (tcp/peer_cpu.h).
#include <fmt/format.h>
#include <sched.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <ostream>
#include <string>
#include <thread>
#include <vector>

#include "harness.h"
#include "idle_wait.h"
#include "tcp/peer_cpu.h"
#include "tcp/tcp_internal.h"

namespace weft::coll::testing {
namespace {

using namespace std::chrono_literals;

char pattern(size_t message, size_t i) { return static_cast<char>((i * 7 + message * 131 + i / 4099) & 0xff); }

struct LateCase {
  std::string name;
  std::vector<size_t> sizes;  // sent back to back, in this order
  bool poll_first;            // the receiver polls (sees the messages unasked) before it posts
};

void PrintTo(const LateCase& c, std::ostream* os) { *os << c.name; }

// Two ranks over TCP; `body` gets each rank's communicator, its transport
// and its pair to the other rank.
void run_tcp_pair(std::chrono::seconds timeout, const std::function<void(Communicator&, Transport&, Pair&)>& body) {
  run_ranks(
      2,
      [&](Communicator& comm) {
        Transport* t = comm.transport_for(1 - comm.rank());
        ASSERT_NE(t, nullptr);
        body(comm, *t, *t->pair(1 - comm.rank()));
      },
      [&](CommConfig& c) {
        c.transport = "tcp";
        c.timeout = timeout;
      });
}

class LateReceives : public ::testing::TestWithParam<LateCase> {};

// Rank 0 sends every message and waits until all have left; only then does
// rank 1 post its receives (after polling the transport a few times, where
// the case says so): every message arrives before its receive.
TEST_P(LateReceives, MessagesThatArriveBeforeTheirReceiveAreDeliveredWhole) {
  const LateCase& k = GetParam();
  std::atomic<bool> sent{false};
  run_tcp_pair(30s, [&](Communicator& comm, Transport& t, Pair& p) {
    const Deadline deadline = Clock::now() + 30s;
    std::vector<std::vector<char>> bufs;
    std::vector<std::unique_ptr<Memory>> mems;
    for (size_t m = 0; m < k.sizes.size(); ++m) {
      bufs.emplace_back(k.sizes[m], '\0');
      if (comm.rank() == 0) {
        for (size_t i = 0; i < k.sizes[m]; ++i) bufs[m][i] = pattern(m, i);
      }
      auto mem = t.register_memory(bufs[m].data(), bufs[m].size());
      ASSERT_TRUE(mem) << mem.status().to_string();
      mems.push_back(std::move(*mem));
    }
    Ticket last = 0;
    if (comm.rank() == 0) {
      for (size_t m = 0; m < k.sizes.size(); ++m) {
        auto tk = p.send(*mems[m], 0, k.sizes[m]);
        ASSERT_TRUE(tk) << tk.status().to_string();
        last = *tk;
      }
      Status s = p.wait_send(last, deadline);
      ASSERT_TRUE(s) << s.to_string();
      sent = true;
    } else {
      while (!sent) std::this_thread::sleep_for(1ms);
      if (k.poll_first) {
        for (int i = 0; i < 50; ++i) {
          auto moved = t.poll();
          ASSERT_TRUE(moved) << moved.status().to_string();
          std::this_thread::sleep_for(100us);
        }
      }
      for (size_t m = 0; m < k.sizes.size(); ++m) {
        auto tk = p.recv(*mems[m], 0, k.sizes[m]);
        ASSERT_TRUE(tk) << tk.status().to_string();
        last = *tk;
      }
      Status s = p.wait_recv(last, deadline);
      ASSERT_TRUE(s) << s.to_string();
      for (size_t m = 0; m < k.sizes.size(); ++m) {
        size_t wrong = 0, first = k.sizes[m];
        for (size_t i = 0; i < k.sizes[m]; ++i) {
          if (bufs[m][i] != pattern(m, i)) {
            ++wrong;
            first = std::min(first, i);
          }
        }
        EXPECT_EQ(wrong, 0u) << "message " << m << " (" << k.sizes[m] << " B): first wrong byte " << first;
      }
    }
    // The connection is still framed right: a collective on it works.
    int32_t x = comm.rank() + 1;
    ASSERT_TRUE(comm.allreduce(&x, &x, 1, DataType::kI32, ReduceOp::kSum));
    EXPECT_EQ(x, 3);
  });
}

// Sizes around the transport's thresholds: 16 KiB (kDirectMin: read
// straight into the receive from there), 256 KiB (kStageBytes, and the
// striping threshold), and a megabyte.
INSTANTIATE_TEST_SUITE_P(
    Tcp, LateReceives,
    ::testing::Values(LateCase{"large_then_small", {(1u << 20) + 5, 3}, true},
                      LateCase{"large_then_small_posted_unpolled", {(1u << 20) + 5, 3}, false},
                      LateCase{"small_large_small_large", {13, 262147, 7, (16u << 10) + 7}, true},
                      LateCase{"just_below_and_at_the_direct_threshold", {(16u << 10) - 1, 16u << 10, 5}, true},
                      LateCase{"two_larger_than_the_stage", {(256u << 10) + 13, (512u << 10) + 3}, true},
                      LateCase{"two_larger_than_the_stage_unpolled", {(256u << 10) + 13, (512u << 10) + 3}, false}),
    [](const ::testing::TestParamInfo<LateCase>& p) { return p.param.name; });

class PostedLength : public ::testing::TestWithParam<std::pair<size_t, size_t>> {};

// A large message whose receive is already posted with another length is
// read by the one-readv path; the receiver must still fail naming both
// lengths (the bytes that landed in its memory are not the message's).
TEST_P(PostedLength, AMessageLongerOrShorterThanItsPostedReceiveFailsNamingBothLengths) {
  const auto [sent_len, posted_len] = GetParam();
  std::atomic<bool> posted{false};
  run_tcp_pair(10s, [&](Communicator& comm, Transport& t, Pair& p) {
    const Deadline deadline = Clock::now() + 10s;
    std::vector<char> buf(std::max(sent_len, posted_len), 'x');
    auto mem = t.register_memory(buf.data(), buf.size());
    ASSERT_TRUE(mem) << mem.status().to_string();
    if (comm.rank() == 1) {
      auto tk = p.recv(**mem, 0, posted_len);
      ASSERT_TRUE(tk) << tk.status().to_string();
      posted = true;
      Status s = p.wait_recv(*tk, deadline);
      ASSERT_FALSE(s) << "a " << sent_len << "-byte message completed a " << posted_len << "-byte receive";
      EXPECT_NE(s.message().find(fmt::format("rank 0 has {} bytes where this rank posted a receive of {} bytes",
                                             sent_len, posted_len)),
                std::string::npos)
          << s.to_string();
    } else {
      while (!posted) std::this_thread::sleep_for(1ms);
      auto tk = p.send(**mem, 0, sent_len);
      ASSERT_TRUE(tk) << tk.status().to_string();
      // The receiver gives up either way; the send may end ok (the
      // bytes left) or with the receiver's abort.
      (void)p.wait_send(*tk, deadline);
    }
  });
}

INSTANTIATE_TEST_SUITE_P(Tcp, PostedLength,
                         ::testing::Values(std::pair<size_t, size_t>{(64u << 10) + 3, 64u << 10},
                                           std::pair<size_t, size_t>{64u << 10, (64u << 10) + 3},
                                           std::pair<size_t, size_t>{(1u << 20) + 7, (16u << 10) + 1},
                                           std::pair<size_t, size_t>{(16u << 10) + 1, (1u << 20) + 7}),
                         [](const ::testing::TestParamInfo<std::pair<size_t, size_t>>& p) {
                           return fmt::format("sent_{}_posted_{}", p.param.first, p.param.second);
                         });

// A peer that gives up sends its reason as a kAbort frame; arriving where a
// large receive is posted, the frame's bytes land in that receive's memory
// first (the one-readv path) and must be judged from there: the survivor
// names the peer and its reason, not a garbled one.
TEST(TcpAbort, APeersReasonArrivingWhereALargeReceiveIsPostedIsReported) {
  std::atomic<bool> posted{false}, aborted{false};
  run_tcp_pair(10s, [&](Communicator& comm, Transport& t, Pair& p) {
    if (comm.rank() == 1) {
      std::vector<char> buf(1u << 20, 'x');
      auto mem = t.register_memory(buf.data(), buf.size());
      ASSERT_TRUE(mem) << mem.status().to_string();
      auto tk = p.recv(**mem, 0, buf.size());
      ASSERT_TRUE(tk) << tk.status().to_string();
      posted = true;
      // Read only once the whole frame is there: header and reason in
      // one read.
      while (!aborted) std::this_thread::sleep_for(1ms);
      std::this_thread::sleep_for(20ms);
      Status s = p.wait_recv(*tk, Clock::now() + 10s);
      ASSERT_FALSE(s);
      EXPECT_NE(s.message().find("rank 0 gave up: rank 0: the reason, 13 words long"), std::string::npos)
          << s.to_string();
    } else {
      while (!posted) std::this_thread::sleep_for(1ms);
      comm.abort("the reason, 13 words long");
      aborted = true;
    }
  });
}

// abort() from another thread while a call is inside the transport (it
// holds the lock, so abort only tries it) and a call that ends without
// polling again: the peers still hear the reason at once, when that call
// releases the lock, not at their timeout; and the rank's goodbye when it
// closes does not hide the reason either.
TEST(TcpAbort, AnAbortWhileACallHoldsTheTransportReachesThePeersWhenTheCallLeaves) {
  std::atomic<bool> posted{false}, heard{false};
  run_tcp_pair(20s, [&](Communicator& comm, Transport& t, Pair& p) {
    if (comm.rank() == 1) {
      std::vector<char> buf(4096);
      auto mem = t.register_memory(buf.data(), buf.size());
      ASSERT_TRUE(mem) << mem.status().to_string();
      auto tk = p.recv(**mem, 0, buf.size());
      ASSERT_TRUE(tk) << tk.status().to_string();
      posted = true;
      const auto t0 = Clock::now();
      Status s = p.wait_recv(*tk, Clock::now() + 15s);
      heard = true;
      ASSERT_FALSE(s);
      EXPECT_NE(s.message().find("rank 0 gave up: rank 0: pressed stop mid-call"), std::string::npos) << s.to_string();
      EXPECT_LT(Clock::now() - t0, 5s) << "heard at the deadline, not when the call left";
    } else {
      while (!posted) std::this_thread::sleep_for(1ms);
      {
        auto inside = dynamic_cast<tcp::TcpTransport&>(t).lock();  // a call of this rank's, inside
        std::thread([&] { comm.abort("pressed stop mid-call"); }).join();
      }
      // No more calls until rank 1 has heard (or given up).
      const auto until = Clock::now() + 16s;
      while (!heard && Clock::now() < until) std::this_thread::sleep_for(1ms);
    }
  });
}

// The peer's CPU, as the waits read it: this process as its own peer.
TEST(PeerCpu, ReadsTheCpuAProcessRunsOnAndNothingForAnUnknownPid) {
  EXPECT_FALSE(tcp::PeerCpu(0).known());
  EXPECT_FALSE(tcp::PeerCpu(-1).known());
  cpu_set_t all;
  ASSERT_EQ(::sched_getaffinity(0, sizeof all, &all), 0);
  int last = -1;
  for (int c = 0; c < CPU_SETSIZE; ++c) {
    if (CPU_ISSET(c, &all)) last = c;
  }
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(last, &one);
  // A thread of its own: the pid's main thread is the one /proc/pid/stat
  // reports, so read /proc/<tid>/stat of this thread (a thread id is a
  // pid to procfs).
  int seen = -2, tid = 0;
  std::thread t([&] {
    tid = static_cast<int>(::gettid());
    if (::sched_setaffinity(0, sizeof one, &one) != 0) return;
    seen = tcp::PeerCpu(tid).cpu();
  });
  t.join();
  EXPECT_EQ(seen, last) << "thread " << tid << " pinned to CPU " << last;
}

TEST(PeerCpu, LeavingACpuMovesTheThreadAndKeepsItsCpus) {
  cpu_set_t all;
  ASSERT_EQ(::sched_getaffinity(0, sizeof all, &all), 0);
  if (CPU_COUNT(&all) < 2) GTEST_SKIP() << "needs two usable CPUs (this process may use " << CPU_COUNT(&all) << ")";
  std::thread t([&] {
    const int before = ::sched_getcpu();
    internal::leave_cpu(before);
    EXPECT_NE(::sched_getcpu(), before);
    cpu_set_t now;
    ASSERT_EQ(::sched_getaffinity(0, sizeof now, &now), 0);
    EXPECT_TRUE(CPU_EQUAL(&now, &all)) << "the thread's CPUs were not given back";
  });
  t.join();
}

}  // namespace
}  // namespace weft::coll::testing
