#include "weft/topology/topology_file.h"

#include <arpa/inet.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <limits>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <nlohmann/json.hpp>

#include "weft/common/file_util.h"
#include "weft/common/json.h"

namespace weft::topo {
namespace {

using json = nlohmann::json;

// get<int>() of a larger JSON integer wraps (4294967297 reads as 1).
bool fits_int(const json& v) {
  if (v.is_number_unsigned()) return v.get<uint64_t>() <= static_cast<uint64_t>(std::numeric_limits<int>::max());
  const int64_t x = v.get<int64_t>();
  return x >= std::numeric_limits<int>::min() && x <= std::numeric_limits<int>::max();
}

// Reads typed fields of one JSON object and names the path of whatever is wrong.
class Reader {
 public:
  Reader(const json& j, std::string path) : j_(j), path_(std::move(path)) {}

  Status require_object() const {
    if (!j_.is_object()) return bad("", "expected an object");
    return ok_status();
  }
  // A misspelt field ("adress") would silently take its default: every
  // field must be one this format knows; "_"-prefixed ones are comments.
  Status known_fields(std::initializer_list<std::string_view> known) const {
    for (const auto& [key, value] : j_.items()) {
      if (key.starts_with('_') || std::find(known.begin(), known.end(), key) != known.end()) continue;
      return bad(key, fmt::format("unknown field (known here: {}; a field starting with '_' is a comment)",
                                  fmt::join(known, ", ")));
    }
    return ok_status();
  }
  Status bad(std::string_view field, std::string_view what) const {
    return invalid_argument(fmt::format("{}{}{}: {}", path_, field.empty() ? "" : "/", field, what));
  }
  std::string at(std::string_view field) const { return fmt::format("{}/{}", path_, field); }
  bool has(const char* field) const { return j_.contains(field); }

  Result<std::string> str(const char* field, std::optional<std::string> dflt = std::nullopt) const {
    auto it = j_.find(field);
    if (it == j_.end()) {
      if (dflt) return *dflt;
      return bad(field, "missing (a string is required)");
    }
    if (!it->is_string()) return bad(field, fmt::format("expected a string, got {}", it->type_name()));
    return it->get<std::string>();
  }
  Result<int> integer(const char* field, std::optional<int> dflt = std::nullopt) const {
    auto it = j_.find(field);
    if (it == j_.end()) {
      if (dflt) return *dflt;
      return bad(field, "missing (an integer is required)");
    }
    if (!it->is_number_integer()) return bad(field, fmt::format("expected an integer, got {}", it->type_name()));
    if (!fits_int(*it)) return bad(field, fmt::format("{} is out of range", it->dump()));
    return it->get<int>();
  }
  Result<double> number(const char* field, double dflt) const {
    auto it = j_.find(field);
    if (it == j_.end()) return dflt;
    if (!it->is_number()) return bad(field, fmt::format("expected a number, got {}", it->type_name()));
    double v = it->get<double>();
    if (!(v > 0) || !std::isfinite(v)) return bad(field, fmt::format("must be finite and > 0 (got {})", v));
    return v;
  }
  Result<const json*> array(const char* field, bool required) const {
    static const json kEmpty = json::array();
    auto it = j_.find(field);
    if (it == j_.end()) {
      if (!required) return &kEmpty;
      return bad(field, "missing (an array is required)");
    }
    if (!it->is_array()) return bad(field, fmt::format("expected an array, got {}", it->type_name()));
    return &*it;
  }
  Result<LinkState> state(const char* field) const {
    WEFT_ASSIGN_OR_RETURN(std::string s, str(field, std::string("up")));
    if (s == "up") return LinkState::kUp;
    if (s == "down") return LinkState::kDown;
    return bad(field, fmt::format("'{}' is not 'up' or 'down'", s));
  }

