// choose_watch_tuples and load_watch_fabric (watch_tuples.h).
#include "watch/watch_tuples.h"

#include <algorithm>
#include <map>
#include <set>
#include <tuple>

#include <fmt/format.h>

#include "weft/db/stores.h"

namespace weft::cli {

Result<WatchFabric> load_watch_fabric(db::Database& db, const std::vector<agent::HostEntry>& hosts) {
  WEFT_ASSIGN_OR_RETURN(std::optional<int64_t> campaign, db::latest_done_campaign(db, 17));
  if (!campaign) return not_found("the database holds no finished UDP probe campaign: run `weft probe` first");
  WEFT_ASSIGN_OR_RETURN(db::CampaignRow row, db::get_campaign(db, *campaign));
  if (row.spec.method != "dscp") {
    return failed_precondition(fmt::format("campaign {} used the {} method; watching needs a dscp campaign", *campaign,
                                           row.spec.method));
  }
  WEFT_ASSIGN_OR_RETURN(db::InferredFabric inf, db::load_inference(db, *campaign));
  WEFT_ASSIGN_OR_RETURN(std::vector<db::HostRow> rows, db::list_hosts(db));
  std::map<int64_t, int> index_of_id;
  for (const auto& r : rows) {
    for (size_t i = 0; i < hosts.size(); ++i) {
      if (hosts[i].name == r.name) index_of_id[r.id] = static_cast<int>(i);
    }
  }
  WatchFabric f;
  f.dport = static_cast<uint16_t>(row.spec.dport);
  f.host_leaf.assign(hosts.size(), 0);
  for (const auto& [id, leaf] : inf.host_leaf) {
    if (auto it = index_of_id.find(id); it != index_of_id.end()) f.host_leaf[static_cast<size_t>(it->second)] = leaf;
    f.leaves = std::max(f.leaves, leaf);
  }
  for (const auto& s : inf.spines) f.spines = std::max(f.spines, s.number);
  WEFT_ASSIGN_OR_RETURN(std::vector<db::Observation> obs, db::load_observations(db, *campaign));
  for (const auto& o : obs) {
    auto s = index_of_id.find(o.src_id), d = index_of_id.find(o.dst_id);
    if (s == index_of_id.end() || d == index_of_id.end() || !o.spine || *o.spine < 1 || o.unstable) continue;
    f.probed.push_back({s->second, d->second, static_cast<uint16_t>(o.sport), *o.spine});
  }
  if (f.leaves < 2 || f.spines < 1) {
    return failed_precondition(fmt::format("campaign {} inferred {} leaves and {} spines: nothing to watch", *campaign,
                                           f.leaves, f.spines));
  }
  return f;
}

namespace {

// The spine number a plan's path names ("s2" -> 2), or 0.
int spine_of(const routing::PlanFlow& flow) {
  if (flow.path.size() != 3) return 0;
  const std::string& n = flow.path[1];
  size_t i = n.find_first_of("0123456789");
  return i == std::string::npos ? 0 : std::atoi(n.c_str() + i);
}

}  // namespace

Result<std::vector<WatchTuple>> choose_watch_tuples(const WatchFabric& f, const std::vector<agent::HostEntry>& hosts,
                                                    const routing::RoutePlan* plan, int per_spine) {
  if (per_spine < 1) return invalid_argument(fmt::format("ports per spine per leaf pair must be >= 1, got {}", per_spine));
  std::vector<WatchTuple> out;
  std::set<std::tuple<int, int, uint16_t>> taken;
  auto add = [&](const ProbedTuple& p, bool planned) {
    if (!taken.insert({p.src, p.dst, p.sport}).second) return;
    out.push_back({p.src, p.dst, p.sport, p.spine, f.host_leaf[static_cast<size_t>(p.src)],
                   f.host_leaf[static_cast<size_t>(p.dst)], planned});
  };
  std::map<std::string, int> index;
  for (size_t i = 0; i < hosts.size(); ++i) index[hosts[i].name] = static_cast<int>(i);
  std::map<std::pair<int, int>, std::vector<const ProbedTuple*>> by_pair;
  for (const auto& p : f.probed) by_pair[{p.src, p.dst}].push_back(&p);
  if (plan) {
    for (const auto& flow : plan->flows) {
      auto s = index.find(flow.src_host), d = index.find(flow.dst_host);
      const int spine = spine_of(flow);
      if (s == index.end() || d == index.end() || spine == 0) continue;
      const auto& cands = by_pair[{s->second, d->second}];
      const ProbedTuple* pick = nullptr;
      for (const ProbedTuple* c : cands) {
        if (c->spine != spine) continue;
        if (!pick || (flow.protocol == "udp" && flow.dport == f.dport && c->sport == flow.sport)) pick = c;
      }
      if (!pick) {
        return not_found(fmt::format("planned flow {} -> {} over spine {}: no probed port of that pair takes it",
                                     flow.src_host, flow.dst_host, spine));
      }
      add(*pick, true);
    }
  }
  // Per ordered leaf pair and spine: candidates from every host pair, taken
  // round-robin over source hosts so that no host sends them all.
  std::map<std::tuple<int, int, int>, std::vector<const ProbedTuple*>> by_leaves;
  for (const auto& p : f.probed) {
    const int a = f.host_leaf[static_cast<size_t>(p.src)], b = f.host_leaf[static_cast<size_t>(p.dst)];
    if (a > 0 && b > 0 && a != b) by_leaves[{a, b, p.spine}].push_back(&p);
  }
  for (auto& [key, cands] : by_leaves) {
    const auto [a, b, spine] = key;
    std::stable_sort(cands.begin(), cands.end(), [](const ProbedTuple* x, const ProbedTuple* y) {
      return std::tie(x->src, x->dst, x->sport) < std::tie(y->src, y->dst, y->sport);
    });
    std::map<int, std::vector<const ProbedTuple*>> by_src;
    for (const ProbedTuple* c : cands) by_src[c->src].push_back(c);
    std::vector<int> srcs;
    for (const auto& [src, v] : by_src) srcs.push_back(src);
    // Start at a different source for each (leaf pair, spine) to spread them.
    const size_t start = static_cast<size_t>(b * 7 + spine * 3) % srcs.size();
    int chosen = 0;
    for (size_t k = 0; k < srcs.size() && chosen < per_spine; ++k) {
      const auto& v = by_src[srcs[(start + k) % srcs.size()]];
      const ProbedTuple* c = v[static_cast<size_t>(a + spine) % v.size()];
      if (taken.contains({c->src, c->dst, c->sport})) continue;
      add(*c, false);
      ++chosen;
    }
  }
  return out;
}

}  // namespace weft::cli
