// write_file_atomic (common/weft/common/file_util.h): the mode a file gets,
// and nothing left behind when it cannot be written.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>

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

}  // namespace
}  // namespace weft
