// The collective calls of the communicator: argument checks, the in/out of
// place copies, algorithm choice, then Impl::execute (communicator.cc).
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <string>
#include <utility>

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

// The argument checks every call makes before it touches a buffer, each
// naming the argument: a type or op outside its enum (a C caller, or a
// cast, can pass any number; the reduce kernels are a table indexed by
// them), and a byte count past what size_t holds.
Status check_type(std::string_view call, DataType t) {
  if (static_cast<unsigned>(t) <= static_cast<unsigned>(DataType::kU8)) return ok_status();
  return invalid_argument(fmt::format("{}: type {} is not a DataType (0-6: f32, f64, f16, bf16, i32, i64, u8)", call,
                                      static_cast<unsigned>(t)));
}

Status check_op(std::string_view call, ReduceOp op) {
  if (static_cast<unsigned>(op) <= static_cast<unsigned>(ReduceOp::kMax)) return ok_status();
  return invalid_argument(
      fmt::format("{}: op {} is not a ReduceOp (0-3: sum, prod, min, max)", call, static_cast<unsigned>(op)));
}

// count elements of t, `blocks` times (the ranks' blocks of reduce_scatter
// and allgather); t must be valid.
Status check_bytes(std::string_view call, std::string_view what, size_t count, DataType t, size_t blocks) {
  const size_t es = dtype_size(t);
  // Multiplications that report overflow, not SIZE_MAX / es / blocks: two
  // 64-bit divisions cost tens of nanoseconds on every call, a fifth of a
  // 2-rank shared-memory AllReduce of 4 bytes.
  size_t bytes = 0;
  if (!__builtin_mul_overflow(count, es, &bytes) && !__builtin_mul_overflow(bytes, blocks, &bytes)) return ok_status();
  return invalid_argument(fmt::format("{}: {} {} of {} ({} bytes each{}) is more bytes than size_t holds", call, what,
                                      count, dtype_name(t), es,
                                      blocks > 1 ? fmt::format(", times {} ranks", blocks) : std::string()));
}

Status check_buffers(std::string_view call, size_t count,
                     std::initializer_list<std::pair<const char*, const void*>> bufs) {
  if (count == 0) return ok_status();
  for (const auto& [name, p] : bufs) {
    if (p == nullptr) return invalid_argument(fmt::format("{}: {} is null (count {})", call, name, count));
  }
  return ok_status();
}

}  // namespace

Status Communicator::allreduce(const void* send, void* recv, size_t count, DataType t, ReduceOp op,
                               const CollectiveOptions& o) {
  Impl& m = *impl_;
  if (Status s = m.usable(); !s) return s;  // not WEFT_RETURN_IF_ERROR: no copy of an OK Status per call
  if (Status s = check_type("allreduce", t); !s) return s;
  if (Status s = check_op("allreduce", op); !s) return s;
  if (Status s = check_bytes("allreduce", "count", count, t, 1); !s) return s;
  if (Status s = check_buffers("allreduce", count, {{"send", send}, {"recv", recv}}); !s) return s;
  const size_t bytes = count * dtype_size(t);
  Algorithm a = o.algorithm;
  MakePlan make = nullptr;
  switch (a) {
    case Algorithm::kAuto: break;
    case Algorithm::kHalvingDoubling: make = internal::plan_allreduce_hd; break;
    case Algorithm::kRing: make = internal::plan_allreduce_ring; break;
    case Algorithm::kButterfly: make = internal::plan_allreduce_butterfly; break;
    case Algorithm::kOneShot: make = internal::plan_allreduce_oneshot; break;
    case Algorithm::kHybrid: make = internal::plan_allreduce_hybrid; break;
    default:
      return invalid_argument(fmt::format("allreduce: '{}' is not an allreduce algorithm (hd, ring, butterfly, oneshot, hybrid)",
                                          algorithm_name(a)));
  }
  if (count == 0 || size() == 1) {
    if (send != recv && count > 0) std::memmove(recv, send, bytes);
    return ok_status();
  }
  if (a == Algorithm::kAuto) {
    a = m.select_auto_allreduce(bytes);
    switch (a) {
      case Algorithm::kHalvingDoubling: make = internal::plan_allreduce_hd; break;
      case Algorithm::kRing: make = internal::plan_allreduce_ring; break;
      case Algorithm::kButterfly: make = internal::plan_allreduce_butterfly; break;
      case Algorithm::kOneShot: make = internal::plan_allreduce_oneshot; break;
      default: make = internal::plan_allreduce_hybrid; break;
    }
  }
  if (a == Algorithm::kHybrid && internal::equal_hosts(m.host_of).empty()) {
    return failed_precondition(fmt::format(
        "allreduce: hybrid needs the same number of ranks on every host ({} on this rank's host {})", m.local.size(),
        m.cfg.host));
  }
  const std::vector<int>* group = nullptr;
  WEFT_ASSIGN_OR_RETURN(group, m.rank_map(a));
  if (m.epochs) [[unlikely]] {
    if (Status s = m.epoch_boundary(); !s) return s;
  }
  // Only now, with every argument checked: nothing is written on an error.
  if (send != recv) std::memmove(recv, send, bytes);
  if (a == Algorithm::kButterfly) {
    if (std::optional<Status> s = m.butterfly_lane(*group, recv, count, bytes, t, op, o)) return *std::move(s);
  }
  return m.execute(kAllreduce, a, make, *group, count, 0, recv, bytes, t, op, o);
}

