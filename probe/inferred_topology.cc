// inferred_topology.h: a probe campaign's inferred fabric as a topology.
#include "weft/probe/inferred_topology.h"

#include <cmath>
#include <map>
#include <set>

#include <fmt/format.h>

#include "inferred_shape.h"
#include "weft/db/stores.h"

namespace weft::probe {

Result<topo::Fabric> inferred_topology(db::Database& db, const InferredTopologyOptions& opt) {
  if (!(opt.fabric_gbps > 0) || !(opt.access_gbps > 0) || !std::isfinite(opt.fabric_gbps) ||
      !std::isfinite(opt.access_gbps)) {
    return invalid_argument("inferred topology: link rates must be finite and > 0 Gbit/s");
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

  // Endpoints: a campaign host named "host:nic" is one NIC of a multi-NIC
  // host (rail and multi-plane fabrics probe every NIC's address); any
  // other name is a host with one NIC "eth0".
  std::vector<Endpoint> ends;
  for (const auto& h : hosts) {  // id order = the order hosts were first listed
    auto it = inf.host_leaf.find(h.id);
    if (it == inf.host_leaf.end()) continue;  // not a host of this campaign
    ends.push_back({h.name, "eth0", h.ip, it->second});
  }
  split_nic_names(ends);
  int leaves = 0;
  for (const auto& [host, leaf] : inf.host_leaf) leaves = std::max(leaves, leaf);
  const FabricShape shape = infer_shape(inf, ends, leaves);

  topo::Fabric f;
  f.kind = shape.rails ? topo::FabricKind::kRail : topo::FabricKind::kClos2;
  f.name = opt.name.empty() ? fmt::format("probed-{}", campaign) : opt.name;
  // Vertices: NICs first, then switches (fabric.h); spines, then leaves.
  std::map<int, int> spine_index;  // spine number -> switch index
  for (const auto& s : inf.spines) {
    spine_index[s.number] = static_cast<int>(f.switches.size());
    f.switches.push_back({fmt::format("s{}", s.number), topo::kTierSpine, topo::Part::kNone, -1, s.number, -1,
                          shape.spine_plane.empty() ? -1 : shape.spine_plane.at(s.number)});
  }
  const int first_leaf = static_cast<int>(f.switches.size());
  for (int l = 1; l <= leaves; ++l) {
    f.switches.push_back({fmt::format("l{}", l), topo::kTierLeaf, topo::Part::kNone, -1, 0,
                          shape.rails ? shape.leaf_rail[static_cast<size_t>(l)] : -1,
                          shape.leaf_plane.empty() ? -1 : shape.leaf_plane[static_cast<size_t>(l)]});
  }
  std::vector<std::pair<int, int>> access;  // (nic, leaf switch)
  std::map<std::string, int> host_index;
  for (const auto& e : ends) {
    auto [hit, added] = host_index.try_emplace(e.host, static_cast<int>(f.hosts.size()));
    if (added) f.hosts.push_back({e.host, {}});
    const int hi = hit->second;
    const int nic = static_cast<int>(f.nics.size());
    const int k = static_cast<int>(f.hosts[static_cast<size_t>(hi)].nics.size());
    f.hosts[static_cast<size_t>(hi)].nics.push_back(nic);
    f.nics.push_back({e.nic, hi, k, {}, e.ip});
    access.push_back({nic, first_leaf + e.leaf - 1});
  }
  const int nics = static_cast<int>(f.nics.size());
  for (const auto& [nic, sw] : access) f.links.push_back({nic, nics + sw, opt.access_gbps, topo::LinkState::kUp});
  std::set<std::pair<int, int>> carried;  // (spine, leaf) some flow crossed
  for (const auto& k : inf.links) {
    if (!k.dead && k.flows > 0) carried.insert({k.spine, k.leaf});
  }
  for (const auto& [number, sw] : spine_index) {
    for (int l = 1; l <= leaves; ++l) {
      // Planes share no link: a spine and a leaf of two planes are not linked.
      if (!shape.leaf_plane.empty() && shape.spine_plane.at(number) != shape.leaf_plane[static_cast<size_t>(l)]) continue;
      f.links.push_back({nics + sw, nics + first_leaf + l - 1, opt.fabric_gbps,
                         carried.count({number, l}) ? topo::LinkState::kUp : topo::LinkState::kDown});
    }
  }
  WEFT_RETURN_IF_ERROR(f.finalize());
  return f;
}

}  // namespace weft::probe
