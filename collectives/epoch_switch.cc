// Switching to a new plan epoch mid-job (docs/collectives-routes.md "Plan
// epochs"): every rank at the same call, or none.
//
// Ranks see the file at different moments (a host's file system, the
// poll interval, a rank busy in a long call), and a rank that runs a call
// on other connections or gates than its peers hangs or corrupts the
// result. A rank's own clock cannot pick the call either: ranks differ in
// when they reach a given call. So the ranks agree, at calls chosen by a
// count every rank keeps alike: at call boundaries `countdown` calls
// apart, a butterfly AllReduce (MAX) of three numbers:
//   the epoch this rank holds (the one it runs, or a newer valid one read),
//   minus it (the MAX of which is minus the MIN over ranks),
//   minus the calls this rank proposes until the next agreement (calls
//   per plan_poll at the pace of the last interval; the MIN is taken).
// All equal and newer than the one run: every rank switches now, before
// this call. Newer on some ranks only: the ranks behind read the file at
// once, waiting for the newest epoch up to a quarter of the call timeout
// (at most 1 s, once per epoch), and a second round (the same numbers)
// decides again; still unequal, no rank switches, and they agree again at
// the next agreement. The decision is a function of the AllReduce's result
// alone, which every rank has the same, so no rank can switch alone.
//
// The interval keeps the cost near one 24-byte AllReduce per plan_poll
// whatever the call size, and a new epoch is run about 2 x plan_poll after
// it was published (one poll to see it, one to agree) plus the call then
// running.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <thread>

#include <fmt/format.h>

#include "communicator_impl.h"
#include "idle_wait.h"
#include "stall.h"

