// kAuto's AllReduce choice (communicator.h: Selection): the cost model's
// cheapest algorithm by size (cost_model.h, with the constants of
// tuning.h), or the user's explicit rules.
#include <algorithm>
#include <climits>
#include <cmath>

#include <fmt/format.h>

#include "algorithms/algorithms.h"
#include "cost_model.h"
#include "weft/collectives/communicator.h"

namespace weft::coll {

Status Selection::validate() const {
  if (tuning) WEFT_RETURN_IF_ERROR(tuning->validate());
  if (oneshot_max_ranks < 0) {
    return invalid_argument(fmt::format("selection: oneshot_max_ranks must be >= 0 (got {})", oneshot_max_ranks));
  }
  if (rules.empty()) return ok_status();
  if (rules.back().transport != "*" || rules.back().max_ranks != INT_MAX) {
    return invalid_argument("selection: the last rule must cover every transport and size (\"*\", INT_MAX ranks)");
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
  return ok_status();
}

SelectionInput SelectionInput::blocks(std::string transport, int hosts, int per_host, std::string local_transport, int cpus) {
  SelectionInput in;
  in.cpus = cpus;
  in.transport = std::move(transport);
  in.local_transport = std::move(local_transport);
  for (int r = 0; r < hosts * per_host; ++r) in.host_of.push_back(r / per_host);
  return in;
}

bool AllreducePicks::uses(Algorithm a) const {
  for (int i = 0; i < count; ++i) {
    if (ranges[static_cast<size_t>(i)].algorithm == a) return true;
  }
  return false;
}

std::string AllreducePicks::describe() const {
  auto size = [](size_t b) {
    if (b >= (size_t{1} << 30) && b % (size_t{1} << 30) == 0) return fmt::format("{} GiB", b >> 30);
    if (b >= (size_t{1} << 20) && b % (size_t{1} << 20) == 0) return fmt::format("{} MiB", b >> 20);
    if (b >= 1024 && b % 1024 == 0) return fmt::format("{} KiB", b >> 10);
    return fmt::format("{} B", b);
  };
  std::string s(algorithm_name(ranges[0].algorithm));
  for (int i = 1; i < count; ++i) {
    const Range& r = ranges[static_cast<size_t>(i)];
    s += fmt::format(", {} from {}", algorithm_name(r.algorithm), size(r.from_bytes));
  }
  return s;
}

namespace {

// Hybrid may run: several hosts with the same number (> 1) of ranks each,
// and an order of them that avoids the failed links.
bool multi_host(const SelectionInput& in) {
  if (!in.hybrid) return false;
  const auto hosts = internal::equal_hosts(in.host_of);
  return hosts.size() > 1 && hosts.front().size() > 1;
}

// Appends a range unless the last one already runs `a`.
void push(AllreducePicks& p, size_t from, Algorithm a) {
  if (p.count > 0 && p.ranges[static_cast<size_t>(p.count - 1)].algorithm == a) return;
  if (p.count == AllreducePicks::kMaxRanges) return;  // the last range runs on (never seen: 5 lines cross few times)
  p.ranges[static_cast<size_t>(p.count++)] = {from, a};
}

// Explicit rules as ranges: the first rule for this transport and size.
AllreducePicks by_rule(const Selection& s, const SelectionInput& in) {
  const int p = static_cast<int>(in.host_of.size());
  const SelectionRule* r = &s.rules.back();
  for (const SelectionRule& x : s.rules) {
    if ((x.transport == "*" || x.transport == in.transport) && p <= x.max_ranks) {
      r = &x;
      break;
    }
  }
  const bool planned = in.planned != Algorithm::kAuto;
  const bool hybrid = !planned && s.hybrid_when_multi_host && multi_host(in);
  // A plan's algorithm (HD, ring, hybrid) runs from the HD threshold.
  const size_t ring_min = !planned ? r->ring_min_bytes : SIZE_MAX;
  auto pick = [&](size_t b) {
    if (hybrid && b >= r->hybrid_min_bytes) return Algorithm::kHybrid;
    if (in.oneshot && !planned && b < r->oneshot_below_bytes) return Algorithm::kOneShot;
    if (b < r->hd_min_bytes) return Algorithm::kButterfly;
    if (planned) return in.planned;
    return b >= ring_min ? Algorithm::kRing : Algorithm::kHalvingDoubling;
  };
  std::vector<size_t> cuts = {0, r->hybrid_min_bytes, r->oneshot_below_bytes, r->hd_min_bytes, ring_min};
  std::sort(cuts.begin(), cuts.end());
  AllreducePicks picks;
  picks.count = 0;
  for (size_t c : cuts) {
    if (c != SIZE_MAX) push(picks, c, pick(c));
  }
  picks.hd_piece_bytes = r->hd_piece_bytes;
  return picks;
}

internal::ModelShape shape_of(const Tuning& tuning, const SelectionInput& in) {
  internal::ModelShape shape;
  shape.host_of = in.host_of;
  shape.net = &tuning.of(in.transport);
  shape.local = &tuning.of(in.local_transport.empty() ? in.transport : in.local_transport);
  std::vector<int> on_host;
  for (int h : in.host_of) {
    if (static_cast<size_t>(h) >= on_host.size()) on_host.resize(static_cast<size_t>(h) + 1, 0);
    shape.shared_cpus = shape.shared_cpus || (in.cpus > 0 && ++on_host[static_cast<size_t>(h)] > in.cpus);
  }
  return shape;
}

}  // namespace

double predict_allreduce_us(Algorithm a, const Tuning& tuning, const SelectionInput& in, size_t bytes) {
  if (a == Algorithm::kHybrid && !multi_host(in)) return HUGE_VAL;
  return internal::allreduce_us(a, shape_of(tuning, in), static_cast<double>(bytes));
}

AllreducePicks select_allreduce(const Selection& s, const Tuning& tuning, const SelectionInput& in) {
  if (!s.rules.empty()) return by_rule(s, in);
  const internal::ModelShape shape = shape_of(tuning, in);
  std::vector<Algorithm> candidates = {Algorithm::kButterfly};
  if (in.planned != Algorithm::kAuto) {
    candidates.push_back(in.planned);
  } else {
    candidates.insert(candidates.end(), {Algorithm::kHalvingDoubling, Algorithm::kRing});
    if (in.oneshot) candidates.push_back(Algorithm::kOneShot);
    if (s.hybrid_when_multi_host && multi_host(in)) candidates.push_back(Algorithm::kHybrid);
  }
  // Hybrid only for calls that are bound by bandwidth between hosts: from
  // the inter-host transport's n½ = α/β (Hockney, Parallel Computing 1994:
  // the message length that reaches half the bandwidth), where moving 1/l of
  // the vector across is what pays; below it a call is a few latencies,
  // which the model prices but nobody measured for hybrid on real hosts.
  const double hybrid_from = shape.net->alpha_us * 1e3 / shape.net->beta_ns_per_byte;
  AllreducePicks picks;
  picks.count = 0;
  for (int k = 0; k <= 40; ++k) {
    const double bytes = std::ldexp(1.0, k);
    Algorithm best = candidates.front();
    double best_us = HUGE_VAL;
    for (Algorithm a : candidates) {
      if (a == Algorithm::kHybrid && bytes < hybrid_from) continue;
      const double us = internal::allreduce_us(a, shape, bytes);
      if (us < best_us) best = a, best_us = us;
    }
    push(picks, k == 0 ? 0 : size_t{1} << k, best);
  }
  picks.hd_piece_bytes = shape.net->hd_piece_bytes;
  return picks;
}

}  // namespace weft::coll