Status Communicator::reduce_scatter(const void* send, void* recv, size_t recv_count, DataType t,
                                    ReduceOp op, const CollectiveOptions& o) {
  Impl& m = *impl_;
  WEFT_RETURN_IF_ERROR(m.usable());
  WEFT_RETURN_IF_ERROR(check_type("reduce_scatter", t));
  WEFT_RETURN_IF_ERROR(check_op("reduce_scatter", op));
  WEFT_RETURN_IF_ERROR(check_bytes("reduce_scatter", "recv_count", recv_count, t, static_cast<size_t>(size())));
  WEFT_RETURN_IF_ERROR(check_buffers("reduce_scatter", recv_count, {{"send", send}, {"recv", recv}}));
  if (o.algorithm != Algorithm::kAuto && o.algorithm != Algorithm::kRing) {
    return invalid_argument(fmt::format("reduce_scatter: '{}' is not a reduce-scatter algorithm (ring)", algorithm_name(o.algorithm)));
  }
  if (recv_count == 0) return ok_status();
  const size_t block = recv_count * dtype_size(t), all = block * static_cast<size_t>(size());
  // The reduction happens in place: work on a copy of the caller's input.
  // A failure here is this rank's alone: fail the communicator, so that its
  // peers, already in the call, learn it now instead of at their deadline.
  if (Status s = m.ensure_work(all); !s) {
    return m.fail_call(s, internal::kReduceScatter, Algorithm::kRing, recv_count, t, op);
  }
  std::memcpy(m.work.data(), send, all);
  if (size() > 1) {
    if (m.epochs) WEFT_RETURN_IF_ERROR(m.epoch_boundary());
    WEFT_RETURN_IF_ERROR(m.execute(kReduceScatter, Algorithm::kRing, internal::plan_reduce_scatter_ring,
                                   m.identity_group, recv_count, 0, m.work.data(), all, t, op, o));
  }
  std::memcpy(recv, m.work.data() + static_cast<size_t>(rank()) * block, block);
  return ok_status();
}

Status Communicator::allgather(const void* send, void* recv, size_t send_count, DataType t,
                               const CollectiveOptions& o) {
  Impl& m = *impl_;
  WEFT_RETURN_IF_ERROR(m.usable());
  WEFT_RETURN_IF_ERROR(check_type("allgather", t));
  WEFT_RETURN_IF_ERROR(check_bytes("allgather", "send_count", send_count, t, static_cast<size_t>(size())));
  WEFT_RETURN_IF_ERROR(check_buffers("allgather", send_count, {{"send", send}, {"recv", recv}}));
  Algorithm a = o.algorithm;
  if (a != Algorithm::kAuto && a != Algorithm::kRing && a != Algorithm::kHierarchical) {
    return invalid_argument(
        fmt::format("allgather: '{}' is not an allgather algorithm (ring, hierarchical)", algorithm_name(a)));
  }
  if (send_count == 0) return ok_status();
  const size_t block = send_count * dtype_size(t), all = block * static_cast<size_t>(size());
  char* out = static_cast<char*>(recv) + static_cast<size_t>(rank()) * block;
  if (size() == 1) {
    if (out != send) std::memmove(out, send, block);
    return ok_status();
  }
  if (a == Algorithm::kAuto) a = m.hosts_equal() ? Algorithm::kHierarchical : Algorithm::kRing;
  if (a == Algorithm::kHierarchical && internal::equal_hosts(m.host_of).empty()) {
    return failed_precondition("allgather: hierarchical needs the same number of ranks on every host");
  }
  if (m.epochs) WEFT_RETURN_IF_ERROR(m.epoch_boundary());
  if (out != send) std::memmove(out, send, block);
  const MakePlan make = a == Algorithm::kRing ? internal::plan_allgather_ring : internal::plan_allgather_hierarchical;
  return m.execute(kAllgather, a, make, m.identity_group, send_count, 0, recv, all, t, ReduceOp::kSum, o);
}

Status Communicator::broadcast(void* buf, size_t count, DataType t, int root, const CollectiveOptions& o) {
  Impl& m = *impl_;
  WEFT_RETURN_IF_ERROR(m.usable());
  WEFT_RETURN_IF_ERROR(check_type("broadcast", t));
  WEFT_RETURN_IF_ERROR(check_bytes("broadcast", "count", count, t, 1));
  if (root < 0 || root >= size()) return invalid_argument(fmt::format("broadcast: root {} is outside [0, {})", root, size()));
  WEFT_RETURN_IF_ERROR(check_buffers("broadcast", count, {{"buf", buf}}));
  if (o.algorithm != Algorithm::kAuto && o.algorithm != Algorithm::kBinomial) {
    return invalid_argument(fmt::format("broadcast: '{}' is not a broadcast algorithm (binomial)", algorithm_name(o.algorithm)));
  }
  if (count == 0 || size() == 1) return ok_status();
  if (m.epochs) WEFT_RETURN_IF_ERROR(m.epoch_boundary());
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
