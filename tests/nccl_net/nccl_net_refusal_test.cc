// What the plugin says when it refuses, on any host (no RDMA device
// needed): a refused init reaches stderr, where a job's output goes, and
// not only NCCL's logger, which prints it at INFO (NCCL then falls back to
// its own transport).
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <tuple>
#include <vector>

#include <fmt/format.h>

#include "log_capture.h"
#include "weft/nccl_net/driver.h"

namespace weft::nccl_net::testing {
namespace {

// A POSIX extended regex (what gtest's death tests match on Linux) that
// matches exactly `text`, the whole of it.
std::string exactly(const std::string& text) {
  std::string re = "^";
  for (char ch : text) {
    if (std::string_view("^$.*+?()[]{}|\\").find(ch) != std::string_view::npos) re += '\\';
    re += ch;
  }
  return re + "$";
}

std::string init_line(const std::string& why) {
  return fmt::format("init: {}; NCCL goes on without this plugin (NCCL_NET=weft makes that an error instead: "
                     "docs/nccl.md)",
                     why);
}

// In the child a death test forks: loads the plugin, and for each
// WEFT_NCCL_QPS value calls init twice, as NCCL does for each communicator.
// Exits 0 when every init failed with ncclInvalidArgument (bad input) and
// NCCL's logger got the failure as a WARN line every time.
void init_with_qps(int version, const std::vector<std::string>& values) {
  auto d = Driver::load(version);
  if (!d) std::exit(2);
  int logged = 0;
  for (const std::string& v : values) {
    setenv("WEFT_NCCL_QPS", v.c_str(), 1);
    for (int call = 0; call < 2; ++call) {
      if (d->init(collect_log) != ncclInvalidArgument) std::exit(3);
    }
    logged += said(fmt::format("NET/weft: init: WEFT_NCCL_QPS={} is not a QP count (1..16)", v));
  }
  for (const auto& l : log_lines()) {
    if (l.level != NCCL_LOG_WARN) std::exit(4);
  }
  std::exit(logged == 2 * static_cast<int>(values.size()) ? 0 : 5);
}

class RefusedInit : public ::testing::TestWithParam<std::tuple<int, std::string>> {};

TEST_P(RefusedInit, IsOneLineOnStderrHoweverOftenNcclCallsInit) {
  const auto& [version, qps] = GetParam();
  const std::string why = fmt::format("WEFT_NCCL_QPS={} is not a QP count (1..16)", qps);
  EXPECT_EXIT(init_with_qps(version, {qps}), ::testing::ExitedWithCode(0),
              exactly(fmt::format("weft nccl_net: {}\n", init_line(why))));
}

TEST_P(RefusedInit, ForAnotherCauseIsAnotherLineOnStderr) {
  const auto& [version, qps] = GetParam();
  EXPECT_EXIT(init_with_qps(version, {qps, "17"}), ::testing::ExitedWithCode(0),
              exactly(fmt::format("weft nccl_net: {}\nweft nccl_net: {}\n",
                                  init_line(fmt::format("WEFT_NCCL_QPS={} is not a QP count (1..16)", qps)),
                                  init_line("WEFT_NCCL_QPS=17 is not a QP count (1..16)"))));
}

INSTANTIATE_TEST_SUITE_P(V, RefusedInit,
                         ::testing::Combine(::testing::Values(8, 9, 10, 11), ::testing::Values("0", "99", "two")),
                         [](const auto& p) {
                           return fmt::format("v{}_qps_{}", std::get<0>(p.param), std::get<1>(p.param));
                         });

}  // namespace
}  // namespace weft::nccl_net::testing
