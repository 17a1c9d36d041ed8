// Destination QP numbers a plan may choose from on an E-ECMP fabric
// (ecmp.h crc32-qp), where the path of a RoCE flow depends on its BTH
// Destination QP as well as its 5-tuple.
//
// A QPN is assigned by the receiving HCA when the QP is created, not chosen
// by anyone: a job that wants planned paths creates a pool of QPs per rank,
// gathers their numbers at setup (as it exchanges QPNs to connect anyway),
// and hands them to `weft route --qpn-pool FILE`; the plan then says, per
// flow, which of the destination's QPs (and which source port) to use.
//
//   {"qpns": [[1234, 1235, 1236], [877, 878, 901], ...]}   // index = rank
//
// A QPN serves one flow of a plan: an RC QP connects to exactly one remote
// QP, so a rank needs at least as many QPNs as flows come into it.
//
// Without a file (model studies, `weft sim`), default_qpn_pool() stands in:
// rank r's QPNs are kDefaultQpnBase + r * per_rank + j for j < per_rank,
// consecutive numbers from a base as HCAs hand them out; the planner takes
// per_rank = max(kDefaultQpnsPerRank, the most flows into one rank).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "weft/common/status.h"

namespace weft::routing {

using QpnPool = std::vector<std::vector<uint32_t>>;  // per rank: its QPNs

inline constexpr uint32_t kDefaultQpnBase = 0x100;
inline constexpr int kDefaultQpnsPerRank = 8;

QpnPool default_qpn_pool(int ranks, int per_rank = kDefaultQpnsPerRank);

// Parses the file format above for a job of `ranks` ranks: one non-empty
// list per rank, each QPN a data QP (2..2^24-1, ecmp.h) and listed once per
// rank. Errors name the JSON path.
Result<QpnPool> parse_qpn_pool(const std::string& text, int ranks);
Result<QpnPool> load_qpn_pool(const std::string& path, int ranks);

}  // namespace weft::routing
