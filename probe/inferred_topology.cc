// inferred_topology.h: a probe campaign's inferred fabric as a topology.
#include "weft/probe/inferred_topology.h"

#include <map>
#include <set>

#include <fmt/format.h>

#include "weft/db/stores.h"

namespace weft::probe {

Result<topo::Fabric> inferred_topology(db::Database& db, const InferredTopologyOptions& opt) {
  if (!(opt.fabric_gbps > 0) || !(opt.access_gbps > 0)) {
    return invalid_argument("inferred topology: link rates must be > 0 Gbit/s");
  }
  int64_t campaign = 0;
  if (opt.campaign) {
    campaign = *opt.campaign;
  } else {
    WEFT_ASSIGN_OR_RETURN(std::optional<int64_t> newest, db::latest_done_campaign(db));
    if (!newest) return not_found("the probe database holds no finished campaign (run weft probe first)");
    campaign = *newest;
  }
  WEFT_ASSIGN_OR_RETURN(db::CampaignRow row, db::get_campaign(db, campaign));
  if (row.state != "done") {
    return failed_precondition(fmt::format("campaign {} is '{}', not done: finish it (rerun weft probe)", campaign,
                                           row.state));
  }
  WEFT_ASSIGN_OR_RETURN(db::InferredFabric inf, db::load_inference(db, campaign));
  if (inf.host_leaf.empty()) return failed_precondition(fmt::format("campaign {} has no inferred fabric", campaign));
  WEFT_ASSIGN_OR_RETURN(std::vector<db::HostRow> hosts, db::list_hosts(db));

  topo::Fabric f;
  f.kind = topo::FabricKind::kClos2;
  f.name = opt.name.empty() ? fmt::format("probed-{}", campaign) : opt.name;
  int leaves = 0;
  for (const auto& [host, leaf] : inf.host_leaf) leaves = std::max(leaves, leaf);
  // Vertices: NICs first, then switches (fabric.h); spines, then leaves.
  std::map<int, int> spine_index;  // spine number -> switch index
  for (const auto& s : inf.spines) {
    spine_index[s.number] = static_cast<int>(f.switches.size());
    f.switches.push_back({fmt::format("s{}", s.number), topo::kTierSpine, topo::Part::kNone, -1, s.number});
  }
  const int first_leaf = static_cast<int>(f.switches.size());
  for (int l = 1; l <= leaves; ++l) {
    f.switches.push_back({fmt::format("l{}", l), topo::kTierLeaf, topo::Part::kNone, -1, 0});
  }
  std::vector<std::pair<int, int>> access;  // (nic, leaf switch)
  for (const auto& h : hosts) {  // id order = the order hosts were first listed
    auto it = inf.host_leaf.find(h.id);
    if (it == inf.host_leaf.end()) continue;  // not a host of this campaign
    const int hi = static_cast<int>(f.hosts.size());
    const int nic = static_cast<int>(f.nics.size());
    f.hosts.push_back({h.name, {nic}});
    f.nics.push_back({"eth0", hi, 0, {}, h.ip});
    access.push_back({nic, first_leaf + it->second - 1});
  }
  const int nics = static_cast<int>(f.nics.size());
  for (const auto& [nic, sw] : access) f.links.push_back({nic, nics + sw, opt.access_gbps, topo::LinkState::kUp});
  std::set<std::pair<int, int>> carried;  // (spine, leaf) some flow crossed
  for (const auto& k : inf.links) {
    if (!k.dead && k.flows > 0) carried.insert({k.spine, k.leaf});
  }
  for (const auto& [number, sw] : spine_index) {
    for (int l = 1; l <= leaves; ++l) {
      f.links.push_back({nics + sw, nics + first_leaf + l - 1, opt.fabric_gbps,
                         carried.count({number, l}) ? topo::LinkState::kUp : topo::LinkState::kDown});
    }
  }
  WEFT_RETURN_IF_ERROR(f.finalize());
  return f;
}

}  // namespace weft::probe
