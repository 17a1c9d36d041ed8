// The collective calls of the communicator: argument checks, the in/out of
// place copies, algorithm choice, then Impl::execute (communicator.cc).
#include <cstring>

#include <fmt/format.h>

#include "communicator_impl.h"

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
    case Algorithm::kOneShot: return "oneshot";
  }
  return "?";
}

std::optional<Algorithm> parse_algorithm(std::string_view s) {
  for (Algorithm a : {Algorithm::kAuto, Algorithm::kHalvingDoubling, Algorithm::kRing,
                      Algorithm::kButterfly, Algorithm::kHybrid, Algorithm::kHierarchical,
                      Algorithm::kBinomial, Algorithm::kOneShot}) {
    if (algorithm_name(a) == s) return a;
  }
  if (s == "halving-doubling") return Algorithm::kHalvingDoubling;
  if (s == "recursive-doubling") return Algorithm::kButterfly;
  return std::nullopt;
}

namespace {

using internal::kAllgather;
using internal::kAllreduce;
using internal::kBroadcast;
using internal::kReduceScatter;
using MakePlan = std::unique_ptr<internal::Plan> (*)(const internal::Shape&);

}  // namespace

Status Communicator::allreduce(const void* send, void* recv, size_t count, DataType t, ReduceOp op,
                               const CollectiveOptions& o) {
  Impl& m = *impl_;
  if (Status s = m.usable(); !s) return s;  // not WEFT_RETURN_IF_ERROR: no copy of an OK Status per call
  const size_t bytes = count * dtype_size(t);
  if (count > 0 && (send == nullptr || recv == nullptr)) return invalid_argument("allreduce: null buffer");
  if (send != recv && count > 0) std::memmove(recv, send, bytes);
  if (count == 0 || size() == 1) return Status::ok();
  Algorithm a = o.algorithm;
  if (a == Algorithm::kAuto) a = m.select_auto_allreduce(bytes);
  MakePlan make = nullptr;
  switch (a) {
    case Algorithm::kHalvingDoubling: make = internal::plan_allreduce_hd; break;
    case Algorithm::kRing: make = internal::plan_allreduce_ring; break;
    case Algorithm::kButterfly: make = internal::plan_allreduce_butterfly; break;
    case Algorithm::kOneShot: make = internal::plan_allreduce_oneshot; break;
    case Algorithm::kHybrid:
      if (internal::equal_hosts(m.host_of).empty()) {
        return failed_precondition(fmt::format(
            "allreduce: hybrid needs the same number of ranks on every host ({} on this rank's host {})",
            m.local.size(), m.cfg.host));
      }
      make = internal::plan_allreduce_hybrid;
      break;
    default:
      return invalid_argument(fmt::format("allreduce: '{}' is not an allreduce algorithm (hd, ring, butterfly, oneshot, hybrid)",
                                          algorithm_name(a)));
  }
  const std::vector<int>* group = &m.identity_group;
  if (a != Algorithm::kHybrid) {
    WEFT_ASSIGN_OR_RETURN(group, m.rank_map(a));
  }
  return m.execute(kAllreduce, a, make, *group, count, 0, recv, bytes, t, op, o);
}

Status Communicator::reduce_scatter(const void* send, void* recv, size_t recv_count, DataType t,
                                    ReduceOp op, const CollectiveOptions& o) {
  Impl& m = *impl_;
  WEFT_RETURN_IF_ERROR(m.usable());
  const size_t es = dtype_size(t), block = recv_count * es, all = block * static_cast<size_t>(size());
  if (recv_count == 0) return Status::ok();
  if (send == nullptr || recv == nullptr) return invalid_argument("reduce_scatter: null buffer");
  if (o.algorithm != Algorithm::kAuto && o.algorithm != Algorithm::kRing) {
    return invalid_argument(fmt::format("reduce_scatter: '{}' is not a reduce-scatter algorithm (ring)", algorithm_name(o.algorithm)));
  }
  // The reduction happens in place: work on a copy of the caller's input.
  if (m.work.size() < all) m.work.resize(all);
  std::memcpy(m.work.data(), send, all);
  if (size() > 1) {
    WEFT_RETURN_IF_ERROR(m.execute(kReduceScatter, Algorithm::kRing, internal::plan_reduce_scatter_ring,
                                   m.identity_group, recv_count, 0, m.work.data(), all, t, op, o));
  }
  std::memcpy(recv, m.work.data() + static_cast<size_t>(rank()) * block, block);
  return Status::ok();
}

Status Communicator::allgather(const void* send, void* recv, size_t send_count, DataType t,
                               const CollectiveOptions& o) {
  Impl& m = *impl_;
  WEFT_RETURN_IF_ERROR(m.usable());
  const size_t es = dtype_size(t), block = send_count * es, all = block * static_cast<size_t>(size());
  if (send_count == 0) return Status::ok();
  if (send == nullptr || recv == nullptr) return invalid_argument("allgather: null buffer");
  char* out = static_cast<char*>(recv) + static_cast<size_t>(rank()) * block;
  if (out != send) std::memmove(out, send, block);
  if (size() == 1) return Status::ok();
  Algorithm a = o.algorithm;
  if (a == Algorithm::kAuto) a = m.hosts_equal() ? Algorithm::kHierarchical : Algorithm::kRing;
  MakePlan make = nullptr;
  if (a == Algorithm::kRing) {
    make = internal::plan_allgather_ring;
  } else if (a == Algorithm::kHierarchical) {
    if (internal::equal_hosts(m.host_of).empty()) {
      return failed_precondition("allgather: hierarchical needs the same number of ranks on every host");
    }
    make = internal::plan_allgather_hierarchical;
  } else {
    return invalid_argument(fmt::format("allgather: '{}' is not an allgather algorithm (ring, hierarchical)", algorithm_name(a)));
  }
  return m.execute(kAllgather, a, make, m.identity_group, send_count, 0, recv, all, t, ReduceOp::kSum, o);
}

Status Communicator::broadcast(void* buf, size_t count, DataType t, int root, const CollectiveOptions& o) {
  Impl& m = *impl_;
  WEFT_RETURN_IF_ERROR(m.usable());
  if (root < 0 || root >= size()) return invalid_argument(fmt::format("broadcast: root {} is outside [0, {})", root, size()));
  if (o.algorithm != Algorithm::kAuto && o.algorithm != Algorithm::kBinomial) {
    return invalid_argument(fmt::format("broadcast: '{}' is not a broadcast algorithm (binomial)", algorithm_name(o.algorithm)));
  }
  if (count == 0 || size() == 1) return Status::ok();
  if (buf == nullptr) return invalid_argument("broadcast: null buffer");
  return m.execute(kBroadcast, Algorithm::kBinomial, internal::plan_broadcast_binomial, m.identity_group, count,
                   root, buf, count * dtype_size(t), t, ReduceOp::kSum, o);
}

Status Communicator::barrier(const CollectiveOptions& o) {
  uint8_t token = 1;
  CollectiveOptions b = o;
  b.algorithm = Algorithm::kButterfly;
  return allreduce(&token, &token, 1, DataType::kU8, ReduceOp::kMax, b);
}

}  // namespace weft::coll
