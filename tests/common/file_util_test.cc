// write_file_atomic (common/weft/common/file_util.h): the mode a file gets,
// nothing left behind when it cannot be written, a FIFO written through (as
// /dev/null must be), a link followed, a directory refused; read_file: every
// byte, with the spare capacity asked for.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <iterator>
#include <string>
#include <thread>

#include "weft/common/file_util.h"

namespace weft {
namespace {

namespace fs = std::filesystem;

class WriteFileAtomic : public ::testing::Test {
 protected:
  void SetUp() override {
    fs::create_directories(dir_);
    old_umask_ = ::umask(027);  // tests run one at a time in this process
  }
  void TearDown() override {
    ::umask(old_umask_);
    fs::remove_all(dir_);
  }
  static mode_t mode_of(const std::string& p) {
    struct stat st{};
    EXPECT_EQ(::stat(p.c_str(), &st), 0) << p;
    return st.st_mode & 07777;
  }
  std::string path(const char* name) const { return (dir_ / name).string(); }
  fs::path dir_ = fs::temp_directory_path() / ("weft-file-util-" + std::to_string(::getpid()));
  mode_t old_umask_ = 0;
};

TEST_F(WriteFileAtomic, ANewFileGetsTheModeOpenWouldGiveIt) {
  ASSERT_TRUE(write_file_atomic(path("plan.json"), "{}\n"));
  EXPECT_EQ(mode_of(path("plan.json")), 0640u);  // 0666 less the umask 027
  EXPECT_EQ(read_file(path("plan.json")).value(), "{}\n");
}

TEST_F(WriteFileAtomic, AReplacedFileKeepsItsMode) {
  ASSERT_TRUE(write_file_atomic(path("ranks.txt"), "a\n", 0600));
  ASSERT_TRUE(write_file_atomic(path("ranks.txt"), "b\n"));
  EXPECT_EQ(mode_of(path("ranks.txt")), 0600u);
  EXPECT_EQ(read_file(path("ranks.txt")).value(), "b\n");
}

TEST_F(WriteFileAtomic, AnExplicitModeIsTheFilesFromTheStart) {
  ASSERT_TRUE(write_file_atomic(path("secret"), "s3cret-s3cret-s3cret\n", 0600));
  EXPECT_EQ(mode_of(path("secret")), 0600u);
  EXPECT_TRUE(read_secret_file(path("secret"), 16)) << "a secret written this way is accepted as one";
  ASSERT_TRUE(write_file_atomic(path("secret"), "other\n", 0644));
  EXPECT_EQ(mode_of(path("secret")), 0644u);
}

TEST_F(WriteFileAtomic, AFileThatCannotBeWrittenLeavesNothingBehind) {
  const Status s = write_file_atomic(path("missing-dir/out.json"), "x");
  EXPECT_FALSE(s);
  EXPECT_NE(s.message().find("cannot create a file beside " + path("missing-dir/out.json")), std::string::npos)
      << s.message();
  EXPECT_TRUE(fs::is_empty(dir_));
}

// Renaming onto a FIFO (or a device: /dev/null) would replace the node with a
// regular file: it is written through and stays what it was. The reader
// opens first without blocking, so a writer that renamed instead leaves it
// empty rather than hung.
TEST_F(WriteFileAtomic, AFifoIsWrittenThroughAndStaysAFifo) {
  ASSERT_EQ(::mkfifo(path("fifo").c_str(), 0600), 0);
  const int fd = ::open(path("fifo").c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  const std::string text = "through the fifo\n";
  std::string got;
  std::thread reader([&] {
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    char buf[64];
    while (got.size() < text.size() && std::chrono::steady_clock::now() < until) {
      const ssize_t n = ::read(fd, buf, sizeof buf);
      if (n > 0) {
        got.append(buf, static_cast<size_t>(n));
      } else {
        std::this_thread::sleep_for(std::chrono::milliseconds(5));  // no writer yet, or no data
      }
    }
  });
  const Status s = write_file_atomic(path("fifo"), text);
  reader.join();
  ::close(fd);
  ASSERT_TRUE(s) << s.message();
  EXPECT_EQ(got, text);
  struct stat st{};
  ASSERT_EQ(::lstat(path("fifo").c_str(), &st), 0);
  EXPECT_TRUE(S_ISFIFO(st.st_mode));
  EXPECT_EQ(std::distance(fs::directory_iterator(dir_), fs::directory_iterator{}), 1) << "nothing else left";
}

TEST_F(WriteFileAtomic, ALinkIsFollowedAndTheFileItNamesReplaced) {
  ASSERT_TRUE(write_file_atomic(path("target.json"), "old\n", 0600));
  fs::create_symlink("target.json", path("link.json"));
  ASSERT_TRUE(write_file_atomic(path("link.json"), "new\n"));
  EXPECT_TRUE(fs::is_symlink(path("link.json")));
  EXPECT_EQ(read_file(path("target.json")).value(), "new\n");
  EXPECT_EQ(mode_of(path("target.json")), 0600u);
  EXPECT_EQ(std::distance(fs::directory_iterator(dir_), fs::directory_iterator{}), 2) << "nothing else left";
}

TEST_F(WriteFileAtomic, ADirectoryIsRefusedByName) {
  fs::create_directory(path("d"));
  const Status s = write_file_atomic(path("d"), "x");
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), path("d") + " is a directory");
  EXPECT_TRUE(fs::is_empty(path("d")));
}

class ReadFile : public WriteFileAtomic, public ::testing::WithParamInterface<std::tuple<size_t, size_t>> {};

// Sizes around the reader's 64 KiB chunks; spare as simdjson asks (64) and
// more.
TEST_P(ReadFile, ReturnsEveryByteWithTheSpareCapacity) {
  const auto [bytes, spare] = GetParam();
  std::string text(bytes, '\0');
  for (size_t i = 0; i < bytes; ++i) text[i] = static_cast<char>(i * 131 + 7);
  ASSERT_TRUE(write_file_atomic(path("f"), text));
  Result<std::string> back = read_file(path("f"), spare);
  ASSERT_TRUE(back) << back.status().message();
  EXPECT_EQ(*back, text);
  EXPECT_GE(back->capacity() - back->size(), spare);
}

INSTANTIATE_TEST_SUITE_P(Sizes, ReadFile,
                         ::testing::Combine(::testing::Values(size_t{0}, size_t{1}, size_t{65535}, size_t{65536},
                                                              size_t{65537}, size_t{300001}),
                                            ::testing::Values(size_t{0}, size_t{64}, size_t{4097})));

// A file stat(2) gives no size for (procfs says 0) is read to its end.
TEST_F(WriteFileAtomic, AFileWithoutASizeIsReadToItsEnd) {
  Result<std::string> s = read_file("/proc/self/status", 64);
  ASSERT_TRUE(s) << s.status().message();
  EXPECT_NE(s->find("Name:"), std::string::npos);
  EXPECT_NE(s->find("VmRSS:"), std::string::npos) << "the end of the file is there too";
  EXPECT_GE(s->capacity() - s->size(), 64u);
}

TEST_F(WriteFileAtomic, ADirectoryIsAnErrorNamingIt) {
  Result<std::string> s = read_file(dir_.string());
  ASSERT_FALSE(s);
  EXPECT_NE(s.status().message().find("cannot read " + dir_.string()), std::string::npos) << s.status().message();
}

TEST_F(WriteFileAtomic, AMissingFileIsAnErrorNamingIt) {
  Result<std::string> s = read_file(path("none.json"));
  ASSERT_FALSE(s);
  EXPECT_NE(s.status().message().find("cannot open " + path("none.json")), std::string::npos) << s.status().message();
}

}  // namespace
}  // namespace weft
