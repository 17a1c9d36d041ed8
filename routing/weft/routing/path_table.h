// Path tables: which way a flow's 5-tuple goes through the fabric.
//
// A path table answers two questions about flows between NICs (subnodes):
//   route(key)          the switches one 5-tuple (src NIC, dst NIC, protocol,
//                       sport, dport) crosses, source leaf first;
//   ports(pair, range)  the planner's question: which source ports of this
//                       pair land on which route.
// Two sources fill it, behind this one interface:
//   a model     make_model_path_table(): an ECMP hash model (ecmp.h) walked
//               over the topology; it knows every port.
//   a campaign  the probe stage's table over fabric.db observations
//               (src, dst, protocol, sport, dport, spine or hop address,
//               campaign); it knows the probed ports only. It lives in probe/
//               (routing/ never depends on probe/ or db/) and reaches
//               `weft route --paths fabric.db` through the factory hook in
//               tools/path_source.h.
//
// Contract for every implementation:
//   - a Route is switch indices of the table's Fabric, source leaf first,
//     destination leaf last; two NICs on one leaf give a one-switch route;
//   - ports() returns at most max_ports entries, each sport at most once and
//     inside the range, in the table's order of preference (the planner takes
//     the first free port on the route it chose); every entry's `route` indexes the
//     pair's routes (PairRoutes::add_route / route(i)), which hold no
//     duplicates;
//   - knowing nothing about a pair or tuple is not an error: ports() returns
//     no entries, route() returns NotFound; errors are for bad arguments
//     (unknown NICs) and for failing sources (a database that cannot be read);
//   - a table does not check links against the topology's link states: a
//     measured route may have gone through a link that failed since. Callers
//     (the planner) drop routes over links that are down;
//   - an answer depends on the query alone, never on the calls before it
//     (the planner may ask for one class's pairs before another's, or again
//     with more ports);
//   - not thread-safe: tables may cache. The planner asks a table from one
//     thread at a time, but not always the same one (PlannerOptions::
//     second_thread), so a table must not rely on thread-local state.
//
// E-ECMP (a model whose hash reads the RoCEv2 destination QP, ecmp.h
// crc32-qp): a port choice is a (sport, dqpn) pair. A PairQuery lists the
// destination's QPNs it may use; ports() pairs its i-th drawn sport with
// dqpns[(i + o) % size], o keyed by the pair (the sports are a random draw,
// so every QPN meets a random sample of ports), and PortRoute::qpn says which; route() reads
// FlowKey::dqpn. Tables whose fabric does not hash QPNs (hashes_qpn() false)
// leave qpn 0 and ignore the query's dqpns. A probe database does not know QPNs at all: its probes are
// UDP packets without a BTH, so it can only serve fabrics that do not hash
// them.
//
// A model:
//   auto table = make_model_path_table(fabric, make_hash("crc32", 7).value());
//   PairQuery q{.src_nic = 0, .dst_nic = 9, .proto = kProtoUdp, .dport = kRoceV2Port};
//   PairRoutes pr;
//   Status st = table->ports(q, PortRange{}, 64, pr);
//   for (const PortRoute& p : pr.ports) use(p.sport, pr.route(p.route));
//
// Observations (the shape of the probe stage's table):
//   class DbPathTable final : public routing::PathTable {
//     Result<Route> route(const FlowKey& k) override;
//       // the newest campaign's row for exactly this 5-tuple ->
//       // {leaf of src, spine, leaf of dst}; NotFound if it was never probed
//     Status ports(const PairQuery& q, PortRange r, int max_ports, PairRoutes& out) override;
//       // every probed sport of (src, dst, protocol, dport) inside r:
//       //   int i = out.add_route({leaf_s, spine, leaf_d});  // once per spine
//       //   out.ports.push_back({.sport = sport, .route = i});
//   };
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "weft/common/status.h"
#include "weft/routing/ecmp.h"
#include "weft/routing/paths.h"
#include "weft/topology/fabric.h"

