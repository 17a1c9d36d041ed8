// Reaper: runs its command when the owner dies without saying done, never
// when it does.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <thread>

#include "weft/common/reaper.h"

namespace weft {
namespace {

namespace fs = std::filesystem;

std::string marker(const char* what) {
  return (fs::temp_directory_path() / ("weft-reaper-" + std::to_string(::getpid()) + "-" + what)).string();
}

bool appears(const std::string& path, std::chrono::milliseconds within) {
  const auto deadline = std::chrono::steady_clock::now() + within;
  while (std::chrono::steady_clock::now() < deadline) {
    if (fs::exists(path)) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return fs::exists(path);
}

TEST(ReaperTest, DoneMeansTheCommandNeverRuns) {
  const std::string m = marker("done");
  fs::remove(m);
  {
    auto r = Reaper::start("touch " + m);
    ASSERT_TRUE(r) << r.status().to_string();
    EXPECT_GT(r->pid(), 0);
  }  // ~Reaper says done and waits for it
  EXPECT_FALSE(appears(m, std::chrono::milliseconds(300)));
}

TEST(ReaperTest, AnOwnerKilledWithSigkillLeavesTheCleanupToTheReaper) {
  const std::string m = marker("killed");
  fs::remove(m);
  const pid_t owner = ::fork();
  ASSERT_GE(owner, 0);
  if (owner == 0) {
    auto r = Reaper::start("touch " + m);
    if (!r) ::_exit(2);
    ::pause();  // until killed
    ::_exit(0);
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  EXPECT_FALSE(fs::exists(m)) << "nothing runs while the owner lives";
  ::kill(owner, SIGKILL);
  ::waitpid(owner, nullptr, 0);
  EXPECT_TRUE(appears(m, std::chrono::seconds(10)));
  fs::remove(m);
}

TEST(ReaperTest, MovingHandsOverTheDuty) {
  const std::string m = marker("moved");
  fs::remove(m);
  auto r = Reaper::start("touch " + m);
  ASSERT_TRUE(r);
  Reaper a = std::move(*r);
  Reaper b;
  b = std::move(a);
  b.done();
  b.done();  // idempotent
  EXPECT_FALSE(appears(m, std::chrono::milliseconds(300)));
}

}  // namespace
}  // namespace weft
