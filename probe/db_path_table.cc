// DbPathTable (db_path_table.h): prepared queries over the observations index
// (src_id, dst_id, protocol, dport), one statement per question.
#include "weft/probe/db_path_table.h"

#include <map>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "weft/db/stores.h"

namespace weft::probe {
namespace {

class DbPathTable final : public routing::PathTable {
 public:
  DbPathTable(const topo::Fabric& f, db::Database db, std::string path, DbPathTableOptions opt)
      : fabric_(f), db_(std::move(db)), path_(std::move(path)), opt_(opt) {}

  Status init() {
    WEFT_ASSIGN_OR_RETURN(auto hosts, db::list_hosts(db_));
    for (const auto& h : hosts) {
      auto hi = fabric_.find_host(h.name);
      if (!hi) {
        // A probed "host:nic" is one NIC of a multi-NIC host (inferred_topology.h).
        if (auto n = fabric_.find_nic(h.name); n && h.name.find(':') != std::string::npos) host_of_nic_[*n] = h.id;
        continue;  // otherwise probed but not in this topology file
      }
      const auto& nics = fabric_.hosts[static_cast<size_t>(*hi)].nics;
      int nic = nics.empty() ? -1 : nics.front();
      for (int n : nics) {
        if (fabric_.nics[static_cast<size_t>(n)].address == h.ip) nic = n;
      }
      if (nic >= 0) host_of_nic_[nic] = h.id;
    }
    if (host_of_nic_.empty()) {
      return failed_precondition(fmt::format("{}: none of its probed hosts is in the topology '{}'", path_,
                                             fabric_.name));
    }
    for (size_t s = 0; s < fabric_.switches.size(); ++s) {
      const auto& sw = fabric_.switches[s];
      if (sw.tier == topo::kTierSpine && sw.id > 0) spine_switch_[sw.id] = static_cast<int>(s);
    }
    WEFT_ASSIGN_OR_RETURN(route_st_, db_.prepare(
        "SELECT spine FROM observations WHERE campaign_id = ? AND src_id = ? AND dst_id = ? AND protocol = ? "
        "AND sport = ? AND dport = ? AND answered > 0 AND unstable = 0 AND spine IS NOT NULL"));
    WEFT_ASSIGN_OR_RETURN(ports_st_, db_.prepare(
        "SELECT sport, spine FROM observations WHERE campaign_id = ? AND src_id = ? AND dst_id = ? AND protocol = ? "
        "AND dport = ? AND sport BETWEEN ? AND ? AND answered > 0 AND unstable = 0 AND spine IS NOT NULL "
        "ORDER BY sport LIMIT ?"));
    return ok_status();
  }

  std::string describe() const override {
    return opt_.campaign ? fmt::format("{} campaign {}", path_, *opt_.campaign) : fmt::format("{} (newest campaign)", path_);
  }
  const topo::Fabric& fabric() const override { return fabric_; }

  Result<routing::Route> route(const routing::FlowKey& k) override {
    WEFT_ASSIGN_OR_RETURN(auto ends, endpoints(k.src_nic, k.dst_nic));
    if (!ends) return not_found("no probed host for these NICs");
    WEFT_ASSIGN_OR_RETURN(std::optional<int64_t> c, campaign_for(k.proto, k.dport));
    if (!c) return missing_campaign(k.proto, k.dport);
    route_st_.reset();
    WEFT_RETURN_IF_ERROR(route_st_.bind_all(*c, ends->first, ends->second, static_cast<int>(k.proto),
                                            static_cast<int>(k.sport), static_cast<int>(k.dport)));
    WEFT_ASSIGN_OR_RETURN(bool row, route_st_.step());
    if (!row) return not_found(fmt::format("sport {} of this pair was not probed (or never answered)", k.sport));
    return make_route(k.src_nic, k.dst_nic, static_cast<int>(route_st_.column_int(0)));
  }

  Status ports(const routing::PairQuery& q, routing::PortRange r, int max_ports, routing::PairRoutes& out) override {
    out.clear();
    if (max_ports <= 0) return ok_status();
    WEFT_ASSIGN_OR_RETURN(auto ends, endpoints(q.src_nic, q.dst_nic));
    if (!ends) return ok_status();
    WEFT_ASSIGN_OR_RETURN(std::optional<int64_t> c, campaign_for(q.proto, q.dport));
    // Not an empty answer: the planner would call the pair unprobed and ask
    // for a re-probe, where the database holds another protocol or port.
    if (!c) return missing_campaign(q.proto, q.dport);
    ports_st_.reset();
    WEFT_RETURN_IF_ERROR(ports_st_.bind_all(*c, ends->first, ends->second, static_cast<int>(q.proto),
                                            static_cast<int>(q.dport), static_cast<int>(r.lo), static_cast<int>(r.hi),
                                            max_ports));
    std::map<int, int> route_of_spine;
    for (;;) {
      WEFT_ASSIGN_OR_RETURN(bool row, ports_st_.step());
      if (!row) break;
      const int spine = static_cast<int>(ports_st_.column_int(1));
      auto it = route_of_spine.find(spine);
      if (it == route_of_spine.end()) {
        auto route = make_route(q.src_nic, q.dst_nic, spine);
        if (!route) continue;  // a spine the topology does not have: not usable for planning
        it = route_of_spine.emplace(spine, out.add_route(*route)).first;
      }
      out.ports.push_back({.sport = static_cast<uint16_t>(ports_st_.column_int(0)), .route = it->second});
    }
    return ok_status();
  }

