// Tuning files (weft/collectives/tuning.h): what a bad one is told, that a
// communicator reads $WEFT_TUNING at creation, and that the constants
// change kAuto's picks.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include "harness.h"
#include "weft/collectives/communicator.h"
#include "weft/collectives/tuning.h"

namespace weft::coll {
namespace {

namespace fs = std::filesystem;

constexpr const char* kGood = R"({"version": 1, "transports": {
  "tcp": {"alpha_us": 5, "beta_ns_per_byte": 0.2, "gamma_ns_per_byte": 0.05, "cache_bytes": 1048576, "beta_far_ns_per_byte": 0.5},
  "shm": {"alpha_us": 0.2, "beta_ns_per_byte": 0.03, "gamma_ns_per_byte": 0.05}}})";

TEST(Tuning, AGoodFileReplacesTheNamedTransportsOnly) {
  auto t = parse_tuning(kGood, "good.json");
  ASSERT_TRUE(t) << t.status().to_string();
  EXPECT_EQ(t->of("tcp").alpha_us, 5);
  EXPECT_EQ(t->of("tcp").beta_far_ns_per_byte, 0.5);
  EXPECT_EQ(t->of("tcp").hd_piece_bytes, built_in_tuning().of("tcp").hd_piece_bytes) << "the built-in piece kept";
  EXPECT_EQ(t->of("shm").cache_bytes, 0u);
  EXPECT_EQ(t->of("verbs"), t->of("tcp")) << "a transport not named: tcp's";
  EXPECT_EQ(t->source, "good.json");
  EXPECT_TRUE(t->validate());
}

TEST(Tuning, WrittenFilesReadBackEqual) {
  Tuning t = built_in_tuning();
  t.transports["shm"].cache_bytes = 2 << 20;
  t.transports["shm"].beta_far_ns_per_byte = 1.5;
  auto back = parse_tuning(tuning_to_json(t, {"m", "now", "cmd", "load 1"}, {{"tcp", {{{4, 1.0}, {64, 2.0}}, {}}}}), "x");
  ASSERT_TRUE(back) << back.status().to_string();
  EXPECT_EQ(back->transports, t.transports);
}

struct Bad {
  const char* name;
  std::string text;
  std::string expect;  // in the message, after "tuning file <path>: "
};
class BadTuningFile : public ::testing::TestWithParam<Bad> {};

// Every error names the file and the field: a user with several files and
// a typo finds it without reading the parser.
TEST_P(BadTuningFile, IsRejectedNamingTheFileAndTheField) {
  const Bad& b = GetParam();
  auto t = parse_tuning(b.text, "/etc/weft/t.json");
  ASSERT_FALSE(t) << b.name;
  EXPECT_NE(t.status().message().find("tuning file /etc/weft/t.json: " + b.expect), std::string::npos) << t.status().message();
}
std::string tcp_with(const std::string& fields) { return R"({"version": 1, "transports": {"tcp": {)" + fields + "}}}"; }
INSTANTIATE_TEST_SUITE_P(
    Files, BadTuningFile,
    ::testing::Values(
        Bad{"NotJson", "{\"version\": 1,", ""},
        Bad{"NotAnObject", "[1, 2]", "not a JSON object"},
        Bad{"NoVersion", R"({"transports": {}})", "/version: missing"},
        Bad{"OtherVersion", R"({"version": 2, "transports": {}})", "/version: 2 is not 1"},
        Bad{"UnknownTopField", R"({"version": 1, "transport": {}})", "/transport: unknown field"},
        Bad{"NoTransports", R"({"version": 1})", "/transports: missing"},
        Bad{"UnknownTransport", R"({"version": 1, "transports": {"infiniband": {}}})", "/transports/infiniband: unknown transport"},
        Bad{"MissingAlpha", tcp_with(R"("beta_ns_per_byte": 1, "gamma_ns_per_byte": 1)"), "/transports/tcp/alpha_us: missing"},
        Bad{"NegativeAlpha", tcp_with(R"("alpha_us": -1, "beta_ns_per_byte": 1, "gamma_ns_per_byte": 1)"),
            "/transports/tcp/alpha_us: must be a number > 0 (got -1)"},
        Bad{"ZeroBeta", tcp_with(R"("alpha_us": 1, "beta_ns_per_byte": 0, "gamma_ns_per_byte": 1)"),
            "/transports/tcp/beta_ns_per_byte: must be a number > 0 (got 0)"},
        Bad{"ZeroGamma", tcp_with(R"("alpha_us": 1, "beta_ns_per_byte": 1, "gamma_ns_per_byte": 0)"),
            "/transports/tcp/gamma_ns_per_byte: must be a number > 0 (got 0)"},
        Bad{"StringBeta", tcp_with(R"("alpha_us": 1, "beta_ns_per_byte": "fast", "gamma_ns_per_byte": 1)"),
            "/transports/tcp/beta_ns_per_byte: not a number (\"fast\")"},
        Bad{"MisspeltField", tcp_with(R"("alpha_us": 1, "beta_ns_per_byte": 1, "gama_ns_per_byte": 1)"),
            "/transports/tcp/gama_ns_per_byte: unknown field"},
        Bad{"FarWithoutCache", tcp_with(R"("alpha_us": 1, "beta_ns_per_byte": 1, "gamma_ns_per_byte": 1, "beta_far_ns_per_byte": 2)"),
            "/transports/tcp/cache_bytes: give cache_bytes and beta_far_ns_per_byte together"},
        Bad{"FarBelowNear", tcp_with(R"("alpha_us": 1, "beta_ns_per_byte": 1, "gamma_ns_per_byte": 1, "cache_bytes": 4096, "beta_far_ns_per_byte": 0.5)"),
            "/transports/tcp/beta_far_ns_per_byte: must be >= beta_ns_per_byte 1 (got 0.5)"},
        Bad{"TinyPiece", tcp_with(R"("alpha_us": 1, "beta_ns_per_byte": 1, "gamma_ns_per_byte": 1, "hd_piece_bytes": 100)"),
            "/transports/tcp/hd_piece_bytes: 100 is neither 0 (whole) nor at least 4096"}),
    [](const auto& p) { return std::string(p.param.name); });