 private:
  const json& j_;
  std::string path_;
};

struct PendingNic {
  int nic;
  std::string sw;
  double gbps;
  LinkState state;
  std::string path;
  int rail = -1;   // as the file states it; must match the switch's
  int plane = -1;
  bool gbps_given = false;  // the access link, if listed, must agree
};

Result<Fabric> from_json(const json& root) {
  Reader r(root, "");
  if (!root.is_object()) return invalid_argument("/: the topology must be a JSON object");
  WEFT_RETURN_IF_ERROR(r.known_fields({"version", "name", "kind", "switches", "hosts", "links"}));
  WEFT_ASSIGN_OR_RETURN(int version, r.integer("version", 1));
  if (version != 1) return r.bad("version", fmt::format("unsupported version {} (this weft reads 1)", version));
  Fabric f;
  WEFT_ASSIGN_OR_RETURN(f.name, r.str("name", std::string("unnamed")));
  WEFT_ASSIGN_OR_RETURN(std::string kind, r.str("kind", std::string("custom")));
  auto parsed_kind = parse_fabric_kind(kind);
  if (!parsed_kind) return r.bad("kind", fmt::format("'{}' is not clos2, clos3, bigraph, rail or custom", kind));
  f.kind = *parsed_kind;

  WEFT_ASSIGN_OR_RETURN(const json* sws, r.array("switches", true));
  for (size_t i = 0; i < sws->size(); ++i) {
    Reader s((*sws)[i], fmt::format("/switches/{}", i));
    WEFT_RETURN_IF_ERROR(s.require_object());
    WEFT_RETURN_IF_ERROR(s.known_fields({"name", "tier", "part", "pod", "id", "rail", "plane"}));
    Switch sw;
    WEFT_ASSIGN_OR_RETURN(sw.name, s.str("name"));
    WEFT_ASSIGN_OR_RETURN(sw.tier, s.integer("tier", 0));
    if (sw.tier < 0 || sw.tier > 2) return s.bad("tier", fmt::format("{} is not 0, 1 or 2", sw.tier));
    WEFT_ASSIGN_OR_RETURN(std::string part, s.str("part", std::string("none")));
    auto p = parse_part(part);
    if (!p) return s.bad("part", fmt::format("'{}' is not upper, lower or none", part));
    sw.part = *p;
    WEFT_ASSIGN_OR_RETURN(sw.pod, s.integer("pod", -1));
    WEFT_ASSIGN_OR_RETURN(sw.id, s.integer("id", 0));
    if (sw.id < 0) return s.bad("id", "must be >= 0");
    WEFT_ASSIGN_OR_RETURN(sw.rail, s.integer("rail", -1));
    if (sw.rail < -1) return s.bad("rail", fmt::format("{} must be >= 0", sw.rail));
    WEFT_ASSIGN_OR_RETURN(sw.plane, s.integer("plane", -1));
    if (sw.plane < -1) return s.bad("plane", fmt::format("{} must be >= 0", sw.plane));
    f.switches.push_back(std::move(sw));
  }
  // Switch names are needed to resolve NICs; finalize() re-checks everything.
  std::unordered_map<std::string, int> sw_by_name;
  for (size_t i = 0; i < f.switches.size(); ++i) {
    if (!sw_by_name.emplace(f.switches[i].name, static_cast<int>(i)).second) {
      return invalid_argument(fmt::format("/switches/{}/name: duplicate switch '{}'", i, f.switches[i].name));
    }
  }

  std::vector<PendingNic> pending;
  WEFT_ASSIGN_OR_RETURN(const json* hosts, r.array("hosts", true));
  std::unordered_map<std::string, int> host_by_name;
  std::unordered_map<std::string, std::string> nic_by_address;  // address -> host:nic
  for (size_t i = 0; i < hosts->size(); ++i) {
    Reader h((*hosts)[i], fmt::format("/hosts/{}", i));
    WEFT_RETURN_IF_ERROR(h.require_object());
    WEFT_RETURN_IF_ERROR(h.known_fields({"name", "nics"}));
    Host host;
    WEFT_ASSIGN_OR_RETURN(host.name, h.str("name"));
    if (host.name.find(':') != std::string::npos) return h.bad("name", "must not contain ':'");
    if (const std::string why = host_name_fault(host.name); !why.empty()) {
      return h.bad("name", fmt::format("'{}': {}", host.name, why));
    }
    if (!host_by_name.emplace(host.name, static_cast<int>(i)).second) {
      return h.bad("name", fmt::format("duplicate host '{}'", host.name));
    }
    WEFT_ASSIGN_OR_RETURN(const json* nics, h.array("nics", true));
    if (nics->empty()) return h.bad("nics", "a host needs at least one NIC");
    for (size_t k = 0; k < nics->size(); ++k) {
      std::string npath = fmt::format("/hosts/{}/nics/{}", i, k);
      Reader n((*nics)[k], npath);
      WEFT_RETURN_IF_ERROR(n.require_object());
      WEFT_RETURN_IF_ERROR(n.known_fields({"name", "switch", "gbps", "state", "gpus", "address", "rail", "plane"}));
      Nic nic;
      nic.host = static_cast<int>(i);
      nic.index_on_host = static_cast<int>(k);
      WEFT_ASSIGN_OR_RETURN(nic.name, n.str("name", fmt::format("eth{}", k)));
      // Rank files and --hosts lines carry it after the host's name.
      if (nic.name.empty()) return n.bad("name", "a NIC's name must not be empty");
      if (const std::string why = host_name_fault(nic.name); !why.empty()) {
        return n.bad("name", fmt::format("'{}': {}", nic.name, why));
      }
      for (int other : host.nics) {
        if (f.nics[other].name == nic.name) return n.bad("name", fmt::format("duplicate NIC '{}'", nic.name));
      }
      WEFT_ASSIGN_OR_RETURN(nic.address, n.str("address", std::string()));
      if (!nic.address.empty()) {
        // Ranks, plans and the NCCL plugin find a NIC by its address
        // (routing/planner_output.cc), so two NICs with one are one NIC to
        // them; inet_pton(3) takes dotted quads only, as the rest of weft.
        in_addr parsed{};
        if (inet_pton(AF_INET, nic.address.c_str(), &parsed) != 1) {
          return n.bad("address", fmt::format("'{}' is not an IPv4 address (a dotted quad such as 10.0.1.1)",
                                              nic.address));
        }
        const auto [first, fresh] = nic_by_address.emplace(nic.address, fmt::format("{}:{}", host.name, nic.name));
        if (!fresh) {
          return n.bad("address", fmt::format("{} is also the address of {}: every NIC (every port of a "
                                              "multi-plane NIC) needs its own",
                                              nic.address, first->second));
        }
      }
      WEFT_ASSIGN_OR_RETURN(const json* gpus, n.array("gpus", false));
      for (size_t g = 0; g < gpus->size(); ++g) {
        if (!(*gpus)[g].is_number_integer() || !fits_int((*gpus)[g]) || (*gpus)[g].get<int>() < 0) {
          return invalid_argument(fmt::format("{}/gpus/{}: expected a GPU index >= 0", npath, g));
        }
        nic.gpus.push_back((*gpus)[g].get<int>());
      }
      PendingNic p{static_cast<int>(f.nics.size()), "", 0, LinkState::kUp, npath};
      WEFT_ASSIGN_OR_RETURN(p.sw, n.str("switch"));
      if (!sw_by_name.count(p.sw)) return n.bad("switch", fmt::format("unknown switch '{}'", p.sw));
      WEFT_ASSIGN_OR_RETURN(p.gbps, n.number("gbps", 100));
      WEFT_ASSIGN_OR_RETURN(p.state, n.state("state"));
      p.gbps_given = n.has("gbps");
      WEFT_ASSIGN_OR_RETURN(p.rail, n.integer("rail", -1));
      WEFT_ASSIGN_OR_RETURN(p.plane, n.integer("plane", -1));
      host.nics.push_back(p.nic);
      f.nics.push_back(std::move(nic));
      pending.push_back(std::move(p));
    }
    f.hosts.push_back(std::move(host));
  }
  for (const auto& p : pending) {
    f.links.push_back({f.nic_vertex(p.nic), f.switch_vertex(sw_by_name[p.sw]), p.gbps, p.state});
  }

  WEFT_ASSIGN_OR_RETURN(const json* links, r.array("links", false));
  for (size_t i = 0; i < links->size(); ++i) {
    Reader l((*links)[i], fmt::format("/links/{}", i));
    WEFT_RETURN_IF_ERROR(l.require_object());
    WEFT_RETURN_IF_ERROR(l.known_fields({"a", "b", "gbps", "state"}));
    WEFT_ASSIGN_OR_RETURN(std::string a, l.str("a"));
    WEFT_ASSIGN_OR_RETURN(std::string b, l.str("b"));
    // Access links may be listed too (the normalised form does); they must
    // agree with the NIC's "switch" and then set its rate and state.
    if (a.find(':') != std::string::npos || b.find(':') != std::string::npos) {
      const std::string& nic_name = a.find(':') != std::string::npos ? a : b;
      const std::string& sw_name = a.find(':') != std::string::npos ? b : a;
      auto colon = nic_name.find(':');
      auto h = host_by_name.find(nic_name.substr(0, colon));
      int nic = -1;
      if (h != host_by_name.end()) {
        for (int n : f.hosts[h->second].nics) {
          if (f.nics[n].name == nic_name.substr(colon + 1)) nic = n;
        }
      }
      if (nic < 0) return l.bad(a == nic_name ? "a" : "b", fmt::format("unknown NIC '{}'", nic_name));
      Link& acc = f.links[static_cast<size_t>(nic)];  // access links were added in NIC order
      auto sw = sw_by_name.find(sw_name);
      if (sw == sw_by_name.end() || f.switch_vertex(sw->second) != acc.b) {
        return l.bad(a == nic_name ? "b" : "a",
                     fmt::format("NIC '{}' attaches to '{}' (its \"switch\"), not '{}'", nic_name,
                                 f.switches[static_cast<size_t>(f.vertex_switch(acc.b))].name, sw_name));
      }
      // Both places may say it (`weft topo show --json` writes both): an
      // edit to one of them must not be undone by the other. Down in either
      // is down (a failure marked where the user looked); two rates must
      // agree.
      const PendingNic& p = pending[static_cast<size_t>(nic)];
      const double gbps = acc.gbps;
      WEFT_ASSIGN_OR_RETURN(acc.gbps, l.number("gbps", acc.gbps));
      if (p.gbps_given && acc.gbps != gbps) {
        return l.bad("gbps", fmt::format("{} but the NIC's own {}/gbps is {}: state the rate once, or the same in both",
                                         acc.gbps, p.path, gbps));
      }
      WEFT_ASSIGN_OR_RETURN(const LinkState state, l.state("state"));
      if (state == LinkState::kDown) acc.state = LinkState::kDown;
      continue;
    }
    auto sa = sw_by_name.find(a), sb = sw_by_name.find(b);
    if (sa == sw_by_name.end()) return l.bad("a", fmt::format("unknown switch '{}'", a));
    if (sb == sw_by_name.end()) return l.bad("b", fmt::format("unknown switch '{}'", b));
    Link lk{f.switch_vertex(sa->second), f.switch_vertex(sb->second), 100, LinkState::kUp};
    WEFT_ASSIGN_OR_RETURN(lk.gbps, l.number("gbps", 100));
    WEFT_ASSIGN_OR_RETURN(lk.state, l.state("state"));
    f.links.push_back(lk);
  }
  WEFT_RETURN_IF_ERROR(f.finalize());
  // A NIC's rail and plane are its switch's; a file that states others is wrong.
  for (const auto& p : pending) {
    const std::string& sw = f.switches[static_cast<size_t>(f.nic_switch(p.nic))].name;
    if (p.rail != -1 && p.rail != f.nic_rail(p.nic)) {
      return invalid_argument(fmt::format("{}/rail: {} but its switch '{}' is on rail {}", p.path, p.rail, sw, f.nic_rail(p.nic)));
    }
    if (p.plane != -1 && p.plane != f.nic_plane(p.nic)) {
      return invalid_argument(
          fmt::format("{}/plane: {} but its switch '{}' is on plane {}: planes share no switch", p.path, p.plane, sw, f.nic_plane(p.nic)));
    }
  }
  return f;
}

}  // namespace

Result<Fabric> parse_topology(const std::string& text) {
  WEFT_ASSIGN_OR_RETURN(json root, parse_json(text));
  return from_json(root);
}

Result<Fabric> load_topology(const std::string& path) {
  WEFT_ASSIGN_OR_RETURN(std::string text, read_file(path));
  auto f = parse_topology(text);
  if (!f) return f.status().with_context(path);
  return f;
}

std::string topology_to_json(const Fabric& f, int indent) {
  json root = json::object();
  root["version"] = 1;
  root["name"] = f.name;
  root["kind"] = std::string(fabric_kind_name(f.kind));
  json sws = json::array();
  for (const auto& s : f.switches) {
    json js = {{"name", s.name}, {"tier", s.tier}};
    if (s.part != Part::kNone) js["part"] = std::string(part_name(s.part));
    if (s.pod >= 0) js["pod"] = s.pod;
    if (s.id > 0) js["id"] = s.id;
    if (s.rail >= 0) js["rail"] = s.rail;
    if (s.plane >= 0) js["plane"] = s.plane;
    sws.push_back(std::move(js));
  }
  root["switches"] = std::move(sws);
  json hosts = json::array();
  for (const auto& h : f.hosts) {
    json nics = json::array();
    for (int n : h.nics) {
      const Nic& nic = f.nics[n];
      const Link& acc = f.links[f.nic_link(n)];
      json jn = {{"name", nic.name},
                 {"switch", f.switches[f.nic_switch(n)].name},
                 {"gbps", acc.gbps},
                 {"state", acc.state == LinkState::kUp ? "up" : "down"},
                 {"gpus", nic.gpus}};
      if (!nic.address.empty()) jn["address"] = nic.address;
      // Derived from the switch (fabric.h); written so scripts need not look it up.
      if (f.nic_rail(n) >= 0) jn["rail"] = f.nic_rail(n);
      if (f.nic_plane(n) >= 0) jn["plane"] = f.nic_plane(n);
      nics.push_back(std::move(jn));
    }
    hosts.push_back({{"name", h.name}, {"nics", std::move(nics)}});
  }
  root["hosts"] = std::move(hosts);
  json links = json::array();
  // Every link, access links included, so scripts see one uniform list.
  for (const auto& l : f.links) {
    links.push_back({{"a", f.vertex_name(l.a)},
                     {"b", f.vertex_name(l.b)},
                     {"gbps", l.gbps},
                     {"state", l.state == LinkState::kUp ? "up" : "down"}});
  }
  root["links"] = std::move(links);
  return root.dump(indent) + "\n";
}

Status save_topology(const Fabric& f, const std::string& path) {
  return write_file_atomic(path, topology_to_json(f));
}

}  // namespace weft::topo
