// Ranks as processes of this binary on this host: `weft bench` (and its
// --calibrate) fork them and let them meet through a file store.
#pragma once

#include <chrono>
#include <functional>
#include <string>

namespace weft::cli {

// Forks `ranks` processes, each running rank_fn(rank, dir) and exiting with
// its value; `dir` is a fresh temporary directory (their file store: spec
// "file:" + dir). Waits for all of them; when one fails or `timeout` passes,
// kills every one of them (by PID). Then, if every rank exited 0, runs
// collect(dir) (rank output left in files there), and removes the directory.
// Returns 0 when every rank and collect succeeded.
int spawn_ranks(int ranks, std::chrono::seconds timeout, const std::function<int(int rank, const std::string& dir)>& rank_fn,
                const std::function<int(const std::string& dir)>& collect = {});

}  // namespace weft::cli
