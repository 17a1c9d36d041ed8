// built_in_tuning() (weft/collectives/tuning.h): the constants kAuto's cost
// model uses where no tuning file is given.
#include "weft/collectives/tuning.h"

namespace weft::coll {

// Measured 2026-11-26 08:20-08:21 UTC on the development VM (2 vCPUs, AMD
// EPYC, Linux 6.18, shared with other builds and tests: 1-minute load
// average 2.55-3.00 over the runs) by five runs of
//   weft bench --calibrate --batches 9 -o cal-N.json     (Release build)
// each constant the median of the five, to three digits;
// bench/results/2026-11-26-tuning-calibration.md has every run's constants.
// hd_piece_bytes is not fitted: tcp's 1 MiB is
// bench/results/2026-11-24-hd-pieces.md's. Other transports (verbs) were not
// measured here and take tcp's: calibrate on a machine that has them.
Tuning built_in_tuning() {
  Tuning t;
  t.transports["tcp"] = {.alpha_us = 13.3,
                         .beta_ns_per_byte = 0.0932,
                         .gamma_ns_per_byte = 0.013,
                         .cache_bytes = size_t{1} << 20,
                         .beta_far_ns_per_byte = 0.626,
                         .alpha_shared_us = 17.4,
                         .hd_piece_bytes = size_t{1} << 20};
  t.transports["shm"] = {.alpha_us = 0.143,
                         .beta_ns_per_byte = 0.0249,
                         .gamma_ns_per_byte = 0.0129,
                         .cache_bytes = size_t{1} << 20,
                         .beta_far_ns_per_byte = 0.138,
                         .alpha_shared_us = 1.6,
                         .hd_piece_bytes = 0};
  return t;
}

}  // namespace weft::coll