namespace weft::coll {
namespace {
constexpr int64_t kMaxInterval = 4096;  // calls between agreements, at most

// A flow's route as the transport takes it: its source port and, on a
// multi-plane fabric, its addresses (tcp/address_choice.h).
void set_route(PeerRoute& r, const routing::PlanFlow& f) {
  r.sport = f.sport, r.src_addr = f.src_addr, r.dst_addr = f.dst_addr;
}
// A connection moves when its port or either address does.
bool same_route(const routing::PlanFlow* before, const routing::PlanFlow& f) {
  return before != nullptr && before->sport == f.sport && before->src_addr == f.src_addr &&
         before->dst_addr == f.dst_addr;
}
}  // namespace

// Every rank reads an epochs file, or none: a rank that agrees while its
// peers do not waits for them forever. Rank 0's choice is published; a rank
// that differs fails create() naming both.
Status Communicator::Impl::setup_epochs(Store& store, Deadline deadline) {
  const std::string key = cfg.store_prefix + "/epochs/0";
  const std::string mine = cfg.plan_epochs.empty() ? "none" : "file";
  if (cfg.rank == 0) {
    WEFT_RETURN_IF_ERROR(store.set_by(key, mine, deadline));
  } else {
    WEFT_ASSIGN_OR_RETURN(const std::string first, store.get(key, deadline));
    if (first != mine) {
      return failed_precondition(fmt::format(
          "rank 0 reads {} plan epochs file and rank {} {}: every rank names one (CommConfig::plan_epochs, "
          "WEFT_PLAN_EPOCHS), or none",
          first == "file" ? "a" : "no", cfg.rank, mine == "file" ? "does" : "does not"));
    }
  }
  if (cfg.plan_epochs.empty()) return ok_status();
  epochs = std::make_unique<Epochs>(internal::PlanEpochFile(cfg.plan_epochs, cfg.job, cfg.plan_poll, cfg.rank, host_of));
  epochs->last = Clock::now();
  return ok_status();
}

Status Communicator::Impl::agree(int64_t (&v)[3]) {
  ++epochs->file.counters().agreements;
  WEFT_ASSIGN_OR_RETURN(const std::vector<int>* group, rank_map(Algorithm::kButterfly));
  CollectiveOptions o;
  o.algorithm = Algorithm::kButterfly;
  constexpr size_t kBytes = sizeof v;
  if (std::optional<Status> s = butterfly_lane(*group, v, 3, kBytes, DataType::kI64, ReduceOp::kMax, o)) return *s;
  return execute(internal::kAllreduce, Algorithm::kButterfly, internal::plan_allreduce_butterfly, *group, 3, 0, v,
                 kBytes, DataType::kI64, ReduceOp::kMax, o);
}

Status Communicator::Impl::agree_on_epoch() {
  Epochs& e = *epochs;
  const uint64_t call = e.calls - 1;
  const auto now = Clock::now();
  e.file.look(now, *cfg.plan, e.epoch, false);
  const auto held = [&] { return static_cast<int64_t>(e.file.held() ? e.file.held()->epoch : e.epoch); };
  // Calls per plan_poll at the pace since the last agreement.
  const auto elapsed_us = std::chrono::duration_cast<std::chrono::microseconds>(now - e.last).count();
  const int64_t poll_us = std::chrono::duration_cast<std::chrono::microseconds>(cfg.plan_poll).count();
  const int64_t pace = elapsed_us <= 0 ? kMaxInterval : static_cast<int64_t>(e.since) * poll_us / elapsed_us;
  // At most twice the last interval: a pace measured over few calls (the
  // first ones connect, allocate) is a poor guess, and a slower pace is
  // taken at once anyway (the MIN over ranks).
  const int64_t most = std::min<int64_t>(kMaxInterval, 2 * static_cast<int64_t>(e.since));
  int64_t v[3] = {held(), -held(), -std::clamp<int64_t>(pace, 1, std::max<int64_t>(most, 1))};
  const auto named = [&](const Status& s) {
    return s.with_context(fmt::format("agreeing on the plan epoch before call {}", call));
  };
  // A switch inside the agreement (in_call_switch.cc) runs it again on a
  // newer epoch, every rank with the result of that run (a rank that was
  // behind joins it with the epoch it now runs): the decisions below
  // compare with the epoch run after it, the same on every rank.
  if (Status s = agree(v); !s) return named(s);
  e.countdown = static_cast<uint64_t>(-v[2]);
  e.since = 0;
  e.last = Clock::now();
  int64_t newest = v[0];
  if (newest <= static_cast<int64_t>(e.epoch)) return ok_status();  // the common case: nothing new anywhere
  if (-v[1] != newest) {
    // Some rank holds a newer epoch than this or another rank: those behind
    // read the file now, a while at most, and all decide once more.
    const bool first = e.waited_for < static_cast<uint64_t>(newest);  // the first round unequal on `newest`
    if (held() < newest) {
      const bool wait = first;
      const auto timeout = cfg.timeout / 4 < std::chrono::milliseconds(1000) ? cfg.timeout / 4
                                                                              : std::chrono::milliseconds(1000);
      const auto until = Clock::now() + (wait ? timeout : std::chrono::milliseconds(0));
      for (;;) {
        e.file.look(Clock::now(), *cfg.plan, e.epoch, true);
        if (held() >= newest || Clock::now() >= until) break;
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
      }
    }
    e.waited_for = std::max(e.waited_for, static_cast<uint64_t>(newest));
    int64_t again[3] = {held(), -held(), 0};
    // Ranks behind waited for the file above, up to a second: that wait is
    // not a stall for in-call switches to act on.
    if (in_call) in_call->quiet = true;
    Status s = agree(again);
    if (in_call) in_call->quiet = false;
    if (!s) return named(s);
    if (-again[1] != again[0]) {
      if (first) {
        spdlog::info("weft: rank {}: the ranks hold plan epochs {} to {} before call {}; they agree again at later calls",
                     cfg.rank, -again[1], again[0], call);
      }
      return ok_status();
    }
    newest = again[0];
    if (newest <= static_cast<int64_t>(e.epoch)) return ok_status();  // adopted inside the agreement
  }
  // Every rank holds `newest`, read from its file and checked there.
  if (!e.file.held()) return internal_error(fmt::format("rank {}: plan epoch {} agreed on is not held", cfg.rank, newest));
  internal::PlanEpoch next = *e.file.held();
  e.file.drop_held();
  return adopt(std::move(next));
}

Status Communicator::Impl::adopt(internal::PlanEpoch next) {
  Epochs& e = *epochs;
  const uint64_t call = e.calls - 1;
  const int n = cfg.size, me = cfg.rank;
  const routing::RoutePlan& old = *cfg.plan;
  // Checked when read (plan_fits); the collective, hence `gated`, is the same.
  WEFT_ASSIGN_OR_RETURN(std::vector<routing::Gate> next_gates, internal::plan_round_gates(next.plan, host_of));
  const Deadline deadline = Clock::now() + cfg.timeout;
  for (size_t t = 0; t < transports.size(); ++t) {
    const std::string_view name = transports[t]->name();
    const std::string proto = name == "tcp" ? "tcp" : name == "verbs" ? "udp" : "";
    if (proto.empty()) continue;
    std::vector<PeerRoute> routes(static_cast<size_t>(n));
    std::vector<int> inbound;
    bool moved = false;
    for (const auto& f : next.plan.flows) {
      if (f.protocol != proto) continue;
      if (f.src_rank == me) {
        set_route(routes[static_cast<size_t>(f.dst_rank)], f);
        moved = moved || !same_route(old.find(me, f.dst_rank), f);
      }
      const auto src = static_cast<size_t>(f.src_rank);
      if (f.dst_rank == me && links.transport_of[src] == static_cast<int>(t) && links.pairs[src] != nullptr) {
        if (!same_route(old.find(f.src_rank, me), f)) inbound.push_back(f.src_rank);
      }
    }
    if (name == "verbs" && moved) {
      spdlog::warn("weft: rank {}: plan epoch {} moves udp flows, but the verbs transport keeps its queue pairs' "
                   "source ports (docs/collectives-routes.md \"Plan epochs\")",
                   me, next.epoch);
    }
    Status s = transports[t]->reroute(routes, inbound, deadline);
    if (s.code() == StatusCode::kDeadlineExceeded) {
      // A peer that does not connect again in time is waited on as in
      // connect_plan_peers: the stall is resolved, naming the stopped rank.
      s = internal::resolve_stall(links, me, inbound.empty() ? -1 : inbound.front(), s,
                                  internal::stall_window(cfg.timeout));
    }
    if (!s) {
      return fail(s.with_context(
          fmt::format("rank {}: switching to plan epoch {} before call {}", me, next.epoch, call)));
    }
    for (int p = 0; p < n; ++p) {
      if (links.transport_of[static_cast<size_t>(p)] == static_cast<int>(t) && links.pairs[static_cast<size_t>(p)]) {
        link(p);
      }
    }
  }
  const uint64_t from = e.epoch;
  const std::string reason = next.reason;
  install_epoch(std::move(next), std::move(next_gates), call, false);
  spdlog::info("weft: rank {} runs plan epoch {} (was {}) from call {}{}{}", me, e.epoch, from, call,
               reason.empty() ? "" : ": ", reason);
  return ok_status();
}

void Communicator::Impl::install_epoch(internal::PlanEpoch next, std::vector<routing::Gate> next_gates, uint64_t call,
                                       bool inside) {
  Epochs& e = *epochs;
  cfg.plan = std::move(next.plan);
  gates = std::move(next_gates);
  // Cached plans hold the old gates; the next calls plan again.
  last_plan = nullptr;
  plans.clear();
  e.epoch = next.epoch;
  auto& c = e.file.counters();
  ++c.switches;
  if (inside) ++c.in_call_switches;
  c.epoch = e.epoch;
  if (cfg.trace) {
    TraceEvent ev;
    ev.kind = TraceEvent::kEpoch;
    ev.phase = inside ? "plan-epoch-in-call" : "plan-epoch";
    ev.epoch = e.epoch;
    ev.call = call;
    cfg.trace(cfg.rank, ev);
  }
}

std::vector<PeerRoute> Communicator::Impl::routes_of(const routing::RoutePlan& plan, const std::string& proto) const {
  std::vector<PeerRoute> routes(static_cast<size_t>(cfg.size));
  for (const auto& f : plan.flows) {
    if (f.protocol == proto && f.src_rank == cfg.rank) set_route(routes[static_cast<size_t>(f.dst_rank)], f);
  }
  return routes;
}

}  // namespace weft::coll