TEST(Tuning, AMissingFileIsRejectedNamingIt) {
  auto t = load_tuning("/nonexistent/tuning.json");
  ASSERT_FALSE(t);
  EXPECT_NE(t.status().message().find("tuning file /nonexistent/tuning.json"), std::string::npos) << t.status().message();
}

TEST(Tuning, FitRecoversTheConstantsOfExactLines) {
  CalibrationSamples s;
  for (size_t m = 4; m <= (size_t{16} << 20); m *= 4) {
    const double near = 3 + 0.25e-3 * static_cast<double>(std::min(m, kNearBytes));
    s.exchange_us.emplace_back(m, near + (m > kNearBytes ? 1e-3 * static_cast<double>(m - kNearBytes) : 0));
  }
  for (size_t m = 1024; m <= (size_t{16} << 20); m *= 4) s.reduce_us.emplace_back(m, 0.1 + 0.05e-3 * static_cast<double>(m));
  auto c = fit_transport_cost(s);
  ASSERT_TRUE(c) << c.status().to_string();
  EXPECT_NEAR(c->alpha_us, 3, 1e-9);
  EXPECT_NEAR(c->beta_ns_per_byte, 0.25, 1e-9);
  EXPECT_NEAR(c->gamma_ns_per_byte, 0.05, 1e-9);
  EXPECT_EQ(c->cache_bytes, kNearBytes);
  EXPECT_NEAR(c->beta_far_ns_per_byte, 1, 1e-9);
  s.exchange_us = {{4, 10}, {1024, 5}};  // slower small than large: no line
  EXPECT_FALSE(fit_transport_cost(s));
}

// $WEFT_TUNING, set for one test and cleared after it.
class WeftTuningEnv : public ::testing::Test {
 protected:
  void TearDown() override {
    ::unsetenv("WEFT_TUNING");
    fs::remove(path_);
  }
  void use(const std::string& text) {
    std::ofstream(path_) << text;
    ::setenv("WEFT_TUNING", path_.c_str(), 1);
  }
  std::string path_ = (fs::temp_directory_path() / ("weft-tuning-" + std::to_string(::getpid()) + ".json")).string();
};

