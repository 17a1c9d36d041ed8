// In-call plan switches (docs/collectives-routes.md "Inside a stalled call"):
// a call that a cut link stalls is abandoned by every rank and run again,
// exactly, on the newer plan epoch the watcher published.
//
// Why inside the call: a cut link is a gray failure. The connections whose
// planned ports cross it stay open while TCP retransmits into the void, so
// the call running on them never ends, and the ranks never reach the call
// boundary where epoch_switch.cc would adopt the new plan.
//
// The design, and why each part is needed:
//   1. Trigger (tcp_rebuild.cc). A wait that has moved nothing for
//      CommConfig::switch_stall calls probe_epoch(): one look at the epochs
//      file (PlanEpochFile::look: a stat(2) at most every plan_poll). A
//      newer valid epoch E makes the transport send E to every peer (kSwitch
//      notices, relayed once by each rank that hears one, over whatever
//      connections still work) and abandon the wait. Any rank that hears E
//      abandons its call at its next wait, stalled or progressing.
//   2. Which call. An AllReduce's result on any rank needs every rank's
//      input, so when one rank is in call k no rank has finished call k+1:
//      the ranks are in k or k+1 (k counts every call execute runs,
//      agreements included, alike on every rank). Every rank keeps the last
//      two calls: kind, arguments and, for an AllReduce, a copy of its
//      input. That copy is needed even for an out-of-place call: a rank in
//      k+1 takes part again in call k, whose send buffer the application
//      may have changed since it returned.
//   3. Fresh connections. Every rank closes every TCP connection (queued
//      and unread bytes of the abandoned call go with them) and connects
//      its peers again on E's ports, with Hellos of a new generation; a
//      connection of an older generation is refused (tcp_rebuild.cc). No
//      byte of the abandoned call can reach the re-run.
//   4. Agreement, on the fresh connections: one butterfly AllReduce (MAX)
//      of {E, -E, k, -k}. Equal epochs on every rank, and the lowest and
//      highest call: the ranks at the lowest run it again from their kept
//      input; a rank one call ahead runs the lowest with its kept input too
//      (its result, already returned, is dropped) and then its own call.
//      So every rank runs the same calls on the same plan, and every result
//      is that of the inputs (the algorithm and its reduce order are the
//      plan's, not the ports').
//   5. Bounds. The switch and the re-runs share the call's deadline; while
//      they run no further switch starts, so a re-run that stalls again
//      fails at its timeout with the stall verdict (stall.h). Without a
//      newer epoch nothing changes: the call fails as before. A rank that
//      dies meanwhile leaves its peers waiting for its connections, and
//      they fail naming it at the deadline; one that closes its connections
//      without a switch notice following within the grace (a quarter of the
//      timeout, at most 1 s) fails them then.
// Invariants: no rank runs a call on another epoch than its peers' (the
// agreement checks E); no byte of an abandoned call is read after it (new
// connections, older generations refused); a call's input is restored
// before it runs again.
//
// Scope: every peer over TCP (cfg.transport "tcp", or "auto" with one rank
// per host): shm's rings and loopback have no routes to change, and the
// bytes of the abandoned call would stay in them; verbs keeps its queue
// pairs. Only AllReduce calls (barriers and epoch agreements are ones) are
// run again; a switch that finds another collective in either of the last
// two calls fails the call as before. Cost per AllReduce: one copy of its
// bytes and two calls' worth of memory; none without a plan epochs file or
// with CommConfig::in_call_switch false.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <new>
#include <thread>

#include <fmt/format.h>

#include "communicator_impl.h"

