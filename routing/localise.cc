// Single-failure binary tomography: localise.h says what a candidate is.
#include "weft/routing/localise.h"

#include <algorithm>
#include <functional>
#include <set>

namespace weft::routing {

std::string_view verdict_name(Verdict v) {
  switch (v) {
    case Verdict::kNone: return "none";
    case Verdict::kLocalised: return "localised";
    case Verdict::kAmbiguous: return "ambiguous";
    case Verdict::kUnexplained: return "unexplained";
  }
  return "?";
}

namespace {

bool holds(const std::vector<int>& v, int x) { return std::find(v.begin(), v.end(), x) != v.end(); }

}  // namespace

Localisation localise(std::span<const ProbedPath> paths, const std::function<int(int)>& reverse) {
  Localisation out;
  std::set<int> cleared, suspects;
  for (const ProbedPath& p : paths) {
    if (p.health == PathHealth::kHealthy) {
      ++out.healthy;
      cleared.insert(p.forward.begin(), p.forward.end());
    } else if (p.health == PathHealth::kFailing) {
      ++out.failing;
      suspects.insert(p.forward.begin(), p.forward.end());  // condition 3
    }
  }
  if (out.failing == 0) return out;
  auto explains_all = [&](int e, int r) {  // condition 2, r == e for one direction
    return std::all_of(paths.begin(), paths.end(), [&](const ProbedPath& p) {
      return p.health != PathHealth::kFailing || holds(p.forward, e) || holds(p.reply_may_cross, e) ||
             holds(p.forward, r) || holds(p.reply_may_cross, r);
    });
  };
  for (int e : suspects) {
    if (!cleared.contains(e) && explains_all(e, e)) out.links.push_back(e);  // condition 1
  }
  if (out.links.empty() && reverse) {
    for (int e : suspects) {
      const int r = reverse(e);
      if (r <= e || !suspects.contains(r)) continue;  // each cable once; evidence both ways (3)
      if (cleared.contains(e) || cleared.contains(r) || !explains_all(e, r)) continue;
      out.links.push_back(e);
      out.links.push_back(r);
    }
    out.cable = out.links.size() == 2;
  }
  out.verdict = out.links.empty() ? Verdict::kUnexplained
                : out.links.size() == 1 || out.cable ? Verdict::kLocalised
                                        : Verdict::kAmbiguous;
  return out;
}

}  // namespace weft::routing