 private:
  Result<std::optional<std::pair<int64_t, int64_t>>> endpoints(int src_nic, int dst_nic) const {
    const int n = static_cast<int>(fabric_.nics.size());
    if (src_nic < 0 || src_nic >= n || dst_nic < 0 || dst_nic >= n || src_nic == dst_nic) {
      return invalid_argument(fmt::format("bad NIC pair ({}, {}) for a fabric of {} NICs", src_nic, dst_nic, n));
    }
    auto a = host_of_nic_.find(src_nic), b = host_of_nic_.find(dst_nic);
    if (a == host_of_nic_.end() || b == host_of_nic_.end()) return std::optional<std::pair<int64_t, int64_t>>();
    return std::optional<std::pair<int64_t, int64_t>>({a->second, b->second});
  }

  // No finished campaign of this protocol and dport: the error names what
  // the database holds and both ways out (probe this one, plan that one).
  Status missing_campaign(uint8_t proto, uint16_t dport) {
    auto name = [](int p) -> std::string {
      return p == routing::kProtoTcp ? "tcp" : p == routing::kProtoUdp ? "udp" : fmt::format("protocol {}", p);
    };
    std::vector<std::string> held;
    auto st = db_.prepare("SELECT DISTINCT protocol, dport FROM campaigns WHERE state = 'done' ORDER BY protocol, dport");
    if (st) {
      for (;;) {
        auto row = st->step();
        if (!row || !*row) break;
        held.push_back(fmt::format("{}/{}", name(static_cast<int>(st->column_int(0))), st->column_int(1)));
      }
    }
    const std::string asked = fmt::format("{}/{}", name(proto), dport);
    return failed_precondition(fmt::format(
        "{} has no finished probe campaign of {} ({}): probe those paths (weft probe {}--dport {}){}", path_, asked,
        held.empty() ? "it has none finished" : fmt::format("it holds {}", fmt::join(held, ", ")),
        proto == routing::kProtoTcp ? "--backend tcp-syn " : "", dport,
        held.empty() ? "" : ", or plan for the protocol and port probed (weft route --protocol, --dport)"));
  }

  Result<std::optional<int64_t>> campaign_for(uint8_t proto, uint16_t dport) {
    if (opt_.campaign) return opt_.campaign;
    const int key = proto << 16 | dport;
    if (auto it = campaign_cache_.find(key); it != campaign_cache_.end()) return it->second;
    WEFT_ASSIGN_OR_RETURN(db::Statement st, db_.prepare(
        "SELECT id FROM campaigns WHERE state = 'done' AND protocol = ? AND dport = ? ORDER BY id DESC LIMIT 1"));
    WEFT_RETURN_IF_ERROR(st.bind_all(static_cast<int>(proto), static_cast<int>(dport)));
    WEFT_ASSIGN_OR_RETURN(bool row, st.step());
    std::optional<int64_t> c;
    if (row) c = st.column_int(0);
    campaign_cache_[key] = c;
    return c;
  }

  Result<routing::Route> make_route(int src_nic, int dst_nic, int spine) const {
    const int ls = fabric_.nic_switch(src_nic), ld = fabric_.nic_switch(dst_nic);
    if (spine == 0) {
      if (ls != ld) {
        return data_loss(fmt::format("{}: a same-leaf observation between NICs on {} and {}", path_,
                                     fabric_.switches[static_cast<size_t>(ls)].name,
                                     fabric_.switches[static_cast<size_t>(ld)].name));
      }
      return routing::Route{ls};
    }
    auto it = spine_switch_.find(spine);
    if (it == spine_switch_.end()) {
      return not_found(fmt::format("spine {} of {} is not a spine id of the topology", spine, path_));
    }
    return routing::Route{ls, it->second, ld};
  }

  const topo::Fabric& fabric_;
  db::Database db_;
  std::string path_;
  DbPathTableOptions opt_;
  std::map<int, int64_t> host_of_nic_;
  std::map<int, int> spine_switch_;
  std::map<int, std::optional<int64_t>> campaign_cache_;
  db::Statement route_st_, ports_st_;
};

}  // namespace

Result<std::unique_ptr<routing::PathTable>> open_db_path_table(const topo::Fabric& fabric, const std::string& db_path,
                                                               const DbPathTableOptions& opt) {
  db::OpenOptions ro;
  ro.read_only = true;
  auto opened = db::Database::open(db_path, ro);
  if (!opened) return opened.status().with_context("--paths " + db_path);
  db::Database db = std::move(opened).value();
  auto t = std::make_unique<DbPathTable>(fabric, std::move(db), db_path, opt);
  WEFT_RETURN_IF_ERROR(t->init().with_context("--paths " + db_path));
  return std::unique_ptr<routing::PathTable>(std::move(t));
}

}  // namespace weft::probe
