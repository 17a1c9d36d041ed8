// The tests' scratch names (tests/scratch_name.h): one path component, also
// for a parameterised test, so that removing it removes all of it.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include "../scratch_name.h"

namespace weft::test {
namespace {

class ScratchName : public ::testing::TestWithParam<int> {};

TEST_P(ScratchName, IsOnePathComponentAndRemovingItLeavesNothing) {
  const std::string name = scratch_name("weft-scratch");
  // gtest names a parameterised test "Name/<index of its value>".
  const int index = GetParam() == 0 ? 0 : 1;
  EXPECT_EQ(name, "weft-scratch-" + std::to_string(::getpid()) + "-IsOnePathComponentAndRemovingItLeavesNothing_" +
                      std::to_string(index));
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / name;
  EXPECT_EQ(dir.parent_path(), std::filesystem::temp_directory_path()) << "one component, not a directory in another";
  std::filesystem::create_directories(dir / "inner");
  std::filesystem::remove_all(dir);
  EXPECT_FALSE(std::filesystem::exists(dir));
}

INSTANTIATE_TEST_SUITE_P(Params, ScratchName, ::testing::Values(0, 7));

}  // namespace
}  // namespace weft::test
