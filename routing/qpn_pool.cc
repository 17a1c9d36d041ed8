#include "weft/routing/qpn_pool.h"

#include <algorithm>

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "weft/common/file_util.h"
#include "weft/common/json.h"
#include "weft/routing/ecmp.h"

namespace weft::routing {

QpnPool default_qpn_pool(int ranks, int per_rank) {
  QpnPool pool(static_cast<size_t>(std::max(ranks, 0)));
  const auto per = static_cast<uint32_t>(std::max(per_rank, 1));
  for (size_t r = 0; r < pool.size(); ++r) {
    for (uint32_t j = 0; j < per; ++j) {
      pool[r].push_back(kDefaultQpnBase + static_cast<uint32_t>(r) * per + j);
    }
  }
  return pool;
}

Result<QpnPool> parse_qpn_pool(const std::string& text, int ranks) {
  WEFT_ASSIGN_OR_RETURN(nlohmann::json root, parse_json(text, StatusCode::kInvalidArgument, "QPN pool"));
  auto bad = [](const std::string& path, const std::string& what) {
    return invalid_argument(fmt::format("QPN pool {}: {}", path, what));
  };
  if (!root.is_object() || !root.contains("qpns") || !root["qpns"].is_array()) {
    return bad("/qpns", "missing or not an array (one list of QPNs per rank)");
  }
  const auto& lists = root["qpns"];
  if (lists.size() != static_cast<size_t>(ranks)) {
    return bad("/qpns", fmt::format("{} lists for {} ranks (one per rank)", lists.size(), ranks));
  }
  QpnPool pool(lists.size());
  for (size_t r = 0; r < lists.size(); ++r) {
    const std::string path = fmt::format("/qpns/{}", r);
    if (!lists[r].is_array() || lists[r].empty()) return bad(path, "not a non-empty array of QPNs");
    for (size_t j = 0; j < lists[r].size(); ++j) {
      const auto& v = lists[r][j];
      if (!v.is_number_integer() || v.get<int64_t>() < kMinDataQpn || v.get<int64_t>() > kMaxQpn) {
        return bad(fmt::format("{}/{}", path, j), fmt::format("{} is not a data QP number ({}..{})", v.dump(),
                                                              kMinDataQpn, kMaxQpn));
      }
      const auto q = v.get<uint32_t>();
      if (std::find(pool[r].begin(), pool[r].end(), q) != pool[r].end()) {
        return bad(fmt::format("{}/{}", path, j), fmt::format("QPN {} is listed twice for rank {}", q, r));
      }
      pool[r].push_back(q);
    }
  }
  return pool;
}

Result<QpnPool> load_qpn_pool(const std::string& path, int ranks) {
  WEFT_ASSIGN_OR_RETURN(std::string text, read_file(path));
  auto p = parse_qpn_pool(text, ranks);
  if (!p) return p.status().with_context(path);
  return p;
}

}  // namespace weft::routing
