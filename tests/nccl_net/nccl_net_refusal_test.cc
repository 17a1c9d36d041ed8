// What the plugin says when it refuses, on any host (no RDMA device
// needed): a refused init reaches stderr, where a job's output goes, and
// not only NCCL's logger, which prints it at INFO (NCCL then falls back to
// its own transport); NCCL's own merge probe (makeVDevice of several NICs)
// is answered at INFO and counts no error.
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

// makeVDevice of `ndevs` devices 0..ndevs-1, after an init that hands the
// plugin a logger (it need not find a device): the result, the lines it
// logged and how far it moved the error counter.
struct VDeviceCall {
  ncclResult_t result;
  std::vector<LogLine> lines;
  std::uint64_t errors;
};
VDeviceCall make_vdevice(int version, int ndevs) {
  auto d = Driver::load(version);
  EXPECT_TRUE(d) << d.status().message();
  if (!d) return {};
  (void)d->init(collect_log);
  const std::size_t before_lines = log_lines().size();
  const std::uint64_t before_errors = d->counters().errors;
  int devs[8] = {0, 1, 2, 3, 4, 5, 6, 7};
  int vdev = -1;
  VDeviceCall c;
  c.result = d->make_vdevice(&vdev, ndevs, devs);
  c.lines.assign(log_lines().begin() + static_cast<std::ptrdiff_t>(before_lines), log_lines().end());
  c.errors = d->counters().errors - before_errors;
  return c;
}

// A request for a virtual NIC of `ndevs` NICs and how it is answered.
struct VDeviceCase {
  const char* name;
  int ndevs;
  ncclDebugLogLevel level;
  const char* line;  // {} is ndevs
  std::uint64_t errors;
};

// NCCL asks to merge NICs near each other (ncclTopoAutoMerge) and takes a
// refusal as "keep them apart": an answer at INFO, not an error. No NCCL
// asks for 0 devices or more than a virtual NIC holds: that is bad input,
// a WARN line and an error counted.
constexpr const char* kKeepApart = "{} devices in one virtual NIC; only 1 is offered, NCCL keeps them apart";
constexpr const char* kBadCount = "{} devices in one virtual NIC (1..4)";
const VDeviceCase kVDeviceCases[] = {
    {"merge_probe_2_nics", 2, NCCL_LOG_INFO, kKeepApart, 0},
    {"merge_probe_3_nics", 3, NCCL_LOG_INFO, kKeepApart, 0},
    {"merge_probe_4_nics", 4, NCCL_LOG_INFO, kKeepApart, 0},
    {"no_nics", 0, NCCL_LOG_WARN, kBadCount, 1},
    {"minus_1_nics", -1, NCCL_LOG_WARN, kBadCount, 1},
    {"5_nics", 5, NCCL_LOG_WARN, kBadCount, 1},
};

class VDeviceRequest : public ::testing::TestWithParam<std::tuple<int, VDeviceCase>> {};

TEST_P(VDeviceRequest, IsRefusedWithOneLineCountingOnlyBadInputAsAnError) {
  const auto& [version, want] = GetParam();
  VDeviceCall c = make_vdevice(version, want.ndevs);
  EXPECT_EQ(c.result, ncclInvalidArgument);
  ASSERT_EQ(c.lines.size(), 1u);
  EXPECT_EQ(c.lines[0].level, want.level);
  EXPECT_EQ(c.lines[0].text, "NET/weft: makeVDevice: " + fmt::format(fmt::runtime(want.line), want.ndevs));
  EXPECT_EQ(c.errors, want.errors);
}

INSTANTIATE_TEST_SUITE_P(V, VDeviceRequest,
                         ::testing::Combine(::testing::Values(9, 10, 11), ::testing::ValuesIn(kVDeviceCases)),
                         [](const auto& p) {
                           return fmt::format("v{}_{}", std::get<0>(p.param), std::get<1>(p.param).name);
                         });

}  // namespace
}  // namespace weft::nccl_net::testing
