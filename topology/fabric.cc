#include "weft/topology/fabric.h"

#include <algorithm>
#include <cctype>

#include <fmt/format.h>

namespace weft::topo {

std::string_view fabric_kind_name(FabricKind k) {
  switch (k) {
    case FabricKind::kClos2: return "clos2";
    case FabricKind::kClos3: return "clos3";
    case FabricKind::kBiGraph: return "bigraph";
    case FabricKind::kRail: return "rail";
    case FabricKind::kCustom: return "custom";
  }
  return "custom";
}

std::optional<FabricKind> parse_fabric_kind(std::string_view s) {
  for (auto k : {FabricKind::kClos2, FabricKind::kClos3, FabricKind::kBiGraph, FabricKind::kRail, FabricKind::kCustom}) {
    if (fabric_kind_name(k) == s) return k;
  }
  return std::nullopt;
}

std::string_view part_name(Part p) {
  switch (p) {
    case Part::kUpper: return "upper";
    case Part::kLower: return "lower";
    case Part::kNone: return "none";
  }
  return "none";
}

std::optional<Part> parse_part(std::string_view s) {
  if (s == "upper") return Part::kUpper;
  if (s == "lower") return Part::kLower;
  if (s == "none" || s.empty()) return Part::kNone;
  return std::nullopt;
}

namespace {
uint64_t pair_key(int a, int b) {
  if (a > b) std::swap(a, b);
  return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b);
}
}  // namespace

// Rank files carry host names to launchers line by line, comma-separated
// (csv) or after '#' comments (mpich, slurm): a name is what a host name may
// be (RFC 1123: letters, digits, '-', '.'), and '_' as clusters use.
std::string host_name_fault(std::string_view name) {
  auto bad = std::find_if(name.begin(), name.end(), [](char c) {
    return !std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '.' && c != '_';
  });
  if (bad == name.end()) return "";
  const unsigned char c = static_cast<unsigned char>(*bad);
  return fmt::format("{} is not allowed (letters, digits, '-', '.' and '_' are)",
                     std::isprint(c) ? fmt::format("'{}'", *bad) : fmt::format("byte {:#04x}", c));
}

