// What the benchmarks measure besides google-benchmark's own timers.
#pragma once

#include <sys/resource.h>
#include <time.h>

namespace weft::bench {

// CPU seconds of this process (clock_gettime(2)): on a machine shared with
// other builds, wall time measures the neighbours as much as the code.
inline double cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

// The process's peak resident memory so far, in MiB (ru_maxrss is in KiB on
// Linux, getrusage(2)).
inline double peak_rss_mib() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return static_cast<double>(ru.ru_maxrss) / 1024.0;
}

}  // namespace weft::bench
