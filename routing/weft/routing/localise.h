// Locating a failed directed link from end-to-end probes (binary network
// tomography: Duffield, "Network Tomography of Binary Network Performance
// Characteristics", IEEE Trans. Inf. Theory 52(12), 2006; the single-failure
// case as in 007, Arzani et al., NSDI 2018).
//
// Each monitored 5-tuple is a path of directed links whose forward half is
// known (the spine its probes take, measured) and whose return half is not
// (the reply is hashed on its own 5-tuple): a probe that comes back clears
// its forward links, a probe that does not may have been lost on either
// half. So, for the paths now failing and those now healthy, a directed link
// e is a *candidate* when
//   1. no healthy path crosses e on its known forward half,
//   2. every failing path may cross e (forward half, or one of the links its
//      reply may take), and
//   3. some failing path crosses e on its known forward half (evidence, not
//      only the absence of it).
// One candidate: that link failed. Several: the probes cannot tell them apart
// (ambiguous; the caller says so rather than guess). None while paths fail:
// no single directed link explains the losses. Then, given the caller's
// `reverse` (the other direction of a link's cable), a cable is a candidate
// when neither direction is cleared (1), every failing path may cross one
// of them (2) and each direction has evidence of its own (3): a cut cable,
// an optic dark both ways, drops both directions at once. Still none: no
// single failure explains the losses (several failures, a host down, or the
// moment of a cut, when some paths have not yet shown their loss).
//
//   std::vector<ProbedPath> paths = ...;  // link ids are the caller's
//   Localisation l = localise(paths);
//   if (l.verdict == Verdict::kLocalised) report(l.links[0]);
#pragma once

#include <functional>
#include <span>
#include <string_view>
#include <vector>

namespace weft::routing {

enum class PathHealth { kHealthy, kFailing, kUnknown };

struct ProbedPath {
  std::vector<int> forward;          // directed link ids the probes cross, known
  std::vector<int> reply_may_cross;  // directed link ids the reply may cross (any of them, unknown which)
  PathHealth health = PathHealth::kUnknown;
};

enum class Verdict {
  kNone,         // no path fails
  kLocalised,    // exactly one candidate: links = {it}
  kAmbiguous,    // several candidates: links = all of them, ascending
  kUnexplained,  // paths fail, and no single link explains them all
};
std::string_view verdict_name(Verdict v);

struct Localisation {
  Verdict verdict = Verdict::kNone;
  std::vector<int> links;  // a cable: both directions, ascending
  bool cable = false;      // links are the two directions of one cable
  int failing = 0;  // paths failing
  int healthy = 0;  // paths healthy
};

// `reverse(e)`: the opposite direction of directed link e; empty: directed
// links only.
Localisation localise(std::span<const ProbedPath> paths, const std::function<int(int)>& reverse = {});

}  // namespace weft::routing
