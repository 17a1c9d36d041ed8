// Builders for the fabrics weft knows by shape.
//
// Names follow the project's test fabric (scripts/fabric.sh) so that a
// generated topology and an emulated one line up: spines s1..sS, leaves
// l1..lL, hosts h<leaf>-<k>, NICs eth0..eth<G-1>; 3-tier adds pods
// (p<P>-l<L>, p<P>-a<A>, cores c<C>, hosts h<P>-<L>-<K>); BiGraph switches are
// u1..u<N/2> (upper) and w1..w<N/2> (lower) with subnodes n<switch>-<k>.
// Rail fabrics name leaves r<rail>-l<k> and hosts h<k> (1-based). With P > 1
// planes every switch name starts with pl<plane>- (1-based) and NIC g's port
// k is eth<g>p<k> (0-based, as Linux numbers ports); hosts order their NICs
// plane by plane (index on host = k * G + g), so a host's k-th NIC is the
// k-th local rank of the rail ranking (docs/ranking.md).
#pragma once

#include "weft/topology/fabric.h"

namespace weft::topo {

struct Clos2Spec {
  int spines = 4;
  int leaves = 4;
  int hosts_per_leaf = 4;
  int nics_per_host = 1;      // every NIC of a host attaches to the host's leaf
  int planes = 1;             // P disjoint copies of the spines and leaves; NIC port k on plane k
  double fabric_gbps = 100;   // spine–leaf links
  double access_gbps = 100;   // NIC–leaf links
};

// Rail-optimised 2-tier fabric: G rails, each of leaves_per_rail leaves; NIC
// g of every host attaches to a leaf of rail g (hosts split over a rail's
// leaves in contiguous blocks, the first hosts % leaves_per_rail leaves one
// host more, the same block on every rail); every leaf links to every spine
// of its plane. With P planes each plane is such a fabric of its own and NIC
// g's port k sits on rail g of plane k.
struct RailSpec {
  int hosts = 4;
  int nics_per_host = 2;      // G = rails
  int leaves_per_rail = 1;
  int spines = 2;             // per plane
  int planes = 1;
  double fabric_gbps = 100;
  double access_gbps = 100;
};

// 3-tier: each pod has leaves_per_pod leaves, each connected to all of the
// pod's aggs_per_pod aggregation switches; the cores form aggs_per_pod planes
// of cores/aggs_per_pod switches, and aggregation switch k of every pod
// connects to every core of plane k (the classic fat-tree wiring).
struct Clos3Spec {
  int pods = 2;
  int leaves_per_pod = 2;
  int aggs_per_pod = 2;
  int cores = 2;
  int hosts_per_leaf = 2;
  int nics_per_host = 1;
  double fabric_gbps = 100;
  double access_gbps = 100;
};

// EFLOPS BiGraph M x N: N switches split into N/2 upper and N/2 lower, every
// upper switch linked to every lower one, M subnodes (one NIC each) per switch.
struct BiGraphSpec {
  int switches = 8;   // N, even
  int subnodes = 4;   // M
  double fabric_gbps = 100;
  double access_gbps = 100;
};

Result<Fabric> build_clos2(const Clos2Spec& spec);
Result<Fabric> build_clos3(const Clos3Spec& spec);
Result<Fabric> build_bigraph(const BiGraphSpec& spec);
Result<Fabric> build_rail(const RailSpec& spec);

}  // namespace weft::topo
