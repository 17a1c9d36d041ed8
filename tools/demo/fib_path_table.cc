// fib_path_table.h: the kernel's forwarding decisions as a routing::PathTable.
#include "fib_path_table.h"

#include <tuple>

#include <fmt/format.h>

namespace weft::cli::demo {
namespace {

class FibPathTable final : public routing::PathTable {
 public:
  FibPathTable(const topo::Fabric& f, EmulatedFabric& fabric, int ports) : f_(f), fabric_(fabric), ports_(ports) {
    for (const auto& h : fabric.hosts()) ip_[h.name] = h.ip;
    for (size_t i = 0; i < f.switches.size(); ++i) {
      if (f.switches[i].id > 0) spine_[f.switches[i].id] = static_cast<int>(i);
    }
    for (const auto& l : f.links) {
      if (!f.is_switch_vertex(l.a) && f.is_switch_vertex(l.b)) leaf_[l.a] = l.b - static_cast<int>(f.nics.size());
      if (!f.is_switch_vertex(l.b) && f.is_switch_vertex(l.a)) leaf_[l.b] = l.a - static_cast<int>(f.nics.size());
    }
  }

  std::string describe() const override { return "the emulated fabric's forwarding tables"; }
  const topo::Fabric& fabric() const override { return f_; }

  // Looks up every query's ports in one call of the fabric script.
  Status fetch(const std::vector<FibQuery>& queries) {
    std::vector<std::string> lines;
    std::vector<std::tuple<Key, uint16_t>> asked;
    const routing::PortRange range;
    for (const auto& q : queries) {
      const Key k{q.src_nic, q.dst_nic, q.dport};
      if (cache_.count(k) > 0) continue;
      cache_[k];
      WEFT_ASSIGN_OR_RETURN(std::string src, ip(q.src_nic));
      WEFT_ASSIGN_OR_RETURN(std::string dst, ip(q.dst_nic));
      // Ports spread evenly over the range: distinct, reproducible.
      for (int i = 0; i < ports_; ++i) {
        const auto sport = static_cast<uint16_t>(range.lo + static_cast<uint32_t>(i) * range.size() / static_cast<uint32_t>(ports_));
        lines.push_back(fmt::format("{} {} tcp {} {}", src, dst, sport, q.dport));
        asked.emplace_back(k, sport);
      }
    }
    if (lines.empty()) return ok_status();
    WEFT_ASSIGN_OR_RETURN(std::vector<int> spines, fabric_.spines_of(lines));
    for (size_t i = 0; i < spines.size(); ++i) {
      const auto& [k, sport] = asked[i];
      if (spines[i] < 0) {
        return failed_precondition(fmt::format("the fabric has no route for {}", lines[i]));
      }
      cache_[k].emplace_back(sport, spines[i]);
    }
    return ok_status();
  }

  Result<routing::Route> route(const routing::FlowKey& key) override {
    const Key k{key.src_nic, key.dst_nic, key.dport};
    WEFT_RETURN_IF_ERROR(fetch({{key.src_nic, key.dst_nic, key.dport}}));
    int spine = -2;
    for (const auto& [sport, s] : cache_[k]) {
      if (sport == key.sport) spine = s;
    }
    if (spine == -2) {
      WEFT_ASSIGN_OR_RETURN(std::string src, ip(key.src_nic));
      WEFT_ASSIGN_OR_RETURN(std::string dst, ip(key.dst_nic));
      WEFT_ASSIGN_OR_RETURN(auto one, fabric_.spines_of({fmt::format("{} {} tcp {} {}", src, dst, key.sport, key.dport)}));
      spine = one.front();
      if (spine < 0) return failed_precondition(fmt::format("the fabric has no route from {} to {}", src, dst));
    }
    return path(key.src_nic, key.dst_nic, spine);
  }

  Status ports(const routing::PairQuery& q, routing::PortRange range, int max_ports, routing::PairRoutes& out) override {
    out.clear();
    const Key k{q.src_nic, q.dst_nic, q.dport};
    WEFT_RETURN_IF_ERROR(fetch({{q.src_nic, q.dst_nic, q.dport}}));
    std::map<int, int> index;  // spine -> route index
    for (const auto& [sport, spine] : cache_[k]) {
      if (!range.contains(sport) || static_cast<int>(out.ports.size()) >= max_ports) continue;
      auto it = index.find(spine);
      if (it == index.end()) {
        WEFT_ASSIGN_OR_RETURN(routing::Route r, path(q.src_nic, q.dst_nic, spine));
        it = index.emplace(spine, out.add_route(r)).first;
      }
      out.ports.push_back({.sport = sport, .route = it->second});
    }
    return ok_status();
  }

 private:
  using Key = std::tuple<int, int, uint16_t>;

  Result<std::string> ip(int nic) const {
    const topo::Nic& n = f_.nics[static_cast<size_t>(nic)];
    auto it = ip_.find(f_.hosts[static_cast<size_t>(n.host)].name + ":" + n.name);
    if (it == ip_.end()) return not_found(fmt::format("the emulated fabric has no NIC port {}", n.name));
    return it->second;
  }

  // The script answers 0 for a pair on one leaf, else spine N (Switch::id).
  Result<routing::Route> path(int src, int dst, int spine) const {
    const int ls = leaf_.at(src), ld = leaf_.at(dst);
    if (spine == 0) return routing::Route{ls};
    auto it = spine_.find(spine);
    if (it == spine_.end()) return internal_error(fmt::format("the fabric forwards through spine {}, which the model lacks", spine));
    return routing::Route{ls, it->second, ld};
  }

  const topo::Fabric& f_;
  EmulatedFabric& fabric_;
  int ports_;
  std::map<std::string, std::string> ip_;
  std::map<int, int> spine_, leaf_;  // spine id -> switch; NIC -> its leaf switch
  std::map<Key, std::vector<std::pair<uint16_t, int>>> cache_;  // (sport, spine) per pair and dport
};

}  // namespace

Result<std::unique_ptr<routing::PathTable>> make_fib_path_table(const topo::Fabric& f, EmulatedFabric& fabric,
                                                                const std::vector<FibQuery>& queries, int ports) {
  auto t = std::make_unique<FibPathTable>(f, fabric, ports);
  WEFT_RETURN_IF_ERROR(t->fetch(queries));
  return std::unique_ptr<routing::PathTable>(std::move(t));
}

}  // namespace weft::cli::demo
