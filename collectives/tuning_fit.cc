// fit_transport_cost (weft/collectives/tuning.h): the model's constants of
// one transport from what `weft bench --calibrate` measured.
#include <cmath>

#include <fmt/format.h>

#include "weft/collectives/tuning.h"

namespace weft::coll {
namespace {

// t = a + b·m by least squares on the relative error, Σ ((a + b·m - t) / t)²,
// so that a 4-byte step and a 4 MiB one count alike (plain least squares
// would fit the largest sizes alone and leave α to their noise).
struct Line {
  double a = 0, b = 0;
};
Result<Line> fit_line(const std::vector<std::pair<size_t, double>>& v, const char* what) {
  double sw = 0, sm = 0, smm = 0, st = 0, smt = 0;
  for (const auto& [bytes, us] : v) {
    if (!(us > 0) || !std::isfinite(us)) return invalid_argument(fmt::format("{}: {} us at {} B", what, us, bytes));
    const double w = 1 / (us * us), m = static_cast<double>(bytes);
    sw += w, sm += w * m, smm += w * m * m, st += w * us, smt += w * m * us;
  }
  const double det = sw * smm - sm * sm;
  if (v.size() < 2 || !(det > 0)) return invalid_argument(fmt::format("{}: needs samples at two sizes or more", what));
  return Line{(smm * st - sm * smt) / det, (sw * smt - sm * st) / det};
}

}  // namespace

Result<TransportCost> fit_transport_cost(const CalibrationSamples& s) {
  std::vector<std::pair<size_t, double>> near, far;
  for (const auto& e : s.exchange_us) (e.first <= kNearBytes ? near : far).push_back(e);
  WEFT_ASSIGN_OR_RETURN(Line ex, fit_line(near, "exchange"));
  WEFT_ASSIGN_OR_RETURN(Line red, fit_line(s.reduce_us, "reduce"));
  TransportCost c;
  c.alpha_us = ex.a;
  c.beta_ns_per_byte = ex.b * 1e3;
  c.gamma_ns_per_byte = red.b * 1e3;
  // A constant <= 0 means the samples were not a line (the host was busy
  // during some and idle during others): no model to write.
  if (!(c.alpha_us > 0) || !(c.beta_ns_per_byte > 0) || !(c.gamma_ns_per_byte > 0)) {
    return failed_precondition(fmt::format("the fit gave alpha {} us, beta {} ns/B, gamma {} ns/B: a constant <= 0; the host was "
                                           "too busy for a line through the samples, measure again (--batches more)",
                                           c.alpha_us, c.beta_ns_per_byte, c.gamma_ns_per_byte));
  }
  // Beyond the cache: t = α + β·C + β_far·(m - C), β_far by plain least
  // squares through that fixed point (the largest messages weigh most: the
  // cache's edge is blurred, what lies far beyond it is the memory's speed).
  double num = 0, den = 0;
  const double c0 = static_cast<double>(kNearBytes);
  for (const auto& [bytes, us] : far) {
    const double x = static_cast<double>(bytes) - c0, y = us - ex.a - ex.b * c0;
    num += x * y, den += x * x;
  }
  if (s.shared_us > c.alpha_us) c.alpha_shared_us = s.shared_us;
  if (den > 0 && num / den > ex.b) {
    c.cache_bytes = kNearBytes;
    c.beta_far_ns_per_byte = num / den * 1e3;
  }
  return c;
}

}  // namespace weft::coll