namespace weft::routing {

// Switch indices, source leaf first.
using Route = std::vector<int>;

struct FlowKey {
  int src_nic = -1;
  int dst_nic = -1;
  uint8_t proto = kProtoUdp;
  uint16_t sport = 0;
  uint16_t dport = kRoceV2Port;
  uint32_t dqpn = 0;  // RoCEv2 destination QP; read by tables that hash it
};

struct PairQuery {
  int src_nic = -1;
  int dst_nic = -1;
  uint8_t proto = kProtoUdp;
  uint16_t dport = kRoceV2Port;
  std::span<const uint32_t> dqpns{};  // the destination's QPNs (E-ECMP tables; see above)
};

// An inclusive range of source ports. The default is the dynamic range
// 49152-65535 (RFC 6335), which is also every port a RoCEv2 QP can have:
// the kernel derives it from the flow label, sport = 0xC000 | ((fl & 0x3FFF)
// ^ (fl >> 14 & 0x3F)) (rdma_flow_label_to_udp_sport, include/rdma/ib_verbs.h),
// so flow label port - 0xC000 gives 49153..65535 and 0x4001 gives 49152.
inline constexpr uint16_t kRoceSportMin = 0xC000;
struct PortRange {
  uint16_t lo = 49152;
  uint16_t hi = 65535;
  uint32_t size() const { return hi >= lo ? static_cast<uint32_t>(hi - lo) + 1 : 0; }
  bool contains(uint16_t p) const { return p >= lo && p <= hi; }
};

// Rejects an empty range (lo > hi) and port 0, naming the range.
Result<PortRange> make_port_range(int lo, int hi);

struct PortRoute {
  uint16_t sport = 0;
  // E-ECMP: the choice's QPN, as an index into the query's dqpns (0 where the
  // table does not hash QPNs). An index keeps a PortRoute at 8 bytes: a
  // planner holds 64 per flow of a class (~4 M at 65,536 endpoints).
  uint16_t qpn = 0;
  int route = 0;  // index into PairRoutes::routes
};

// Routes are stored flat (one allocation per pair, not per route: a planner
// asks for 64 ports of each of ~10^5 pairs).
struct PairRoutes {
  std::vector<int> hops;         // the switches of every route, concatenated
  std::vector<uint32_t> ends;    // route i is hops[ends[i-1] (0 for i = 0) .. ends[i])
  std::vector<PortRoute> ports;  // distinct sports, in order of preference

  size_t num_routes() const { return ends.size(); }
  std::span<const int> route(size_t i) const {
    const uint32_t b = i == 0 ? 0 : ends[i - 1];
    return {hops.data() + b, ends[i] - b};
  }
  void clear() {
    hops.clear();
    ends.clear();
    ports.clear();
  }
  // Appends a route and returns its index; callers keep routes distinct.
  int add_route(std::span<const int> switches) {
    hops.insert(hops.end(), switches.begin(), switches.end());
    ends.push_back(static_cast<uint32_t>(hops.size()));
    return static_cast<int>(ends.size()) - 1;
  }
};

class PathTable {
 public:
  virtual ~PathTable() = default;
  // "model crc32 seed 7", "fabric.db campaign 3": said in plans and reports.
  virtual std::string describe() const = 0;
  virtual const topo::Fabric& fabric() const = 0;
  virtual Result<Route> route(const FlowKey& key) = 0;
  // True when routes depend on the destination QP (E-ECMP, ecmp.h).
  virtual bool hashes_qpn() const { return false; }
  // Fills `out` (cleared first; its capacity is reused, so a caller asking
  // about 10^5 pairs passes one buffer per pair in flight, not a fresh one).
  virtual Status ports(const PairQuery& pair, PortRange range, int max_ports, PairRoutes& out) = 0;
};

// A model table: every switch on the way picks among its shortest-path next
// hops (links that are up) by `hash`. ports() draws max_ports distinct ports
// of the range per pair (a pseudo-random permutation keyed by the pair and
// `draw_seed`, as a probe campaign sampling ports would); it returns the
// whole range in order when max_ports covers it.
std::unique_ptr<PathTable> make_model_path_table(const topo::Fabric& f, std::unique_ptr<EcmpHash> hash,
                                                 uint32_t draw_seed = 1);

// The directed links of a route between two NICs; fails naming the first
// missing or down link (route_via).
Result<Path> route_path(const PathFinder& pf, int src_nic, int dst_nic, std::span<const int> route);

}  // namespace weft::routing
