#include "weft/collectives/communicator.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <map>
#include <set>
#include <tuple>

#include <fmt/format.h>

#include "algorithms/algorithms.h"
#include "context.h"
#include "remap.h"

namespace weft::coll {

std::string_view algorithm_name(Algorithm a) {
  switch (a) {
    case Algorithm::kAuto: return "auto";
    case Algorithm::kHalvingDoubling: return "hd";
    case Algorithm::kRing: return "ring";
    case Algorithm::kButterfly: return "butterfly";
    case Algorithm::kHybrid: return "hybrid";
    case Algorithm::kHierarchical: return "hierarchical";
    case Algorithm::kBinomial: return "binomial";
  }
  return "?";
}

std::optional<Algorithm> parse_algorithm(std::string_view s) {
  for (Algorithm a : {Algorithm::kAuto, Algorithm::kHalvingDoubling, Algorithm::kRing,
                      Algorithm::kButterfly, Algorithm::kHybrid, Algorithm::kHierarchical,
                      Algorithm::kBinomial}) {
    if (algorithm_name(a) == s) return a;
  }
  if (s == "halving-doubling") return Algorithm::kHalvingDoubling;
  if (s == "recursive-doubling") return Algorithm::kButterfly;
  return std::nullopt;
}

Status CommConfig::validate() const {
  if (size < 1) return invalid_argument(fmt::format("communicator: size must be >= 1 (got {})", size));
  if (rank < 0 || rank >= size) {
    return invalid_argument(fmt::format("communicator: rank {} is outside [0, {})", rank, size));
  }
  if (timeout.count() <= 0) {
    return invalid_argument(fmt::format("communicator: timeout must be > 0 ms (got {})", timeout.count()));
  }
  if (transport.empty()) return invalid_argument("communicator: transport name is empty");
  for (const auto& [a, b] : failed_links) {
    if (a < 0 || a >= size || b < 0 || b >= size || a == b) {
      return invalid_argument(fmt::format("communicator: failed link {}-{} does not join two ranks of [0, {})", a, b, size));
    }
  }
  if (plan) {
    if (plan->ranks != size) {
      return invalid_argument(fmt::format("communicator: the route plan is for {} ranks, the communicator has {}",
                                          plan->ranks, size));
    }
    if (tcp.connections_per_peer != 1) {
      return invalid_argument("communicator: a route plan names one TCP connection per direction; "
                              "connections_per_peer must be 1 with a plan");
    }
  }
  return Status::ok();
}

class Communicator::Impl {
 public:
  CommConfig cfg;
  std::vector<std::string> hosts;  // by rank
  std::vector<int> local;          // ranks on this host
  int host_count = 1;
  std::vector<std::unique_ptr<Transport>> transports;
  std::vector<Transport*> transport_ptrs;
  std::vector<int> transport_of;  // by rank; -1 for self
  std::vector<Pair*> pairs;       // by rank
  std::map<Algorithm, std::vector<int>> rank_maps;  // allreduce: logical -> physical
  std::map<std::tuple<int, int, size_t, size_t, size_t>, std::unique_ptr<internal::Plan>> plans;
  std::vector<char> scratch;
  std::vector<std::unique_ptr<Memory>> scratch_mem;  // by transport
  std::mutex abort_mu;
  Status failed;  // first failure; the communicator is unusable after it
  std::atomic<bool> has_failed{false};

