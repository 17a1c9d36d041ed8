#include "weft/ranking/rank_order.h"

#include <algorithm>
#include <unordered_set>

#include <fmt/format.h>

#include "weft/common/file_util.h"

namespace weft::ranking {

std::string_view rank_algo_name(RankAlgo a) {
  switch (a) {
    case RankAlgo::kAuto: return "auto";
    case RankAlgo::kNaive: return "naive";
    case RankAlgo::kClos: return "clos";
    case RankAlgo::kHdrm: return "hdrm";
    case RankAlgo::kRing: return "ring";
    case RankAlgo::kRail: return "rail";
  }
  return "auto";
}

std::optional<RankAlgo> parse_rank_algo(std::string_view s) {
  for (auto a : {RankAlgo::kAuto, RankAlgo::kNaive, RankAlgo::kClos, RankAlgo::kHdrm, RankAlgo::kRing, RankAlgo::kRail}) {
    if (rank_algo_name(a) == s) return a;
  }
  return std::nullopt;
}

std::vector<int> allocation_all(const topo::Fabric& f) {
  std::vector<int> out;
  out.reserve(f.nics.size());
  for (const auto& h : f.hosts) out.insert(out.end(), h.nics.begin(), h.nics.end());
  return out;
}

Result<std::vector<int>> allocation_from_names(const topo::Fabric& f, const std::vector<std::string>& entries) {
  std::vector<int> out;
  std::vector<char> seen(f.nics.size(), 0);
  for (const auto& e : entries) {
    std::vector<int> nics;
    if (e.find(':') == std::string::npos) {
      auto h = f.find_host(e);
      if (!h) return not_found(fmt::format("host '{}' is not in the topology '{}'", e, f.name));
      nics = f.hosts[*h].nics;
    } else {
      auto n = f.find_nic(e);
      if (!n) return not_found(fmt::format("NIC '{}' is not in the topology '{}'", e, f.name));
      nics = {*n};
    }
    for (int n : nics) {
      if (seen[n]) {
        return invalid_argument(fmt::format("duplicate host: '{}' lists {} a second time", e, f.nic_qualified_name(n)));
      }
      seen[n] = 1;
      out.push_back(n);
    }
  }
  if (out.empty()) return invalid_argument("the allocation is empty: no hosts given");
  return out;
}

Result<std::vector<int>> load_allocation(const topo::Fabric& f, const std::string& path) {
  WEFT_ASSIGN_OR_RETURN(std::string text, read_file(path));
  std::vector<std::string> entries;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t nl = text.find('\n', pos);
    std::string line = text.substr(pos, nl == std::string::npos ? std::string::npos : nl - pos);
    pos = nl == std::string::npos ? text.size() : nl + 1;
    if (auto c = line.find('#'); c != std::string::npos) line.resize(c);
    // First whitespace-separated word; "slots=N" and the like are ignored.
    auto b = line.find_first_not_of(" \t\r");
    if (b == std::string::npos) continue;
    auto e = line.find_first_of(" \t\r", b);
    entries.push_back(line.substr(b, e == std::string::npos ? std::string::npos : e - b));
  }
  auto alloc = allocation_from_names(f, entries);
  if (!alloc) return alloc.status().with_context(path);
  return alloc;
}

Status validate_order(const topo::Fabric& f, const RankOrder& order) {
  std::vector<char> seen(f.nics.size(), 0);
  for (int r = 0; r < order.size(); ++r) {
    int n = order.nics[r];
    if (n < 0 || n >= static_cast<int>(f.nics.size())) {
      return invalid_argument(fmt::format("rank {} names NIC #{} which does not exist", r, n));
    }
    if (seen[n]) return invalid_argument(fmt::format("rank {}: {} already has a rank", r, f.nic_qualified_name(n)));
    seen[n] = 1;
  }
  return ok_status();
}

RankOrder rank_naive(const std::vector<int>& allocation) { return RankOrder{allocation}; }

// An allocation HDRM does not fit (uneven, partial, M > N/2, sizes not
// powers of two) gets leaf sets, which need none of that.
RankAlgo resolve_auto(const topo::Fabric& f, const std::vector<int>& allocation) {
  if (f.kind == topo::FabricKind::kBiGraph) return rank_hdrm(f, allocation) ? RankAlgo::kHdrm : RankAlgo::kClos;
  if (f.kind == topo::FabricKind::kRail || f.num_planes() > 0) return RankAlgo::kRail;
  return RankAlgo::kClos;
}

Result<RankOrder> rank(const topo::Fabric& f, const std::vector<int>& allocation, RankAlgo algo) {
  if (allocation.empty()) return invalid_argument("the allocation is empty");
  {
    RankOrder in{allocation};
    auto st = validate_order(f, in);
    if (!st) return st.with_context("allocation");
  }
  if (algo == RankAlgo::kAuto) algo = resolve_auto(f, allocation);
  switch (algo) {
    case RankAlgo::kNaive: return rank_naive(allocation);
    case RankAlgo::kClos: return rank_leaf_sets(f, allocation);
    case RankAlgo::kHdrm: return rank_hdrm(f, allocation);
    case RankAlgo::kRing: return rank_ring(f, allocation);
    case RankAlgo::kRail: return rank_rail(f, allocation);
    case RankAlgo::kAuto: break;
  }
  return internal_error("unreachable rank algorithm");
}

}  // namespace weft::ranking
