#include "weft/collectives/communicator.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstdint>
#include <cstring>
#include <map>
#include <new>
#include <set>
#include <sstream>
#include <tuple>

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <fmt/ranges.h>

#include "bootstrap/config_env.h"
#include "bootstrap/listen_address.h"
#include "bootstrap/store_allgather.h"
#include "communicator_impl.h"
#include "cpu_placement.h"
#include "idle_wait.h"
#include "remap.h"
#include "stall.h"
#include "weft/routing/schedule.h"

namespace weft::coll {

Status CommConfig::validate() const {
  if (size < 1) return invalid_argument(fmt::format("communicator: size must be >= 1 (got {})", size));
  if (rank < 0 || rank >= size) {
    return invalid_argument(fmt::format("communicator: rank {} is outside [0, {})", rank, size));
  }
  if (timeout.count() <= 0) {
    return invalid_argument(fmt::format("communicator: timeout must be > 0 ms (got {})", timeout.count()));
  }
  if (transport != "auto") {
    const auto known = transport_names();
    if (std::find(known.begin(), known.end(), transport) == known.end()) {
      return invalid_argument(
          fmt::format("communicator: unknown transport '{}' (auto, {})", transport, fmt::join(known, ", ")));
    }
  }
  WEFT_RETURN_IF_ERROR(selection.validate());
  // The transports' options, here and not only when a transport is made
  // after the host exchange: a bad value on one rank fails its create() at
  // once instead of leaving the others waiting for it until their deadline.
  TransportConfig options;
  options.rank = rank;
  options.size = size;
  options.tcp = tcp;
  options.shm = shm;
  options.verbs = verbs;
  WEFT_RETURN_IF_ERROR(options.validate().with_context("communicator"));
  for (const auto& [a, b] : failed_links) {
    if (a < 0 || a >= size || b < 0 || b >= size || a == b) {
      return invalid_argument(fmt::format("communicator: failed link {}-{} does not join two ranks of [0, {})", a, b, size));
    }
  }
  if (!plan_epochs.empty() && !plan) {
    return invalid_argument(fmt::format("communicator: plan epochs ({}) need a route plan to start from (plan)", plan_epochs));
  }
  if (plan_poll < std::chrono::milliseconds(1) || plan_poll > std::chrono::minutes(1)) {
    return invalid_argument(fmt::format("communicator: plan_poll must be in [1 ms, 60000 ms] (got {} ms)", plan_poll.count()));
  }
  if (switch_stall < std::chrono::milliseconds(10) || switch_stall > std::chrono::minutes(1) ||
      (!plan_epochs.empty() && in_call_switch && switch_stall >= timeout)) {
    return invalid_argument(fmt::format("communicator: switch_stall must be in [10 ms, 60000 ms] and below the timeout "
                                        "({} ms) (got {} ms)",
                                        timeout.count(), switch_stall.count()));
  }
  if (plan) {
    if (plan->ranks != size) {
      return invalid_argument(fmt::format("communicator: the route plan is for {} ranks, the communicator has {}",
                                          plan->ranks, size));
    }
    // An nccl-ring plan (several QP flows per pair, keyed by connection and
    // QP) is the NCCL net plugin's, not one this library's algorithms run.
    if (plan->collective != routing::collective_name(routing::Collective::kAllreduceHd) &&
        plan->collective != routing::collective_name(routing::Collective::kAllreduceRing) &&
        plan->collective != internal::kHybridPlan) {
      return invalid_argument(fmt::format("communicator: the route plan is for '{}'; the library runs plans of "
                                          "allreduce-hd, allreduce-ring or allreduce-hybrid",
                                          plan->collective));
    }
    const int per_peer = tcp.connections_per_peer == 1 ? internal::plan_connections(*plan) : tcp.connections_per_peer;
    WEFT_RETURN_IF_ERROR(internal::check_plan_connections(*plan, per_peer, !plan_epochs.empty()));
  }
  return ok_status();
}

Algorithm planned_algorithm(const routing::RoutePlan& plan) {
  if (plan.collective == routing::collective_name(routing::Collective::kAllreduceRing)) return Algorithm::kRing;
  if (plan.collective == internal::kHybridPlan) return Algorithm::kHybrid;
  return Algorithm::kHalvingDoubling;
}

namespace {

std::string this_host() {
  char buf[256] = {};
  if (::gethostname(buf, sizeof buf - 1) != 0) return "localhost";
  return buf;
}

}  // namespace

Status Communicator::Impl::setup(Store& store, Deadline deadline) {
  const int n = cfg.size, me = cfg.rank;
  // A plan's rounds become gates (plan_round_gates) — checked before any
  // peer is waited for, so that a bad plan fails at once on every rank.
  // A hybrid plan's flows are checked against the hosts once they are
  // known (below).
  if (cfg.plan) {
    WEFT_ASSIGN_OR_RETURN(gates, internal::plan_round_gates(*cfg.plan, {}));
    gated = planned_algorithm(*cfg.plan);
  }
  // The TCP listen address (listen_address.h): an override is checked
  // (whatever the transport, as launch_info_from_env does) before this rank
  // writes to the store, so that a wrong one fails here at once.
  WEFT_ASSIGN_OR_RETURN(const std::vector<internal::NetInterface> interfaces, internal::local_interfaces());
  const std::string route_address = store.local_address();
  WEFT_ASSIGN_OR_RETURN(const internal::ListenOverrides listen, internal::listen_overrides(cfg.tcp));
  if (listen.any()) {
    WEFT_ASSIGN_OR_RETURN(cfg.tcp.listen_address, internal::override_address(listen, interfaces, route_address));
  }
  if (cfg.host.empty()) cfg.host = this_host();
  // Host names: who shares memory with whom (shm, hybrid).
  WEFT_ASSIGN_OR_RETURN(hosts,
                        internal::store_allgather(store, cfg.store_prefix + "/host", me, n, cfg.host, deadline));
  std::set<std::string> distinct;
  for (int r = 0; r < n; ++r) {
    distinct.insert(hosts[static_cast<size_t>(r)]);
    if (hosts[static_cast<size_t>(r)] == cfg.host) local.push_back(r);
  }
  host_count = static_cast<int>(distinct.size());
  if (cfg.tcp.listen_address.empty()) {
    cfg.tcp.listen_address = internal::default_listen_address(host_count, route_address, interfaces);
  }
  std::map<std::string, int> index;
  for (const auto& h : hosts) {
    auto it = index.emplace(h, static_cast<int>(index.size())).first;
    host_of.push_back(it->second);
  }
  // Every rank read every host name: every rank refuses alike.
  if (cfg.plan && gated == Algorithm::kHybrid) WEFT_RETURN_IF_ERROR(internal::check_hybrid_plan(*cfg.plan, host_of));

  // Which transport serves which peer.
  std::map<std::string, std::vector<int>> peers_of;
  for (int r = 0; r < n; ++r) {
    if (r == me) continue;
    std::string name = cfg.transport;
    if (name == "auto") name = hosts[static_cast<size_t>(r)] == cfg.host ? "shm" : "tcp";
    peers_of[name].push_back(r);
  }
  links.transport_of.assign(static_cast<size_t>(n), -1);
  links.pairs.assign(static_cast<size_t>(n), nullptr);
  links.exchangers.assign(static_cast<size_t>(n), nullptr);
  last_send.assign(static_cast<size_t>(n), 0);
  for (int r = 0; r < n; ++r) identity_group.push_back(r);
  if (peers_of.size() == 1) link_kind = peers_of.begin()->first;
  WEFT_RETURN_IF_ERROR(choose_auto());
  WEFT_RETURN_IF_ERROR(agree_on_picks(store, deadline));
  WEFT_RETURN_IF_ERROR(setup_epochs(store, deadline));
  // The peers of what kAuto may run are connected now, the rest on demand
  // (connections.cc).
  const std::vector<bool> at_setup = cfg.connect_on_demand ? std::vector<bool>(static_cast<size_t>(n), false) : setup_peers();
  for (auto& [name, peers] : peers_of) {
    TransportConfig tc;
    tc.name = name;
    tc.rank = me;
    tc.size = n;
    tc.peers = peers;
    tc.connect_at_setup.emplace();
    for (int p : peers) {
      if (at_setup[static_cast<size_t>(p)]) tc.connect_at_setup->push_back(p);
    }
    tc.store_prefix = cfg.store_prefix;
    tc.ranks_on_host = static_cast<int>(local.size());
    tc.local_index = static_cast<int>(std::find(local.begin(), local.end(), me) - local.begin());
    tc.tcp = cfg.tcp;
    tc.shm = cfg.shm;
    tc.verbs = cfg.verbs;
    if (cfg.plan) {
      // The plan's flows of this transport's protocol become its routes.
      const std::string proto = name == "tcp" ? "tcp" : name == "verbs" ? "udp" : "";
      tc.routes.assign(static_cast<size_t>(n), PeerRoute{});
      for (const auto& f : cfg.plan->flows) {
        if (f.protocol != proto) continue;
        if (f.src_rank == me) {
          PeerRoute& route = tc.routes[static_cast<size_t>(f.dst_rank)];
          if (f.conn == 0) route.sport = f.sport, route.src_addr = f.src_addr, route.dst_addr = f.dst_addr;
          if (cfg.tcp.connections_per_peer > 1) {
            route.sports.resize(static_cast<size_t>(cfg.tcp.connections_per_peer));
            route.sports[static_cast<size_t>(f.conn)] = f.sport;
          }
        }
        if (f.dst_rank == me && name == "tcp") tc.tcp.listen_port = f.dport;
      }
    }
    WEFT_ASSIGN_OR_RETURN(auto t, make_transport(tc, store, deadline));
    const int idx = static_cast<int>(transports.size());
    links.transports.push_back(t.get());
    pins = pins || t->registration_pins();
    transports.push_back(std::move(t));
    for (int p : peers) {
      links.transport_of[static_cast<size_t>(p)] = idx;
      link(p);
      if (at_setup[static_cast<size_t>(p)] && !links.pairs[static_cast<size_t>(p)]) {
        return internal_error(fmt::format("{} transport has no pair for rank {}", name, p));
      }
    }
  }
  // The multi-transport wait (context.cc) polls hard as long as a TCP wait would.
  links.hard_spin = internal::hard_spin_for(static_cast<int>(local.size()), n, std::chrono::microseconds(cfg.tcp.spin_us));
  // More ranks here than CPUs, all over TCP: consecutive ranks share a CPU
  // (cpu_placement.h); the move does nothing where they fit.
  if (cfg.tcp.group_on_cpus && transports.size() == 1 && link_kind == "tcp" && local.size() > 1) {
    const auto at = std::find(local.begin(), local.end(), me) - local.begin();
    internal::move_to_block_cpu(static_cast<int>(at), static_cast<int>(local.size()));
  }
  if (cfg.scratch_reserve_bytes > 0) WEFT_RETURN_IF_ERROR(ensure_scratch(cfg.scratch_reserve_bytes));
  setup_in_call();
  return ok_status();
}

// What kAuto's AllReduce runs here, by size, resolved once
// (communicator_impl.h): the cost model's picks with this communicator's
// tuning (or the explicit rules), one-shot, and a route plan's algorithm.
// The picks' inputs are the communicator's, not this rank's view of them
// (a rank alone on its host has no shm peer, yet its peers' hosts have):
// every rank must pick alike (agree_on_picks).
Status Communicator::Impl::choose_auto() {
  equal_multi_host = host_count > 1 && local.size() > 1 && !internal::equal_hosts(host_of).empty();
  std::vector<int> on_host(static_cast<size_t>(host_count), 0);
  for (int h : host_of) ++on_host[static_cast<size_t>(h)];
  const int most_on_a_host = *std::max_element(on_host.begin(), on_host.end());
  Tuning tuning;
  if (cfg.selection.tuning) {
    tuning = *cfg.selection.tuning;
  } else if (cfg.selection.rules.empty()) {
    WEFT_ASSIGN_OR_RETURN(tuning, tuning_from_env());
  }
  SelectionInput in;
  in.transport = cfg.transport;
  if (cfg.transport == "auto") {  // shm on a host, tcp across
    in.transport = host_count > 1 ? "tcp" : "shm";
    if (host_count > 1 && most_on_a_host > 1) in.local_transport = "shm";
  }
  in.host_of = host_of;
  in.cpus = internal::usable_cpus();
  // Hybrid reorders whole hosts around failed links (remap.h); where no
  // order avoids them, kAuto must not pick it.
  in.hybrid = cfg.failed_links.empty() || internal::remap_hybrid(host_of, cfg.failed_links).is_ok();
  // One-shot talks to every peer: no remap avoids a failed link, a route
  // plan describes other pairs (below), and on many ranks it would connect
  // every pair (communicator.h "Connections").
  in.oneshot = most_on_a_host > internal::usable_cpus() && cfg.failed_links.empty() && !cfg.plan &&
               cfg.size <= cfg.selection.oneshot_max_ranks;
  if (cfg.plan) {
    // A route plan is made for one algorithm's flows (routing/schedule.h):
    // only those pairs' connections carry planned ports, and only the
    // plan's algorithm enforces its rounds. So kAuto keeps to the plan: the
    // plan's algorithm (HD, ring or hybrid) or, below the size where it
    // pays, butterfly, which is latency-bound (one message per step,
    // nothing for ECMP to collide).
    in.planned = gated;
  }
  auto_picks = select_allreduce(cfg.selection, tuning, in);
  return ok_status();
}

// kAuto's picks also depend on what each rank read and sees (a tuning
// file, the CPUs it may use), and a rank that runs another algorithm than
// its peers for the same call waits for messages that never come. So rank
// 0's picks are everyone's: it publishes them, each other rank takes them
// (one store lookup) and says so in one line where its own differ.
namespace {
std::string encode_picks(const AllreducePicks& p) {
  std::string s = std::to_string(p.hd_piece_bytes);
  for (int i = 0; i < p.count; ++i) {
    const auto& r = p.ranges[static_cast<size_t>(i)];
    s += fmt::format(" {}:{}", r.from_bytes, static_cast<int>(r.algorithm));
  }
  return s;
}

Result<AllreducePicks> decode_picks(const std::string& s) {
  AllreducePicks p;
  p.count = 0;
  std::istringstream in(s);
  size_t from = 0;
  int a = 0;
  char colon = 0;
  bool ok = static_cast<bool>(in >> p.hd_piece_bytes);
  while (ok && p.count < AllreducePicks::kMaxRanges && in >> from >> colon >> a) {
    const auto alg = static_cast<Algorithm>(a);
    ok = colon == ':' && a >= 0 && a < 256 && (p.count > 0 || from == 0) &&
         (alg == Algorithm::kHalvingDoubling || alg == Algorithm::kRing || alg == Algorithm::kButterfly ||
          alg == Algorithm::kHybrid || alg == Algorithm::kOneShot);
    p.ranges[static_cast<size_t>(p.count++)] = {from, alg};
  }
  if (!ok || p.count == 0 || !in.eof()) return data_loss(fmt::format("rank 0's AllReduce picks '{}' do not parse", s));
  return p;
}
}  // namespace

Status Communicator::Impl::agree_on_picks(Store& store, Deadline deadline) {
  const std::string key = cfg.store_prefix + "/auto/0";
  if (cfg.rank == 0) return store.set_by(key, encode_picks(auto_picks), deadline);
  WEFT_ASSIGN_OR_RETURN(const std::string first, store.get(key, deadline));
  WEFT_ASSIGN_OR_RETURN(const AllreducePicks rank0, decode_picks(first));
  if (encode_picks(rank0) == encode_picks(auto_picks)) return ok_status();
  spdlog::warn(
      "weft: rank {} runs rank 0's AllReduce picks \"{}\" (HD piece {} B) instead of its own \"{}\" (HD piece {} B): "
      "its tuning (WEFT_TUNING, Selection) or its usable CPUs ({}) differ from rank 0's",
      cfg.rank, rank0.describe(), rank0.hd_piece_bytes, auto_picks.describe(), auto_picks.hd_piece_bytes,
      internal::usable_cpus());
  auto_picks = rank0;
  return ok_status();
}

Status Communicator::Impl::fail(Status s) {
  std::lock_guard<std::mutex> l(abort_mu);
  if (!has_failed) {
    failed = s;
    has_failed = true;
    // Tell the peers: they fail fast naming this rank instead of timing out.
    for (auto& t : transports) t->abort(s);
  }
  return s;
}

Result<internal::Plan*> Communicator::Impl::plan(int coll, Algorithm a, const internal::Shape& s, MakePlanFn make,
                                                 Deadline deadline, std::chrono::milliseconds timeout) {
  const PlanKey key{coll * 16 + static_cast<int>(a), s.rank, s.count, s.esize, s.segment, s.root};
  if (last_plan != nullptr && key == last_plan_key) return last_plan;
  auto it = plans.find(key);
  if (it == plans.end()) {
    internal::Shape full = s;  // host_of only matters when planning
    for (int g : *s.group) full.host_of.push_back(host_of[static_cast<size_t>(g)]);
    std::unique_ptr<internal::Plan> made = make(full);
    // Every rank makes the same plans in the same calls, so the two ends of
    // a missing pair connect it in the same call.
    WEFT_RETURN_IF_ERROR(connect_plan_peers(*made, *s.group, deadline, timeout));
    it = plans.emplace(key, std::move(made)).first;
  }
  last_plan_key = key;
  last_plan = it->second.get();
  return last_plan;
}

Result<const std::vector<int>*> Communicator::Impl::rank_map(Algorithm a) {
  const auto slot = static_cast<size_t>(a);
  if (slot < rank_map_of.size() && rank_map_of[slot] != nullptr) return rank_map_of[slot];
  auto it = rank_maps.find(a);
  if (it == rank_maps.end()) {
    WEFT_ASSIGN_OR_RETURN(auto map, a == Algorithm::kHybrid
                                        ? internal::remap_hybrid(host_of, cfg.failed_links)
                                        : internal::remap_avoiding(a, cfg.size, cfg.failed_links));
    it = rank_maps.emplace(a, std::move(map)).first;
  }
  if (slot < rank_map_of.size()) rank_map_of[slot] = &it->second;  // map nodes do not move
  return &it->second;
}

Result<HugeBuffer> Communicator::Impl::allocate(size_t bytes, std::string_view what) const {
  try {
    return HugeBuffer(bytes);
  } catch (const std::bad_alloc&) {
    return io_error(fmt::format("rank {}: {} bytes of {} cannot be allocated", cfg.rank, bytes, what), ENOMEM);
  }
}

Status Communicator::Impl::ensure_scratch(size_t bytes) {
  if (bytes <= scratch.size() && !scratch_mem.empty()) return ok_status();
  scratch_mem.clear();
  WEFT_ASSIGN_OR_RETURN(scratch, allocate(std::max(bytes, scratch.size()), "scratch"));
  for (auto& t : transports) {
    WEFT_ASSIGN_OR_RETURN(auto m, t->register_memory(scratch.data(), scratch.size()));
    scratch_mem.push_back(std::move(m));
  }
  return ok_status();
}

Status Communicator::Impl::run(internal::Plan& p, const std::vector<int>& group_ranks, int me, void* data,
                               size_t bytes, DataType t, ReduceOp op, Deadline deadline,
                               std::chrono::milliseconds timeout) {
  // Not WEFT_RETURN_IF_ERROR, which copies the OK Status (a string) on
  // every call: a small AllReduce's whole call is a few hundred ns.
  if (Status s = place_buffers(p.scratch_bytes(), data, bytes); !s) {
    finish_buffers(s, bytes);
    return s;
  }
  std::fill(last_send.begin(), last_send.end(), Ticket{0});
  internal::Context ctx(group_ranks, me, &links, &buffers, &last_send, deadline, t, op, &cfg.trace, cfg.rank,
                        internal::stall_window(timeout));
  Status s = p.run(ctx);
  finish_buffers(s, bytes);
  return s;
}

namespace {
constexpr const char* kCollName[] = {"allreduce", "reduce_scatter", "allgather", "broadcast"};
}  // namespace

Status Communicator::Impl::execute(int coll, Algorithm a, MakePlanFn make, const std::vector<int>& group,
                                   size_t count, int root, void* data, size_t bytes, DataType t, ReduceOp op,
                                   const CollectiveOptions& o) {
  const auto timeout = call_timeout(o);
  // The deadline is seconds away: the coarse clock is precise enough and a
  // fifth of the cost of a small shared-memory call less (idle_wait.h).
  const Deadline deadline = internal::coarse_now() + timeout;
  internal::Shape shape;
  shape.size = static_cast<int>(group.size());
  for (size_t i = 0; i < group.size(); ++i) {
    if (group[i] == cfg.rank) shape.rank = static_cast<int>(i);
  }
  shape.count = count;
  shape.esize = dtype_size(t);
  shape.segment = o.segment_bytes;
  shape.root = root;
  shape.group = &group;
  // A plan's rounds bind its algorithm's AllReduce (HD, ring or hybrid) when its
  // ranks are the plan's ranks; otherwise HD runs in the pieces of this transport's rule (forced or
  // picked alike: SelectionRule::hd_piece_bytes). The piece is fixed at
  // setup, so the plan cache's key need not hold it.
  if (coll == internal::kAllreduce && a == gated && !gates.empty() &&
      (&group == &identity_group || group == identity_group)) {
    shape.gates = &gates;
  } else if (coll == internal::kAllreduce && a == Algorithm::kHalvingDoubling) {
    shape.piece = auto_picks.hd_piece_bytes;
  }
  if (in_call && !in_call->recovering) [[unlikely]] {
    CallRecord r;
    r.coll = coll;
    r.a = a;
    r.make = make;
    r.group = &group;
    r.count = count;
    r.root = root;
    r.t = t;
    r.op = op;
    r.o = o;
    r.bytes = bytes;
    r.deadline = deadline;
    if (Status s = record_call(std::move(r), data); !s) return fail_call(s, coll, a, count, t, op);
  }
  Result<internal::Plan*> p = plan(coll, a, shape, make, deadline, timeout);
  Status s = p ? run(**p, group, shape.rank, data, bytes, t, op, deadline, timeout) : p.status();
  if (!s) {
    // in_call_switch.cc: a call abandoned for a newer plan epoch runs again.
    if (in_call && !in_call->recovering) [[unlikely]] return switch_inside(s, data);
    return fail_call(s, coll, a, count, t, op);
  }
  return s;
}

Status Communicator::Impl::fail_call(const Status& s, int coll, Algorithm a, size_t count, DataType t, ReduceOp op) {
  return fail(s.with_context(fmt::format("rank {}: {} ({}, {} x {}{}{})", cfg.rank, kCollName[coll], algorithm_name(a),
                                         count, dtype_name(t), coll <= internal::kReduceScatter ? ", " : "",
                                         coll <= internal::kReduceScatter ? reduce_op_name(op) : "")));
}

Status Communicator::Impl::usable() {
  if (!has_failed) return ok_status();
  std::lock_guard<std::mutex> l(abort_mu);
  return failed;
}

bool Communicator::Impl::hosts_equal() const { return equal_multi_host; }

Algorithm Communicator::Impl::select_auto_allreduce(size_t bytes) const { return auto_picks.at(bytes); }

Communicator::Communicator(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Communicator::~Communicator() = default;

Result<std::unique_ptr<Communicator>> Communicator::create(const CommConfig& config, Store& store) {
  return create(config, store, Clock::now() + std::min(config.timeout, kLongestTimeout));
}

Result<std::unique_ptr<Communicator>> Communicator::create(const CommConfig& config, Store& store, Deadline deadline) {
  CommConfig c = config;
  WEFT_RETURN_IF_ERROR(internal::apply_environment(c));
  WEFT_RETURN_IF_ERROR(c.validate());
  c.timeout = std::min(c.timeout, kLongestTimeout);  // every deadline is made of it
  auto impl = std::make_unique<Impl>();
  impl->cfg = std::move(c);
  Status s = impl->setup(store, deadline);
  if (!s) return s.with_context(fmt::format("rank {}: creating the communicator", config.rank));
  return std::unique_ptr<Communicator>(new Communicator(std::move(impl)));
}

int Communicator::rank() const { return impl_->cfg.rank; }
int Communicator::size() const { return impl_->cfg.size; }
const std::string& Communicator::host() const { return impl_->cfg.host; }
const std::vector<int>& Communicator::local_ranks() const { return impl_->local; }
int Communicator::host_count() const { return impl_->host_count; }
const AllreducePicks& Communicator::auto_allreduce() const { return impl_->auto_picks; }
uint64_t Communicator::plan_epoch() const { return impl_->epochs ? impl_->epochs->epoch : 0; }
PlanEpochCounters Communicator::plan_epoch_counters() const {
  return impl_->epochs ? impl_->epochs->file.counters() : PlanEpochCounters{};
}
const std::optional<routing::RoutePlan>& Communicator::route_plan() const { return impl_->cfg.plan; }
Result<std::vector<int>> Communicator::allreduce_rank_map(Algorithm a) const {
  WEFT_ASSIGN_OR_RETURN(const std::vector<int>* map, impl_->rank_map(a));
  return *map;
}

Transport* Communicator::transport_for(int peer) const {
  if (peer < 0 || peer >= size() || impl_->links.transport_of[static_cast<size_t>(peer)] < 0) return nullptr;
  return impl_->transports[static_cast<size_t>(impl_->links.transport_of[static_cast<size_t>(peer)])].get();
}

void Communicator::abort(std::string_view reason) {
  (void)impl_->fail(aborted(fmt::format("rank {}: {}", rank(), reason)));
}

}  // namespace weft::coll
