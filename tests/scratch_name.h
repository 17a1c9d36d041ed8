// A name for the running test's scratch file or directory under /tmp:
// "<prefix>-<pid>-<test name>". A parameterised test's name is "Name/3", and
// '/' in a path would make the scratch directory "3" inside another one
// that removing it leaves behind; so '/' becomes '_'.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <string>
#include <string_view>

namespace weft::test {

inline std::string scratch_name(std::string_view prefix) {
  std::string name = std::string(prefix) + "-" + std::to_string(::getpid()) + "-" +
                     ::testing::UnitTest::GetInstance()->current_test_info()->name();
  std::replace(name.begin(), name.end(), '/', '_');
  return name;
}

}  // namespace weft::test
