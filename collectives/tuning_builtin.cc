// built_in_tuning() (weft/collectives/tuning.h): the constants kAuto's cost
// model uses where no tuning file is given.
#include "weft/collectives/tuning.h"

namespace weft::coll {

// Measured 2026-11-26 08:04 UTC on the development VM (2 vCPUs, AMD EPYC,
// Linux 6.18, shared with other builds and tests: 1-minute load average
// 2.2 before and after) by three runs of
//   weft bench --calibrate -o cal-N.json        (Release build)
// each constant the median of the three, to three digits;
// bench/results/2026-11-26-tuning-calibration.md has the runs' table.
// hd_piece_bytes is not fitted: tcp's 1 MiB is
// bench/results/2026-11-24-hd-pieces.md's. Other transports (verbs) were not
// measured here and take tcp's: calibrate on a machine that has them.
Tuning built_in_tuning() {
  Tuning t;
  t.transports["tcp"] = {.alpha_us = 11.3,
                         .beta_ns_per_byte = 0.105,
                         .gamma_ns_per_byte = 0.013,
                         .cache_bytes = size_t{1} << 20,
                         .beta_far_ns_per_byte = 0.434,
                         .alpha_shared_us = 17.4,
                         .hd_piece_bytes = size_t{1} << 20};
  t.transports["shm"] = {.alpha_us = 0.139,
                         .beta_ns_per_byte = 0.0248,
                         .gamma_ns_per_byte = 0.013,
                         .cache_bytes = size_t{1} << 20,
                         .beta_far_ns_per_byte = 0.145,
                         .alpha_shared_us = 1.57,
                         .hd_piece_bytes = 0};
  return t;
}

}  // namespace weft::coll
