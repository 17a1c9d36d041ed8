#include "weft/topology/builders.h"

#include <cmath>

#include <fmt/format.h>

namespace weft::topo {
namespace {

Status check_positive(std::string_view what, int v) {
  if (v < 1) return invalid_argument(fmt::format("{} must be >= 1 (got {})", what, v));
  return ok_status();
}

Status check_rate(std::string_view what, double v) {
  // inf would be written as JSON null, a file no weft reads back.
  if (!(v > 0) || !std::isfinite(v)) return invalid_argument(fmt::format("{} must be finite and > 0 Gbit/s (got {})", what, v));
  return ok_status();
}

int add_switch(Fabric& f, std::string name, int tier, Part part, int pod, int id, int rail = -1, int plane = -1) {
  f.switches.push_back({std::move(name), tier, part, pod, id, rail, plane});
  return static_cast<int>(f.switches.size()) - 1;
}

// Adds a host with `nics` NICs of `ports` ports each; port k of NIC g links to
// switch switch_of(g, k). Entries go port by port (index k * nics + g) so
// that a host's NICs of one plane are neighbours (builders.h).
template <class SwitchOf>
void add_host_ports(Fabric& f, std::string name, int nics, int ports, SwitchOf switch_of, double gbps) {
  const int h = static_cast<int>(f.hosts.size());
  f.hosts.push_back({std::move(name), {}});
  for (int k = 0; k < ports; ++k) {
    for (int g = 0; g < nics; ++g) {
      const int n = static_cast<int>(f.nics.size());
      const int index = k * nics + g;
      f.nics.push_back({ports == 1 ? fmt::format("eth{}", g) : fmt::format("eth{}p{}", g, k), h, index, {g}, ""});
      f.hosts[h].nics.push_back(n);
      // Links need vertex ids, which depend on the final NIC count: record
      // the switch in Link::b as -1 - index and fix up in finish().
      f.links.push_back({n, -1 - switch_of(g, k), gbps, LinkState::kUp});
    }
  }
}

// Adds a host with `nics` NICs, each linked to switch `sw`.
void add_host(Fabric& f, std::string name, int nics, int sw, double gbps) {
  add_host_ports(f, std::move(name), nics, 1, [sw](int, int) { return sw; }, gbps);
}

void add_switch_link(Fabric& f, int sa, int sb, double gbps) {
  f.links.push_back({-1 - sa, -1 - sb, gbps, LinkState::kUp});
}

// "pl<k+1>-" in front of every switch name of plane k when there are planes.
std::string plane_prefix(int planes, int k) { return planes == 1 ? "" : fmt::format("pl{}-", k + 1); }

// Plane k's spines s1..sS (ids k * S + i, unique over the planes).
void add_plane_spines(Fabric& f, int planes, int k, int spines) {
  for (int i = 1; i <= spines; ++i) {
    add_switch(f, fmt::format("{}s{}", plane_prefix(planes, k), i), kTierSpine, Part::kNone, -1, k * spines + i, -1,
               planes > 1 ? k : -1);
  }
}

// Every plane's switches are `spines` spines then `leaves` leaves, plane
// after plane; links every spine to every leaf of its own plane.
void link_plane_spines(Fabric& f, int planes, int spines, int leaves, double gbps) {
  const int per_plane = spines + leaves;
  for (int k = 0; k < planes; ++k) {
    for (int sp = 0; sp < spines; ++sp) {
      for (int l = 0; l < leaves; ++l) add_switch_link(f, k * per_plane + sp, k * per_plane + spines + l, gbps);
    }
  }
}

// Resolves the switch placeholders (-1 - index) to vertex ids.
Result<Fabric> finish(Fabric f) {
  for (auto& l : f.links) {
    if (l.a < 0) l.a = f.switch_vertex(-1 - l.a);
    if (l.b < 0) l.b = f.switch_vertex(-1 - l.b);
  }
  WEFT_RETURN_IF_ERROR(f.finalize());
  return f;
}

}  // namespace

Result<Fabric> build_clos2(const Clos2Spec& s) {
  WEFT_RETURN_IF_ERROR(check_positive("--spines", s.spines));
  WEFT_RETURN_IF_ERROR(check_positive("--leaves", s.leaves));
  WEFT_RETURN_IF_ERROR(check_positive("--hosts", s.hosts_per_leaf));
  WEFT_RETURN_IF_ERROR(check_positive("--nics", s.nics_per_host));
  WEFT_RETURN_IF_ERROR(check_positive("--planes", s.planes));
  WEFT_RETURN_IF_ERROR(check_rate("fabric link rate", s.fabric_gbps));
  WEFT_RETURN_IF_ERROR(check_rate("access link rate", s.access_gbps));
  Fabric f;
  f.kind = FabricKind::kClos2;
  f.name = fmt::format("clos2-{}x{}x{}x{}", s.spines, s.leaves, s.hosts_per_leaf, s.nics_per_host);
  if (s.planes > 1) f.name += fmt::format("x{}p", s.planes);
  const int per_plane = s.spines + s.leaves;
  for (int k = 0; k < s.planes; ++k) {
    add_plane_spines(f, s.planes, k, s.spines);
    for (int l = 1; l <= s.leaves; ++l) {
      add_switch(f, fmt::format("{}l{}", plane_prefix(s.planes, k), l), kTierLeaf, Part::kNone, -1, 0, -1,
                 s.planes > 1 ? k : -1);
    }
  }
  for (int l = 0; l < s.leaves; ++l) {
    for (int h = 1; h <= s.hosts_per_leaf; ++h) {
      add_host_ports(
          f, fmt::format("h{}-{}", l + 1, h), s.nics_per_host, s.planes,
          [&](int, int k) { return k * per_plane + s.spines + l; }, s.access_gbps);
    }
  }
  link_plane_spines(f, s.planes, s.spines, s.leaves, s.fabric_gbps);
  return finish(std::move(f));
}

Result<Fabric> build_rail(const RailSpec& s) {
  WEFT_RETURN_IF_ERROR(check_positive("--hosts", s.hosts));
  WEFT_RETURN_IF_ERROR(check_positive("--nics", s.nics_per_host));
  WEFT_RETURN_IF_ERROR(check_positive("--rail-leaves", s.leaves_per_rail));
  WEFT_RETURN_IF_ERROR(check_positive("--spines", s.spines));
  WEFT_RETURN_IF_ERROR(check_positive("--planes", s.planes));
  WEFT_RETURN_IF_ERROR(check_rate("fabric link rate", s.fabric_gbps));
  WEFT_RETURN_IF_ERROR(check_rate("access link rate", s.access_gbps));
  if (s.leaves_per_rail > s.hosts) {
    return invalid_argument(fmt::format("--rail-leaves ({}) must be <= --hosts ({}): every rail leaf needs a host",
                                        s.leaves_per_rail, s.hosts));
  }
  Fabric f;
  f.kind = FabricKind::kRail;
  f.name = fmt::format("rail-{}h-{}r-{}l-{}s", s.hosts, s.nics_per_host, s.leaves_per_rail, s.spines);
  if (s.planes > 1) f.name += fmt::format("-{}p", s.planes);
  const int rails = s.nics_per_host, per_plane = s.spines + rails * s.leaves_per_rail;
  for (int k = 0; k < s.planes; ++k) {
    add_plane_spines(f, s.planes, k, s.spines);
    for (int g = 0; g < rails; ++g) {
      for (int j = 1; j <= s.leaves_per_rail; ++j) {
        add_switch(f, fmt::format("{}r{}-l{}", plane_prefix(s.planes, k), g + 1, j), kTierLeaf, Part::kNone, -1, 0, g,
                   s.planes > 1 ? k : -1);
      }
    }
  }
  // Hosts in contiguous blocks per rail leaf, the first (hosts % leaves) one larger.
  const int base = s.hosts / s.leaves_per_rail, extra = s.hosts % s.leaves_per_rail;
  int leaf = 0, left = base + (extra > 0);
  for (int h = 0; h < s.hosts; ++h) {
    if (left == 0) {
      ++leaf;
      left = base + (leaf < extra);
    }
    --left;
    add_host_ports(
        f, fmt::format("h{}", h + 1), rails, s.planes,
        [&](int g, int k) { return k * per_plane + s.spines + g * s.leaves_per_rail + leaf; }, s.access_gbps);
  }
  link_plane_spines(f, s.planes, s.spines, rails * s.leaves_per_rail, s.fabric_gbps);
  return finish(std::move(f));
}

Result<Fabric> build_clos3(const Clos3Spec& s) {
  WEFT_RETURN_IF_ERROR(check_positive("--pods", s.pods));
  WEFT_RETURN_IF_ERROR(check_positive("--leaves", s.leaves_per_pod));
  WEFT_RETURN_IF_ERROR(check_positive("--aggs", s.aggs_per_pod));
  WEFT_RETURN_IF_ERROR(check_positive("--cores", s.cores));
  WEFT_RETURN_IF_ERROR(check_positive("--hosts", s.hosts_per_leaf));
  WEFT_RETURN_IF_ERROR(check_positive("--nics", s.nics_per_host));
  WEFT_RETURN_IF_ERROR(check_rate("fabric link rate", s.fabric_gbps));
  WEFT_RETURN_IF_ERROR(check_rate("access link rate", s.access_gbps));
  if (s.cores % s.aggs_per_pod != 0) {
    return invalid_argument(fmt::format(
        "--cores ({}) must be a multiple of --aggs ({}): aggregation switch k of every pod "
        "connects to core plane k",
        s.cores, s.aggs_per_pod));
  }
  Fabric f;
  f.kind = FabricKind::kClos3;
  f.name = fmt::format("clos3-{}p-{}l-{}a-{}c-{}h", s.pods, s.leaves_per_pod, s.aggs_per_pod, s.cores,
                       s.hosts_per_leaf);
  const int plane = s.cores / s.aggs_per_pod;
  for (int c = 1; c <= s.cores; ++c) add_switch(f, fmt::format("c{}", c), kTierCore, Part::kNone, -1, c);
  std::vector<int> agg_of(static_cast<size_t>(s.pods * s.aggs_per_pod));
  std::vector<int> leaf_of(static_cast<size_t>(s.pods * s.leaves_per_pod));
  for (int p = 0; p < s.pods; ++p) {
    for (int a = 0; a < s.aggs_per_pod; ++a) {
      agg_of[p * s.aggs_per_pod + a] =
          add_switch(f, fmt::format("p{}-a{}", p + 1, a + 1), kTierSpine, Part::kNone, p, a + 1);
    }
    for (int l = 0; l < s.leaves_per_pod; ++l) {
      leaf_of[p * s.leaves_per_pod + l] =
          add_switch(f, fmt::format("p{}-l{}", p + 1, l + 1), kTierLeaf, Part::kNone, p, 0);
    }
  }
  for (int p = 0; p < s.pods; ++p) {
    for (int l = 0; l < s.leaves_per_pod; ++l) {
      for (int h = 1; h <= s.hosts_per_leaf; ++h) {
        add_host(f, fmt::format("h{}-{}-{}", p + 1, l + 1, h), s.nics_per_host,
                 leaf_of[p * s.leaves_per_pod + l], s.access_gbps);
      }
    }
  }
  for (int p = 0; p < s.pods; ++p) {
    for (int a = 0; a < s.aggs_per_pod; ++a) {
      const int agg = agg_of[p * s.aggs_per_pod + a];
      for (int l = 0; l < s.leaves_per_pod; ++l) add_switch_link(f, leaf_of[p * s.leaves_per_pod + l], agg, s.fabric_gbps);
      for (int c = a * plane; c < (a + 1) * plane; ++c) add_switch_link(f, agg, c, s.fabric_gbps);
    }
  }
  return finish(std::move(f));
}

Result<Fabric> build_bigraph(const BiGraphSpec& s) {
  // One rule for every count that is not a positive even one (0 too).
  if (s.switches < 2 || s.switches % 2 != 0) {
    return invalid_argument(
        fmt::format("--switches must be even and >= 2: BiGraph splits them into two parts (got {})", s.switches));
  }
  WEFT_RETURN_IF_ERROR(check_positive("--subnodes", s.subnodes));
  WEFT_RETURN_IF_ERROR(check_rate("fabric link rate", s.fabric_gbps));
  WEFT_RETURN_IF_ERROR(check_rate("access link rate", s.access_gbps));
  Fabric f;
  f.kind = FabricKind::kBiGraph;
  f.name = fmt::format("bigraph-{}x{}", s.subnodes, s.switches);
  const int half = s.switches / 2;
  for (int i = 1; i <= half; ++i) add_switch(f, fmt::format("u{}", i), kTierLeaf, Part::kUpper, -1, 0);
  for (int i = 1; i <= half; ++i) add_switch(f, fmt::format("w{}", i), kTierLeaf, Part::kLower, -1, 0);
  for (int sw = 0; sw < s.switches; ++sw) {
    for (int k = 1; k <= s.subnodes; ++k) {
      add_host(f, fmt::format("n{}-{}", f.switches[sw].name, k), 1, sw, s.access_gbps);
    }
  }
  for (int u = 0; u < half; ++u) {
    for (int w = 0; w < half; ++w) add_switch_link(f, u, half + w, s.fabric_gbps);
  }
  return finish(std::move(f));
}

}  // namespace weft::topo
