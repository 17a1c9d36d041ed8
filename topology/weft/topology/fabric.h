// The fabric model: hosts, NICs (subnodes), switches in tiers, and links.
//
// A NIC is the unit a collective ranks: ACCL and EFLOPS call a GPU–NIC pair a
// "subnode" (ACCL's term), and a host may carry several. Every NIC attaches to
// exactly one switch (its leaf, or its BiGraph switch). Switches sit in tiers:
// 0 = leaf/ToR (and both BiGraph parts), 1 = spine or aggregation, 2 = core.
//
// Rails and planes (docs/topology-format.md "Rails and planes"): in a
// rail-optimised fabric (kind rail; NVIDIA's DGX SuperPOD reference design)
// leaf switches belong to a rail and NIC g of every host sits on a leaf of
// rail g. A multi-plane fabric (Alibaba HPN dual-plane; DeepSeek's
// multi-plane fat tree) is several disjoint networks: every switch belongs to
// one plane, no link joins two planes, and port k of a NIC sits on plane k.
// Rails and planes are attributes of switches; a NIC has the rail and plane of
// the switch it attaches to.
//
// Vertices: routing works on one vertex space, NICs first and switches after:
//   vertex(nic i) = i, vertex(switch j) = nics.size() + j.
// Directed links: link l has directions 2l (a -> b) and 2l+1 (b -> a).
//
//   Fabric f = build_clos2({.spines = 4, .leaves = 4, .hosts_per_leaf = 4}).value();
//   int leaf = f.nic_switch(f.find_nic("h1-1:eth0").value());
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "weft/common/status.h"

namespace weft::topo {

enum class FabricKind { kClos2, kClos3, kBiGraph, kRail, kCustom };
enum class Part { kNone, kUpper, kLower };  // BiGraph halves (EFLOPS §BiGraph)
enum class LinkState { kUp, kDown };

std::string_view fabric_kind_name(FabricKind k);
std::optional<FabricKind> parse_fabric_kind(std::string_view s);
std::string_view part_name(Part p);
std::optional<Part> parse_part(std::string_view s);

inline constexpr int kTierLeaf = 0;
inline constexpr int kTierSpine = 1;  // spine of a 2-tier Clos, aggregation of a 3-tier
inline constexpr int kTierCore = 2;

struct Nic {
  std::string name;           // local name on the host, e.g. "eth0"
  int host = -1;              // index into Fabric::hosts
  int index_on_host = 0;      // 0-based position among the host's NICs
  std::vector<int> gpus;      // GPUs bound to this NIC (may be empty)
  std::string address;        // IPv4 address, if known ("" otherwise)
};

struct Host {
  std::string name;
  std::vector<int> nics;      // indices into Fabric::nics, in index_on_host order
};

struct Switch {
  std::string name;
  int tier = kTierLeaf;
  Part part = Part::kNone;
  int pod = -1;               // 3-tier Clos: the pod of a leaf or aggregation switch
  int id = 0;                 // spine id used by the DSCP probe rewrite (X -> X+id), 0 = none
  int rail = -1;              // rail of a leaf in a rail fabric, -1 = none
  int plane = -1;             // plane of a multi-plane fabric, -1 = none (single plane)
};

// A link endpoint is a vertex (see above).
struct Link {
  int a = -1;
  int b = -1;
  double gbps = 100.0;
  LinkState state = LinkState::kUp;
};

class Fabric {
 public:
  std::string name;
  FabricKind kind = FabricKind::kCustom;
  std::vector<Host> hosts;
  std::vector<Nic> nics;
  std::vector<Switch> switches;
  std::vector<Link> links;

  // Builds the lookup indices and checks structural invariants (every NIC on
  // one switch, names unique, links between existing vertices, no self-loops,
  // no parallel links). Builders and loaders call it; call it again after
  // editing the vectors.
  Status finalize();

  int num_vertices() const { return static_cast<int>(nics.size() + switches.size()); }
  int nic_vertex(int nic) const { return nic; }
  int switch_vertex(int sw) const { return static_cast<int>(nics.size()) + sw; }
  bool is_switch_vertex(int v) const { return v >= static_cast<int>(nics.size()); }
  int vertex_switch(int v) const { return v - static_cast<int>(nics.size()); }
  std::string vertex_name(int v) const;

  // "host:nic" — how a NIC is named in files and messages.
  std::string nic_qualified_name(int nic) const;

  std::optional<int> find_host(std::string_view name) const;
  std::optional<int> find_switch(std::string_view name) const;
  // Accepts "host:nic"; a bare host name resolves to the host's only NIC.
  std::optional<int> find_nic(std::string_view qualified) const;

  // The switch a NIC attaches to, and that access link.
  int nic_switch(int nic) const { return nic_switch_[nic]; }
  int nic_link(int nic) const { return nic_link_[nic]; }

  // Link between two vertices, if any.
  std::optional<int> link_between(int va, int vb) const;

  // Directed link leaving vertex `from` on link l.
  static int directed(int link, bool a_to_b) { return 2 * link + (a_to_b ? 0 : 1); }
  int directed_from(int link, int from_vertex) const {
    return directed(link, links[link].a == from_vertex);
  }
  int directed_src(int dlink) const {
    const Link& l = links[dlink / 2];
    return dlink % 2 == 0 ? l.a : l.b;
  }
  int directed_dst(int dlink) const {
    const Link& l = links[dlink / 2];
    return dlink % 2 == 0 ? l.b : l.a;
  }
  std::string directed_name(int dlink) const;

  // Switch-to-switch adjacency: (neighbour switch, link) for every link of sw,
  // including links that are down (check Link::state).
  struct Adj {
    int sw;
    int link;
  };
  const std::vector<Adj>& switch_neighbours(int sw) const { return sw_adj_[sw]; }
  // NICs attached to a switch, in NIC index order.
  const std::vector<int>& switch_nics(int sw) const { return sw_nics_[sw]; }

  int num_tiers() const;

  // Rails and planes: -1 where the fabric has none. A link's rail is the rail
  // of its leaf end (access links and leaf uplinks of a rail's leaves); its
  // plane is the plane of its switches.
  int nic_rail(int nic) const { return switches[nic_switch_[nic]].rail; }
  int nic_plane(int nic) const { return switches[nic_switch_[nic]].plane; }
  int link_rail(int link) const { return link_rail_[link]; }
  int link_plane(int link) const { return link_plane_[link]; }
  int num_rails() const { return num_rails_; }    // max rail + 1 (0 without rails)
  int num_planes() const { return num_planes_; }  // max plane + 1 (0 without planes)

 private:
  // Rail and plane rules (rails_planes.cc), called by finalize().
  Status check_rails_planes();

  std::vector<int> nic_switch_;
  std::vector<int> nic_link_;
  std::vector<std::vector<Adj>> sw_adj_;
  std::vector<std::vector<int>> sw_nics_;
  std::vector<int> link_rail_;
  std::vector<int> link_plane_;
  int num_rails_ = 0;
  int num_planes_ = 0;
  std::unordered_map<std::string, int> host_by_name_;
  std::unordered_map<std::string, int> switch_by_name_;
  std::unordered_map<uint64_t, int> link_by_pair_;
};

// Why `name` cannot be a host's or a NIC's ("" when it can): letters,
// digits, '-', '.' and '_' only (rank files carry it to launchers).
std::string host_name_fault(std::string_view name);

}  // namespace weft::topo
