// weft bench --calibrate as a user meets it: a tuning file the library
// reads, progress on stderr, help that says what it measures, and the
// plain bench still running.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <nlohmann/json.hpp>

#include "cli_fixture.h"
#include "weft/collectives/tuning.h"

namespace {

// An environment variable for the weft processes of one test.
struct Env {
  Env(const char* name, const std::string& value) : name_(name) { ::setenv(name, value.c_str(), 1); }
  ~Env() { ::unsetenv(name_); }
  const char* name_;
};

// Small option values: a few seconds even under ASan on a shared host
// (messages up to 1 MiB: their bytes outweigh the noise of a busy host).
TEST_F(Cli, CalibrateWritesATuningFileTheLibraryReads) {
  CliRun r = weft("bench --calibrate -e 1M --batches 3 -o " + path("t.json"));
  ASSERT_EQ(r.rc, 0) << r.err;
  for (const char* progress : {"calibrating tcp", "calibrating shm", "exchange", "(verified)", "load average", "alpha"}) {
    EXPECT_NE(r.err.find(progress), std::string::npos) << progress << " in\n" << r.err;
  }
  const std::string text = weft::read_file(path("t.json")).value();
  auto t = weft::coll::parse_tuning(text, path("t.json"));
  ASSERT_TRUE(t) << t.status().to_string() << "\n" << text;
  for (const char* name : {"tcp", "shm"}) {
    const weft::coll::TransportCost& c = t->of(name);
    EXPECT_GT(c.alpha_us, 0) << name;
    EXPECT_GT(c.beta_ns_per_byte, 0) << name;
    EXPECT_GT(c.gamma_ns_per_byte, 0) << name;
  }
  auto j = nlohmann::json::parse(text);
  EXPECT_FALSE(j["machine"].get<std::string>().empty());
  EXPECT_NE(j["load"].get<std::string>().find("load average"), std::string::npos);
  EXPECT_EQ(j["samples"]["tcp"]["exchange_us"].size(), 10u) << "4 B to 1 MiB, x4";
  // The library reads it at communicator creation (WEFT_TUNING): a bench
  // run with it works.
  const Env tuning("WEFT_TUNING", path("t.json"));
  CliRun b = weft("bench allreduce -n 2 --transport shm -b 4 -e 4K -f 32 --iters 5");
  EXPECT_EQ(b.rc, 0) << b.err;
  EXPECT_NE(b.out.find("4096"), std::string::npos) << b.out;
}

TEST_F(Cli, ABadTuningFileStopsTheBenchNamingTheFileAndField) {
  write("bad.json", R"({"version": 1, "transports": {"shm": {"alpha_us": 0, "beta_ns_per_byte": 1, "gamma_ns_per_byte": 1}}})");
  const Env tuning("WEFT_TUNING", path("bad.json"));
  CliRun r = weft("bench allreduce -n 2 --transport shm -b 4 -e 4 --iters 2 --timeout 20");
  EXPECT_NE(r.rc, 0);
  EXPECT_NE(r.err.find("WEFT_TUNING: tuning file " + path("bad.json") + ": /transports/shm/alpha_us: must be a number > 0"), std::string::npos)
      << r.err;
}

TEST_F(Cli, CalibrateHelpSaysWhatItMeasuresHowLongAndHowToUseIt) {
  CliRun r = weft("bench --help");
  ASSERT_EQ(r.rc, 0) << r.err;
  for (const char* words : {"--calibrate", "alpha", "beta", "gamma", "least-squares", "WEFT_TUNING=tuning.json", "About", " s "}) {
    EXPECT_NE(r.out.find(words), std::string::npos) << words << " in\n" << r.out;
  }
}

TEST_F(Cli, CalibrateTakesNoCollectiveAndBenchNeedsOne) {
  EXPECT_NE(weft("bench --calibrate allreduce -o " + path("t.json")).rc, 0);
  EXPECT_NE(weft("bench").rc, 0);
  EXPECT_NE(weft("bench --calibrate --transport nosuch -o " + path("t.json")).rc, 0);
}

}  // namespace
