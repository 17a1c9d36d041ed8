// Rank orders: which subnode (NIC) gets which rank.
//
// An allocation is the list of NICs a job was given, in the launcher's order.
// A ranker permutes it; rank r runs on NIC order.nics[r]. Algorithms (one file
// each, see docs/ranking.md):
//   naive  input order — the baseline every claim is measured against
//   clos   contiguous leaf sets (ACCL): a leaf's subnodes get consecutive ranks
//   hdrm   Halving-Doubling with Rank Mapping for BiGraph (EFLOPS)
//   ring   leaf by leaf (pod by pod on 3 tiers) so a ring crosses leaves least
//   rail   rank = (host, local rank): a host's NICs contiguous, local rank l
//          on the same rail and plane on every host (multi-NIC, rail and
//          multi-plane fabrics)
//   auto   the fabric's own order: hdrm on BiGraph (clos where the
//          allocation does not fit hdrm), rail on rail and multi-plane
//          fabrics, clos otherwise. For a given collective, weft rank and
//          weft sim weigh it against clos with the link-load checker
//          (routing/weft/routing/auto_order.h), which this library cannot
//          call: rail loses to clos for halving-doubling.
//
//   auto alloc = allocation_from_names(fabric, {"h1-1", "h2-1"}).value();
//   RankOrder order = rank(fabric, alloc, RankAlgo::kClos).value();
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "weft/common/status.h"
#include "weft/topology/fabric.h"

namespace weft::ranking {

enum class RankAlgo { kAuto, kNaive, kClos, kHdrm, kRing, kRail };

std::string_view rank_algo_name(RankAlgo a);
std::optional<RankAlgo> parse_rank_algo(std::string_view s);

struct RankOrder {
  std::vector<int> nics;  // nics[rank] = NIC index in the fabric
  int size() const { return static_cast<int>(nics.size()); }
  friend bool operator==(const RankOrder&, const RankOrder&) = default;
};

// Every NIC of the fabric, host by host.
std::vector<int> allocation_all(const topo::Fabric& f);

// Resolves entries "host" (all of its NICs) or "host:nic" (one NIC). Unknown
// names and NICs named twice are errors that name the entry.
Result<std::vector<int>> allocation_from_names(const topo::Fabric& f,
                                               const std::vector<std::string>& entries);

// Reads a hosts file: one entry per line, '#' starts a comment, blank lines
// ignored; "host slots=N" (Open MPI style) is accepted and the slots ignored.
Result<std::vector<int>> load_allocation(const topo::Fabric& f, const std::string& path);

// Runs one algorithm. RankAlgo::kAuto picks by fabric kind (resolve_auto).
Result<RankOrder> rank(const topo::Fabric& f, const std::vector<int>& allocation, RankAlgo algo);

// Algorithms (one file each).
RankOrder rank_naive(const std::vector<int>& allocation);
RankOrder rank_leaf_sets(const topo::Fabric& f, const std::vector<int>& allocation);
Result<RankOrder> rank_hdrm(const topo::Fabric& f, const std::vector<int>& allocation);
// The fabric's own order for this allocation (never kAuto); auto for a
// collective is routing::auto_order.
RankAlgo resolve_auto(const topo::Fabric& f, const std::vector<int>& allocation);
RankOrder rank_ring(const topo::Fabric& f, const std::vector<int>& allocation);
RankOrder rank_rail(const topo::Fabric& f, const std::vector<int>& allocation);

// Checks that `order` is a permutation of distinct, existing NICs.
Status validate_order(const topo::Fabric& f, const RankOrder& order);

}  // namespace weft::ranking
