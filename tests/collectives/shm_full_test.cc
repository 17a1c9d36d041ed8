// A /dev/shm too small for the rings (Docker's default is 64 MiB; each rank
// maps 2 MiB per peer): ftruncate reserves nothing, so the shortage shows
// when the pages are first written, which raised SIGBUS and killed the rank
// without a word, its segment left in /dev/shm. Setup must fail with a
// message naming /dev/shm instead. The ranks run in a child process with a
// mount namespace of its own (root) whose /dev/shm is a 6 MiB tmpfs.
#include <sched.h>
#include <sys/mount.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "child_verdict.h"
#include "harness.h"

namespace weft::coll::testing {
namespace {

TEST(ShmFull, ASetupThatDoesNotFitInDevShmFailsNamingItAndLeavesNoSegment) {
  if (::geteuid() != 0) GTEST_SKIP() << "a mount namespace of its own needs root";
  const auto verdict = verdict_in_child([] {
    if (::unshare(CLONE_NEWNS) != 0 || ::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0 ||
        ::mount("tmpfs", "/dev/shm", "tmpfs", 0, "size=6m") != 0) {
      return 'n';
    }
    constexpr int kRanks = 4;
    MemoryStore store;
    std::vector<Status> got(kRanks);
    std::vector<std::thread> ranks;
    for (int r = 0; r < kRanks; ++r) {
      ranks.emplace_back([&, r] {
        CommConfig cfg;
        cfg.rank = r;
        cfg.size = kRanks;
        cfg.transport = "shm";
        cfg.timeout = std::chrono::seconds(20);
        auto c = Communicator::create(cfg, store);
        got[static_cast<size_t>(r)] = c ? ok_status() : c.status();
      });
    }
    for (auto& t : ranks) t.join();
    int named = 0;
    for (const Status& s : got) named += !s && s.message().find("/dev/shm is full or too small") != std::string::npos;
    return named == 0 ? 'x' : !std::filesystem::is_empty("/dev/shm") ? 'l' : 'y';
  });
  ASSERT_TRUE(verdict) << "the ranks' process: " << verdict.status().message();
  // n: no namespace or tmpfs; x: no rank named /dev/shm; l: a segment was left.
  EXPECT_EQ(*verdict, 'y');
}

}  // namespace
}  // namespace weft::coll::testing
