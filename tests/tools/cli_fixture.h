// The weft binary run as a user runs it, in a fresh directory per test.
#pragma once

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "weft/common/file_util.h"
#include "../scratch_name.h"

inline namespace cli_fixture {
namespace fs = std::filesystem;

struct CliRun {
  int rc;
  std::string out;
  std::string err;
};

class Cli : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / weft::test::scratch_name("weft-cli");
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  void write(const std::string& name, const std::string& text) const { std::ofstream(path(name)) << text; }

  // `stdout_to`: a shell redirection of standard output instead of the
  // captured file (e.g. ">/dev/full", ">&-"); out is then "".
  CliRun weft(const std::string& args, const std::string& stdout_to = "") const {
    const std::string out = path("stdout"), err = path("stderr");
    std::ofstream(out).flush();
    std::string cmd = std::string(WEFT_BINARY_DIR) + "/weft " + args + " " + (stdout_to.empty() ? ">" + out : stdout_to) +
                      " 2>" + err;
    int st = std::system(cmd.c_str());
    CliRun r{WIFEXITED(st) ? WEXITSTATUS(st) : -1, weft::read_file(out).value(), weft::read_file(err).value()};
    return r;
  }

  fs::path dir_;
};
}  // namespace cli_fixture
