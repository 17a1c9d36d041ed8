// weft bench --calibrate (bench_calibrate.cc): the cost model's constants,
// measured on this host, as a tuning file (weft/collectives/tuning.h).
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace weft::cli {

struct CalibrateArgs {
  std::string output;                   // "" or "-": stdout
  std::vector<std::string> transports;  // measured between two ranks of this host: tcp and shm
  size_t max_bytes = 16 << 20;          // the largest message measured
  int batches = 9;                      // each point: the best of this many batches
  int timeout_s = 120;                  // per transport
};

// `command`: the command line, recorded in the file.
int run_calibrate(const CalibrateArgs& a, const std::string& command);

}  // namespace weft::cli