TEST_F(WeftTuningEnv, ABadFileFailsCommunicatorCreationNamingTheVariableFileAndField) {
  use(tcp_with(R"("alpha_us": 1, "beta_ns_per_byte": -2, "gamma_ns_per_byte": 1)"));
  MemoryStore store;
  CommConfig cfg;
  cfg.transport = "loopback";
  auto comm = Communicator::create(cfg, store);
  ASSERT_FALSE(comm);
  EXPECT_NE(comm.status().message().find("WEFT_TUNING: tuning file " + path_ + ": /transports/tcp/beta_ns_per_byte: must be a number > 0"),
            std::string::npos)
      << comm.status().message();
  ::setenv("WEFT_TUNING", "/nonexistent/t.json", 1);
  comm = Communicator::create(cfg, store);
  ASSERT_FALSE(comm);
  EXPECT_NE(comm.status().message().find("/nonexistent/t.json"), std::string::npos) << comm.status().message();
}

// A latency a million times the built-in one: every step costs a second,
// so the model takes the algorithm of fewest steps (butterfly: 2 on 4
// ranks, HD 4, ring 6, one-shot 3 messages) where it took another.
TEST_F(WeftTuningEnv, AFileWithAHugeLatencyMakesTheCommunicatorPickFewerSteps) {
  auto picks = [](const std::function<void(CommConfig&)>& tweak) {
    std::vector<AllreducePicks> got(4);
    testing::run_ranks(4, [&](Communicator& c) { got[static_cast<size_t>(c.rank())] = c.auto_allreduce(); },
                       [&](CommConfig& c) {
                         c.transport = "loopback";
                         if (tweak) tweak(c);
                       });
    for (const auto& p : got) EXPECT_EQ(p.describe(), got[0].describe()) << "every rank picks alike";
    return got[0];
  };
  const AllreducePicks built_in = picks({});
  ASSERT_NE(built_in.at(16u << 20), Algorithm::kButterfly) << built_in.describe();
  use(R"({"version": 1, "transports": {"loopback": {"alpha_us": 1e6, "beta_ns_per_byte": 0.1, "gamma_ns_per_byte": 0.01}}})");
  const AllreducePicks slow = picks({});
  for (size_t bytes : {size_t{4}, size_t{1} << 20, size_t{16} << 20, size_t{256} << 20}) {
    EXPECT_EQ(slow.at(bytes), Algorithm::kButterfly) << bytes << " B: " << slow.describe();
  }
  // CommConfig::selection.tuning wins over the variable.
  const AllreducePicks config = picks([](CommConfig& c) { c.selection.tuning = built_in_tuning(); });
  EXPECT_EQ(config.describe(), built_in.describe());
}

// Ranks that would pick different algorithms for one call (here rank 1
// read a tuning with a latency a million times rank 0's) all run rank 0's
// picks, and rank 1 says so in one line, instead of waiting for each other
// until the timeout; the calls of every size then agree and are exact.
TEST(Tuning, ARankWhosePicksDifferRunsRankZerosAndSaysSo) {
  ::testing::internal::CaptureStdout();
  ::testing::internal::CaptureStderr();
  std::vector<AllreducePicks> got(2);
  std::vector<std::vector<float>> sums(2);
  testing::run_ranks(
      2,
      [&](Communicator& c) {
        got[static_cast<size_t>(c.rank())] = c.auto_allreduce();
        for (size_t count : {size_t{1}, size_t{70000}, size_t{1} << 20}) {
          std::vector<float> v(count, static_cast<float>(c.rank() + 1));
          ASSERT_TRUE(c.allreduce(v.data(), v.data(), count, DataType::kF32, ReduceOp::kSum));
          sums[static_cast<size_t>(c.rank())].push_back(v.front() + v.back());
        }
      },
      [](CommConfig& c) {
        c.transport = "loopback";
        Tuning t = built_in_tuning();
        if (c.rank == 1) t.transports["loopback"] = {.alpha_us = 1e6, .beta_ns_per_byte = 0.1, .gamma_ns_per_byte = 0.01};
        c.selection.tuning = t;
      });
  const std::string out = ::testing::internal::GetCapturedStdout() + ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(got[1].describe(), got[0].describe());
  EXPECT_NE(got[0].describe(), "butterfly, hd from 256 GiB") << "rank 0 kept its own picks";
  EXPECT_EQ(sums[0], std::vector<float>(3, 6.0f));
  EXPECT_EQ(sums[1], std::vector<float>(3, 6.0f));
  EXPECT_NE(out.find("rank 1 runs rank 0's AllReduce picks \"" + got[0].describe() + "\""), std::string::npos) << out;
  EXPECT_NE(out.find("instead of its own \"butterfly, hd from 256 GiB\""), std::string::npos) << out;
}

}  // namespace
}  // namespace weft::coll