  Status setup(Store& store);
  Status fail(Status s);
  Result<internal::Plan*> plan(int coll, Algorithm a, const internal::Shape& s,
                               std::unique_ptr<internal::Plan> (*make)(const internal::Shape&));
  Status ensure_scratch(size_t bytes);
  Status run(internal::Plan& p, const std::vector<int>& group_ranks, void* data, size_t bytes,
             DataType t, ReduceOp op, Deadline deadline);
};

namespace {

std::string this_host() {
  char buf[256] = {};
  if (::gethostname(buf, sizeof buf - 1) != 0) return "localhost";
  return buf;
}

}  // namespace

Status Communicator::Impl::setup(Store& store) {
  const Deadline deadline = Clock::now() + cfg.timeout;
  const int n = cfg.size, me = cfg.rank;
  if (cfg.host.empty()) cfg.host = this_host();
  // Host names: who shares memory with whom (shm, hybrid).
  WEFT_RETURN_IF_ERROR(store.set(fmt::format("{}/host/{}", cfg.store_prefix, me), cfg.host));
  hosts.resize(static_cast<size_t>(n));
  std::set<std::string> distinct;
  for (int r = 0; r < n; ++r) {
    WEFT_ASSIGN_OR_RETURN(hosts[static_cast<size_t>(r)],
                          store.get(fmt::format("{}/host/{}", cfg.store_prefix, r), deadline));
    distinct.insert(hosts[static_cast<size_t>(r)]);
    if (hosts[static_cast<size_t>(r)] == cfg.host) local.push_back(r);
  }
  host_count = static_cast<int>(distinct.size());

  // Which transport serves which peer.
  std::map<std::string, std::vector<int>> peers_of;
  for (int r = 0; r < n; ++r) {
    if (r == me) continue;
    std::string name = cfg.transport;
    if (name == "auto") name = hosts[static_cast<size_t>(r)] == cfg.host ? "shm" : "tcp";
    peers_of[name].push_back(r);
  }
  transport_of.assign(static_cast<size_t>(n), -1);
  pairs.assign(static_cast<size_t>(n), nullptr);
  for (auto& [name, peers] : peers_of) {
    TransportConfig tc;
    tc.name = name;
    tc.rank = me;
    tc.size = n;
    tc.peers = peers;
    tc.store_prefix = cfg.store_prefix;
    tc.tcp = cfg.tcp;
    tc.shm = cfg.shm;
    if (cfg.plan) {
      // The plan's flows of this transport's protocol become its routes.
      const std::string proto = name == "tcp" ? "tcp" : name == "verbs" ? "udp" : "";
      tc.routes.assign(static_cast<size_t>(n), PeerRoute{});
      for (const auto& f : cfg.plan->flows) {
        if (f.protocol != proto) continue;
        if (f.src_rank == me) tc.routes[static_cast<size_t>(f.dst_rank)].sport = f.sport;
        if (f.dst_rank == me && name == "tcp") tc.tcp.listen_port = f.dport;
      }
    }
    WEFT_ASSIGN_OR_RETURN(auto t, make_transport(tc, store, deadline));
    const int idx = static_cast<int>(transports.size());
    for (int p : peers) {
      transport_of[static_cast<size_t>(p)] = idx;
      pairs[static_cast<size_t>(p)] = t->pair(p);
      if (!pairs[static_cast<size_t>(p)]) return internal_error(fmt::format("{} transport has no pair for rank {}", name, p));
    }
    transport_ptrs.push_back(t.get());
    transports.push_back(std::move(t));
  }
  return Status::ok();
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

Result<internal::Plan*> Communicator::Impl::plan(
    int coll, Algorithm a, const internal::Shape& s,
    std::unique_ptr<internal::Plan> (*make)(const internal::Shape&)) {
  auto key = std::make_tuple(coll * 16 + static_cast<int>(a), s.rank, s.count, s.esize, s.segment);
  auto it = plans.find(key);
  if (it == plans.end()) it = plans.emplace(key, make(s)).first;
  return it->second.get();
}

Status Communicator::Impl::ensure_scratch(size_t bytes) {
  if (bytes <= scratch.size() && !scratch_mem.empty()) return Status::ok();
  scratch_mem.clear();
  scratch.assign(std::max(bytes, scratch.size()), 0);
  for (auto& t : transports) {
    WEFT_ASSIGN_OR_RETURN(auto m, t->register_memory(scratch.data(), scratch.size()));
    scratch_mem.push_back(std::move(m));
  }
  return Status::ok();
}

Status Communicator::Impl::run(internal::Plan& p, const std::vector<int>& group_ranks, void* data,
                               size_t bytes, DataType t, ReduceOp op, Deadline deadline) {
  WEFT_RETURN_IF_ERROR(ensure_scratch(p.scratch_bytes()));
  internal::Buffers b;
  std::vector<std::unique_ptr<Memory>> data_mem;
  for (auto& tr : transports) {
    WEFT_ASSIGN_OR_RETURN(auto m, tr->register_memory(data, bytes));
    b.mem[internal::kData].by_transport.push_back(m.get());
    data_mem.push_back(std::move(m));
  }
  for (auto& m : scratch_mem) b.mem[internal::kScratch].by_transport.push_back(m.get());
  b.ptr[internal::kData] = static_cast<char*>(data);
  b.ptr[internal::kScratch] = scratch.data();
  internal::Group g{group_ranks, 0};
  for (size_t i = 0; i < group_ranks.size(); ++i) {
    if (group_ranks[i] == cfg.rank) g.me = static_cast<int>(i);
  }
  internal::Context ctx(std::move(g), pairs, transport_of, transport_ptrs, &b, deadline, t, op,
                        &cfg.trace, cfg.rank);
  return p.run(ctx);
}

Communicator::Communicator(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Communicator::~Communicator() = default;

Result<std::unique_ptr<Communicator>> Communicator::create(const CommConfig& config, Store& store) {
  WEFT_RETURN_IF_ERROR(config.validate());
  auto impl = std::make_unique<Impl>();
  impl->cfg = config;
  Status s = impl->setup(store);
  if (!s) return s.with_context(fmt::format("rank {}: creating the communicator", config.rank));
  return std::unique_ptr<Communicator>(new Communicator(std::move(impl)));
}

int Communicator::rank() const { return impl_->cfg.rank; }
int Communicator::size() const { return impl_->cfg.size; }
const std::string& Communicator::host() const { return impl_->cfg.host; }
const std::vector<int>& Communicator::local_ranks() const { return impl_->local; }
int Communicator::host_count() const { return impl_->host_count; }
Result<std::vector<int>> Communicator::allreduce_rank_map(Algorithm a) const {
  auto it = impl_->rank_maps.find(a);
  if (it != impl_->rank_maps.end()) return it->second;
  WEFT_ASSIGN_OR_RETURN(auto map, internal::remap_avoiding(a, size(), impl_->cfg.failed_links));
  impl_->rank_maps[a] = map;
  return map;
}

Transport* Communicator::transport_for(int peer) const {
  if (peer < 0 || peer >= size() || impl_->transport_of[static_cast<size_t>(peer)] < 0) return nullptr;
  return impl_->transports[static_cast<size_t>(impl_->transport_of[static_cast<size_t>(peer)])].get();
}

void Communicator::abort(std::string_view reason) {
  (void)impl_->fail(aborted(fmt::format("rank {}: {}", rank(), reason)));
}

Status Communicator::allreduce(const void* send, void* recv, size_t count, DataType t, ReduceOp op,
                               const CollectiveOptions& o) {
  Impl& m = *impl_;
  if (m.has_failed) {
    std::lock_guard<std::mutex> l(m.abort_mu);
    return m.failed;
  }
  const size_t es = dtype_size(t);
  const size_t bytes = count * es;
  if (count > 0 && (send == nullptr || recv == nullptr)) return invalid_argument("allreduce: null buffer");
  if (send != recv && count > 0) std::memmove(recv, send, bytes);
  if (count == 0 || size() == 1) return Status::ok();
  Algorithm a = o.algorithm;
  if (a == Algorithm::kAuto) {
    a = bytes < m.cfg.selection.butterfly_max_bytes ? Algorithm::kButterfly
        : bytes >= m.cfg.selection.ring_min_bytes   ? Algorithm::kRing
                                                    : Algorithm::kHalvingDoubling;
  }
  std::unique_ptr<internal::Plan> (*make)(const internal::Shape&) = nullptr;
  switch (a) {
    case Algorithm::kHalvingDoubling: make = internal::plan_allreduce_hd; break;
    case Algorithm::kRing: make = internal::plan_allreduce_ring; break;
    case Algorithm::kButterfly: make = internal::plan_allreduce_butterfly; break;
    default:
      return invalid_argument(fmt::format("allreduce: algorithm '{}' is not an allreduce algorithm",
                                          algorithm_name(a)));
  }
  const auto timeout = o.timeout.count() > 0 ? o.timeout : m.cfg.timeout;
  const Deadline deadline = Clock::now() + timeout;
  WEFT_ASSIGN_OR_RETURN(std::vector<int> map, allreduce_rank_map(a));
  int logical = 0;
  for (int i = 0; i < size(); ++i) {
    if (map[static_cast<size_t>(i)] == rank()) logical = i;
  }
  internal::Shape shape{size(), logical, count, es, o.segment_bytes};
  WEFT_ASSIGN_OR_RETURN(internal::Plan * p, m.plan(0, a, shape, make));
  Status s = m.run(*p, map, recv, bytes, t, op, deadline);
  if (!s) {
    return m.fail(s.with_context(fmt::format("rank {}: allreduce ({}, {} x {}, {})", rank(),
                                             algorithm_name(a), count, dtype_name(t), reduce_op_name(op))));
  }
  return s;
}

Status Communicator::barrier(const CollectiveOptions& o) {
  uint8_t token = 1;
  CollectiveOptions b = o;
  b.algorithm = Algorithm::kButterfly;
  return allreduce(&token, &token, 1, DataType::kU8, ReduceOp::kMax, b);
}

}  // namespace weft::coll