namespace weft::coll {

void Communicator::Impl::setup_in_call() {
  if (!epochs || !cfg.in_call_switch) return;
  // The same on every rank: it depends on what every rank knows alike.
  const bool tcp = cfg.transport == "tcp" || (cfg.transport == "auto" && host_count == cfg.size);
  if (!tcp) {
    if (cfg.rank == 0) {
      spdlog::info("weft: in-call plan switches need every peer over tcp (transport {}{}): a call that a cut link "
                   "stalls fails at its timeout",
                   cfg.transport, cfg.transport == "verbs" ? ", whose queue pairs keep their ports" : "");
    }
    return;
  }
  for (const auto& t : transports) {
    if (!t->can_rebuild()) return;
  }
  in_call = std::make_unique<InCall>();
  in_call->grace = std::min<std::chrono::milliseconds>(cfg.timeout / 4, std::chrono::milliseconds(1000));
  for (const auto& t : transports) {
    t->set_switch_probe(cfg.switch_stall, in_call->grace, [this] { return probe_epoch(); });
  }
}

uint64_t Communicator::Impl::probe_epoch() {
  InCall& ic = *in_call;
  if (ic.recovering || ic.quiet || ic.seq == 0) return 0;
  // Only AllReduce calls can be run again, the current one and the one
  // before (which a rank still in it may need).
  if (ic.calls[(ic.seq - 1) % 2].coll != internal::kAllreduce) return 0;
  if (ic.seq > 1 && ic.calls[ic.seq % 2].coll != internal::kAllreduce) return 0;
  epochs->file.look(Clock::now(), *cfg.plan, epochs->epoch, false);
  return epochs->file.held() ? epochs->file.held()->epoch : 0;
}

Status Communicator::Impl::record_call(CallRecord r, const void* data) {
  InCall& ic = *in_call;
  CallRecord& slot = ic.calls[ic.seq % 2];
  // The copy's room first, so that running out of memory leaves the slot
  // as it was (and is a Status, as for scratch: Impl::allocate).
  if (r.coll == internal::kAllreduce && slot.input.size() < r.bytes) {
    try {
      slot.input.resize(r.bytes);
    } catch (const std::bad_alloc&) {
      return io_error(fmt::format("rank {}: {} bytes for the copy of an allreduce's input (in-call plan switches) "
                                  "cannot be allocated",
                                  cfg.rank, r.bytes),
                      ENOMEM);
    }
  }
  std::vector<char> input = std::move(slot.input);
  slot = std::move(r);
  slot.seq = ++ic.seq;
  slot.started = Clock::now();
  if (slot.coll == internal::kAllreduce) {
    if (input.size() < slot.bytes) input.resize(slot.bytes);
    std::memcpy(input.data(), data, slot.bytes);
  }
  slot.input = std::move(input);
  return ok_status();
}

Status Communicator::Impl::switch_inside(const Status& why, void* data) {
  InCall& ic = *in_call;
  const CallRecord& cur = ic.calls[(ic.seq - 1) % 2];
  const auto give_up = [&](const Status& s) { return fail_call(s, cur.coll, cur.a, cur.count, cur.t, cur.op); };
  const auto requested = [&] {
    uint64_t e = 0;
    for (const auto& t : transports) e = std::max(e, t->switch_requested());
    return e;
  };
  const auto abandoned_at = Clock::now();
  // A peer that closed its connections may be rebuilding them for a switch
  // whose notice is still on its way.
  if (requested() == 0 && why.code() != StatusCode::kDeadlineExceeded) {
    const auto until = std::min(cur.deadline, abandoned_at + ic.grace);
    while (requested() == 0 && Clock::now() < until) {
      bool alive = true;
      for (const auto& t : transports) alive = alive && (t->poll().status().is_ok() || t->switch_requested() != 0);
      if (!alive) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }
  const uint64_t to = requested();
  if (to == 0) return give_up(why);
  int origin = -1;
  for (const auto& t : transports) origin = std::max(origin, t->switch_origin());
  Epochs& e = *epochs;
  const uint64_t from = e.epoch, call = e.calls == 0 ? 0 : e.calls - 1;
  // The epoch, from this rank's own file: a rank that heard of it from a
  // peer may see it a little later.
  const auto read_until = std::min(cur.deadline, Clock::now() + ic.grace);
  for (;;) {
    e.file.look(Clock::now(), *cfg.plan, e.epoch, true);
    if (e.file.held() && e.file.held()->epoch >= to) break;
    if (Clock::now() >= read_until) {
      return give_up(failed_precondition(fmt::format(
          "rank {} switched the call to plan epoch {}, which rank {} cannot read in {} (held: {})", origin, to,
          cfg.rank, cfg.plan_epochs, e.file.held() ? std::to_string(e.file.held()->epoch) : "none newer")));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  internal::PlanEpoch next = *e.file.held();
  e.file.drop_held();
  const uint64_t epoch = next.epoch;
  Result<std::vector<routing::Gate>> next_gates = internal::plan_round_gates(next.plan, host_of);
  if (!next_gates) return give_up(next_gates.status());
  const std::vector<PeerRoute> routes = routes_of(next.plan, "tcp");
  const uint32_t generation = ++ic.generation;
  for (size_t t = 0; t < transports.size(); ++t) {
    if (Status s = transports[t]->rebuild(routes, generation, cur.deadline); !s) {
      return give_up(s.with_context(fmt::format("rank {}: reconnecting for plan epoch {} inside a call", cfg.rank, epoch)));
    }
  }
  for (int p = 0; p < cfg.size; ++p) {
    if (p != cfg.rank && links.transport_of[static_cast<size_t>(p)] >= 0) link(p);
  }
  install_epoch(std::move(next), std::move(*next_gates), call, true);
  ic.recovering = true;
  const auto left = [&](const CallRecord& r) {
    CollectiveOptions o = r.o;
    o.timeout = std::max(std::chrono::milliseconds(1),
                         std::chrono::duration_cast<std::chrono::milliseconds>(cur.deadline - Clock::now()));
    return o;
  };
  // Every rank: the same epoch, and which calls to run again.
  int64_t v[4] = {static_cast<int64_t>(epoch), -static_cast<int64_t>(epoch), static_cast<int64_t>(ic.seq),
                  -static_cast<int64_t>(ic.seq)};
  CollectiveOptions ao = left(cur);
  ao.algorithm = Algorithm::kButterfly;
  Result<const std::vector<int>*> bgroup = rank_map(Algorithm::kButterfly);
  Status s = bgroup.status();
  if (s) {
    s = execute(internal::kAllreduce, Algorithm::kButterfly, internal::plan_allreduce_butterfly, **bgroup, 4, 0, v,
                sizeof v, DataType::kI64, ReduceOp::kMax, ao);
  }
  const auto first = static_cast<uint64_t>(-v[3]), last = static_cast<uint64_t>(v[2]);
  if (s && v[0] != -v[1]) {
    s = give_up(failed_precondition(fmt::format("the ranks switched to plan epochs {} to {} inside one call", -v[1], v[0])));
  } else if (s && (last > first + 1 || ic.seq < first)) {
    s = give_up(internal_error(fmt::format("the ranks were in calls {} to {} at an in-call switch", first, last)));
  }
  // A rank one call ahead takes part in the lowest call again; its result
  // was returned already and is dropped.
  if (s && ic.seq == first + 1) {
    CallRecord& prev = ic.calls[(first - 1) % 2];
    if (prev.coll != internal::kAllreduce || prev.seq != first) {
      s = give_up(failed_precondition("the call before an in-call switch was not an AllReduce: it cannot run again"));
    } else {
      s = execute(prev.coll, prev.a, prev.make, *prev.group, prev.count, prev.root, prev.input.data(), prev.bytes,
                  prev.t, prev.op, left(prev));
    }
  }
  if (s) {
    if (cur.coll != internal::kAllreduce) {
      s = give_up(failed_precondition("the call abandoned for an in-call switch is not an AllReduce: it cannot run again"));
    } else {
      std::memcpy(data, cur.input.data(), cur.bytes);
      s = execute(cur.coll, cur.a, cur.make, *cur.group, cur.count, cur.root, data, cur.bytes, cur.t, cur.op, left(cur));
    }
  }
  ic.recovering = false;
  if (!s) return s;  // execute failed the communicator with the call named
  spdlog::info("weft: rank {} abandoned call {} on plan epoch {} and re-ran it on epoch {} (stalled {} ms; rank {} "
               "found the epoch; switch took {} ms)",
               cfg.rank, call, from, epoch,
               std::chrono::duration_cast<std::chrono::milliseconds>(abandoned_at - cur.started).count(), origin,
               std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - abandoned_at).count());
  return ok_status();
}

}  // namespace weft::coll
