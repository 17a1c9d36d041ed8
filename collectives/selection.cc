// kAuto's AllReduce choice (communicator.h: Selection). The default rules
// are the best fit of the table bench/allreduce_sweep.sh measured on this
// machine — 2 cores, loopback TCP and shared memory — recorded in
// bench/results/2026-11-24-allreduce-selection.md: per transport and rank
// count, the thresholds (taken from the measured sizes) whose picks come
// closest to the fastest algorithm, geometric mean over the sizes.
// tests/collectives/selection_test.cc re-derives that fit from the table and
// fails when these rules drift from it. Rank counts between the measured
// ones take the next larger one's rule. The tcp 2- and 4-rank rows were
// re-measured with HD in 1 MiB pieces (hd_piece_bytes): HD wins from its
// threshold up to the largest size measured (64 MiB), so ring never. The shm 2- and 4-rank rows were re-measured after
// the idle-policy change (idle_wait.h) with the sweep alone under the
// shared lock; the 3- and 8-rank rows are the earlier pass at load 9-11,
// where single points swung 2-5x: re-measure those on a quiet host or a
// real fabric.
#include <climits>

#include <fmt/format.h>

#include "communicator_impl.h"
#include "weft/collectives/communicator.h"

namespace weft::coll {

std::vector<SelectionRule> default_selection_rules() {
  constexpr size_t kNever = SIZE_MAX;
  return {
      // transport, max ranks, HD from (below: butterfly), ring from, and
      // where ranks outnumber CPUs one-shot below (the same file's one-shot
      // table: measured at 3, 4 and 8 ranks on 2 CPUs, butterfly as
      // fast or faster at 3 and 4; 2 ranks: one exchange either way), HD's
      // piece (bench/results/2026-11-24-hd-pieces.md: measured at 2 and 4
      // ranks over loopback TCP)
      {"tcp", 2, 1 << 20, kNever, 0, 1 << 20},
      {"tcp", 3, 256 << 10, kNever},
      {"tcp", 4, 256 << 10, kNever, 0, 1 << 20},
      {"tcp", INT_MAX, 1 << 20, kNever},  // measured at 8 ranks
      {"shm", 2, 256 << 10, kNever},
      {"shm", 3, 4 << 20, 4 << 20},
      {"shm", 4, 256 << 10, kNever},
      {"shm", INT_MAX, 16 << 10, kNever, 256},  // measured at 8 ranks
      {"*", INT_MAX, 16 << 10, kNever},    // other transports (verbs): not measured here
  };
}

Status Selection::validate() const {
  if (rules.empty() || rules.back().transport != "*" || rules.back().max_ranks != INT_MAX) {
    return invalid_argument("selection: the last rule must cover every transport and size (\"*\", INT_MAX ranks)");
  }
  if (oneshot_max_ranks < 0) {
    return invalid_argument(fmt::format("selection: oneshot_max_ranks must be >= 0 (got {})", oneshot_max_ranks));
  }
  for (const SelectionRule& r : rules) {
    if (r.max_ranks < 1) return invalid_argument(fmt::format("selection: rule for '{}' has max_ranks {} < 1", r.transport, r.max_ranks));
    if (r.hd_piece_bytes > 0 && r.hd_piece_bytes < kMinHdPieceBytes) {
      return invalid_argument(fmt::format("selection: rule for '{}' up to {} ranks has hd_piece_bytes {}: 0 (whole) or at least {}",
                                          r.transport, r.max_ranks, r.hd_piece_bytes, kMinHdPieceBytes));
    }
    if (r.ring_min_bytes < r.hd_min_bytes) {
      return invalid_argument(fmt::format("selection: rule for '{}' up to {} ranks has ring_min_bytes {} below hd_min_bytes {}",
                                          r.transport, r.max_ranks, r.ring_min_bytes, r.hd_min_bytes));
    }
  }
  return Status::ok();
}

namespace internal {

const SelectionRule* match_rule(const Selection& s, std::string_view transport, int ranks) {
  for (const SelectionRule& r : s.rules) {
    if ((r.transport == "*" || r.transport == transport) && ranks <= r.max_ranks) return &r;
  }
  return nullptr;  // unreachable once validate() passed
}

Algorithm pick_by_size(const SelectionRule* r, size_t bytes, bool oversubscribed) {
  if (r == nullptr) return Algorithm::kHalvingDoubling;
  if (oversubscribed && bytes < r->oneshot_below_bytes) return Algorithm::kOneShot;
  return bytes < r->hd_min_bytes ? Algorithm::kButterfly
         : bytes >= r->ring_min_bytes ? Algorithm::kRing
                                      : Algorithm::kHalvingDoubling;
}

}  // namespace internal

Algorithm select_allreduce(const Selection& s, std::string_view transport, int ranks, size_t bytes, bool equal_hosts,
                           bool oversubscribed) {
  if (s.hybrid_when_multi_host && equal_hosts) return Algorithm::kHybrid;
  return internal::pick_by_size(internal::match_rule(s, transport, ranks), bytes, oversubscribed);
}

}  // namespace weft::coll
