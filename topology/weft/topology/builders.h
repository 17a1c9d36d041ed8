// Builders for the fabrics weft knows by shape.
//
// Names follow the project's test fabric (scripts/fabric.sh) so that a
// generated topology and an emulated one line up: spines s1..sS, leaves
// l1..lL, hosts h<leaf>-<k>, NICs eth0..eth<G-1>; 3-tier adds pods
// (p<P>-l<L>, p<P>-a<A>, cores c<C>, hosts h<P>-<L>-<K>); BiGraph switches are
// u1..u<N/2> (upper) and w1..w<N/2> (lower) with subnodes n<switch>-<k>.
#pragma once

#include "weft/topology/fabric.h"

namespace weft::topo {

struct Clos2Spec {
  int spines = 4;
  int leaves = 4;
  int hosts_per_leaf = 4;
  int nics_per_host = 1;      // every NIC of a host attaches to the host's leaf
  double fabric_gbps = 100;   // spine–leaf links
  double access_gbps = 100;   // NIC–leaf links
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

}  // namespace weft::topo