Status Fabric::finalize() {
  host_by_name_.clear();
  switch_by_name_.clear();
  link_by_pair_.clear();
  host_by_name_.reserve(hosts.size());
  for (size_t h = 0; h < hosts.size(); ++h) {
    if (hosts[h].name.empty()) return invalid_argument(fmt::format("host #{} has no name", h));
    if (hosts[h].name.find(':') != std::string::npos) {
      return invalid_argument(fmt::format("host name '{}' must not contain ':'", hosts[h].name));
    }
    if (const std::string why = host_name_fault(hosts[h].name); !why.empty()) {
      return invalid_argument(fmt::format("host name '{}': {}", hosts[h].name, why));
    }
    if (!host_by_name_.emplace(hosts[h].name, static_cast<int>(h)).second) {
      return invalid_argument(fmt::format("duplicate host name '{}'", hosts[h].name));
    }
  }
  for (size_t s = 0; s < switches.size(); ++s) {
    if (switches[s].name.empty()) return invalid_argument(fmt::format("switch #{} has no name", s));
    if (host_by_name_.count(switches[s].name)) {
      return invalid_argument(fmt::format("name '{}' is both a host and a switch", switches[s].name));
    }
    if (!switch_by_name_.emplace(switches[s].name, static_cast<int>(s)).second) {
      return invalid_argument(fmt::format("duplicate switch name '{}'", switches[s].name));
    }
    if (switches[s].tier < 0 || switches[s].tier > 2) {
      return invalid_argument(
          fmt::format("switch '{}': tier {} is not 0, 1 or 2", switches[s].name, switches[s].tier));
    }
  }
  for (size_t h = 0; h < hosts.size(); ++h) {
    for (size_t k = 0; k < hosts[h].nics.size(); ++k) {
      int n = hosts[h].nics[k];
      if (n < 0 || n >= static_cast<int>(nics.size()) || nics[n].host != static_cast<int>(h) ||
          nics[n].index_on_host != static_cast<int>(k)) {
        return internal_error(fmt::format("host '{}': NIC table inconsistent", hosts[h].name));
      }
    }
  }
  nic_switch_.assign(nics.size(), -1);
  nic_link_.assign(nics.size(), -1);
  sw_adj_.assign(switches.size(), {});
  sw_nics_.assign(switches.size(), {});
  const int nv = num_vertices();
  for (size_t l = 0; l < links.size(); ++l) {
    const Link& lk = links[l];
    if (lk.a < 0 || lk.a >= nv || lk.b < 0 || lk.b >= nv) {
      return invalid_argument(fmt::format("link #{} has an endpoint that does not exist", l));
    }
    if (lk.a == lk.b) return invalid_argument(fmt::format("link #{} connects {} to itself", l, vertex_name(lk.a)));
    if (!(lk.gbps > 0)) {
      return invalid_argument(fmt::format("link {} - {}: capacity must be > 0 Gbit/s",
                                          vertex_name(lk.a), vertex_name(lk.b)));
    }
    if (!link_by_pair_.emplace(pair_key(lk.a, lk.b), static_cast<int>(l)).second) {
      return invalid_argument(
          fmt::format("two links between {} and {}", vertex_name(lk.a), vertex_name(lk.b)));
    }
    const bool sa = is_switch_vertex(lk.a), sb = is_switch_vertex(lk.b);
    if (sa && sb) {
      sw_adj_[vertex_switch(lk.a)].push_back({vertex_switch(lk.b), static_cast<int>(l)});
      sw_adj_[vertex_switch(lk.b)].push_back({vertex_switch(lk.a), static_cast<int>(l)});
    } else if (!sa && !sb) {
      return invalid_argument(fmt::format("link {} - {} joins two NICs; NICs attach to switches",
                                          vertex_name(lk.a), vertex_name(lk.b)));
    } else {
      int nic = sa ? lk.b : lk.a;
      int sw = vertex_switch(sa ? lk.a : lk.b);
      if (nic_switch_[nic] != -1) {
        return invalid_argument(
            fmt::format("NIC {} attaches to two switches", nic_qualified_name(nic)));
      }
      nic_switch_[nic] = sw;
      nic_link_[nic] = static_cast<int>(l);
    }
  }
  for (size_t n = 0; n < nics.size(); ++n) {
    if (nic_switch_[n] < 0) {
      return invalid_argument(
          fmt::format("NIC {} is not attached to any switch", nic_qualified_name(static_cast<int>(n))));
    }
    sw_nics_[nic_switch_[n]].push_back(static_cast<int>(n));
  }
  return check_rails_planes();
}

std::string Fabric::vertex_name(int v) const {
  if (v < 0 || v >= num_vertices()) return fmt::format("<vertex {}>", v);
  return is_switch_vertex(v) ? switches[vertex_switch(v)].name : nic_qualified_name(v);
}

std::string Fabric::nic_qualified_name(int nic) const {
  const Nic& n = nics[nic];
  const std::string& host = (n.host >= 0 && n.host < static_cast<int>(hosts.size())) ? hosts[n.host].name : "?";
  return host + ":" + n.name;
}

std::optional<int> Fabric::find_host(std::string_view host) const {
  auto it = host_by_name_.find(std::string(host));
  if (it == host_by_name_.end()) return std::nullopt;
  return it->second;
}

std::optional<int> Fabric::find_switch(std::string_view sw) const {
  auto it = switch_by_name_.find(std::string(sw));
  if (it == switch_by_name_.end()) return std::nullopt;
  return it->second;
}

std::optional<int> Fabric::find_nic(std::string_view qualified) const {
  auto colon = qualified.find(':');
  auto host = find_host(qualified.substr(0, colon));
  if (!host) return std::nullopt;
  const Host& h = hosts[*host];
  if (colon == std::string_view::npos) {
    if (h.nics.size() == 1) return h.nics[0];
    return std::nullopt;
  }
  std::string_view nic = qualified.substr(colon + 1);
  for (int n : h.nics) {
    if (nics[n].name == nic) return n;
  }
  return std::nullopt;
}

std::optional<int> Fabric::link_between(int va, int vb) const {
  auto it = link_by_pair_.find(pair_key(va, vb));
  if (it == link_by_pair_.end()) return std::nullopt;
  return it->second;
}

std::string Fabric::directed_name(int dlink) const {
  return fmt::format("{} -> {}", vertex_name(directed_src(dlink)), vertex_name(directed_dst(dlink)));
}

int Fabric::num_tiers() const {
  int t = 0;
  for (const auto& s : switches) t = std::max(t, s.tier + 1);
  return t;
}

}  // namespace weft::topo
