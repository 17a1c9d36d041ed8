#include "weft/routing/compare.h"

#include <fmt/format.h>

#include "weft/routing/auto_order.h"
#include "weft/routing/hybrid_schedule.h"
#include "weft/routing/plan_router.h"
#include "weft/routing/planner.h"

namespace weft::routing {

std::string_view sim_collective_name(SimCollective c) {
  switch (c) {
    case SimCollective::kHd: return "allreduce-hd";
    case SimCollective::kRing: return "allreduce-ring";
    case SimCollective::kHybrid: return "allreduce-hybrid";
    case SimCollective::kNcclRing: return "nccl-ring";
  }
  return "allreduce-hd";
}

std::optional<SimCollective> parse_sim_collective(std::string_view s) {
  for (auto c : {SimCollective::kHd, SimCollective::kRing, SimCollective::kHybrid, SimCollective::kNcclRing}) {
    if (sim_collective_name(c) == s) return c;
  }
  return std::nullopt;
}

namespace {

Collective collective_of(SimCollective c) {
  switch (c) {
    case SimCollective::kHd: return Collective::kAllreduceHd;
    case SimCollective::kRing: return Collective::kAllreduceRing;
    case SimCollective::kHybrid: return Collective::kAllreduceHybrid;
    case SimCollective::kNcclRing: return Collective::kNcclRing;
  }
  return Collective::kAllreduceHd;
}

struct Job {
  Schedule fabric_part;
  double intra_seconds = 0;  // hybrid: both intra-host phases
};

Result<Job> job_for(const topo::Fabric& f, const ranking::RankOrder& order, const CompareOptions& opt) {
  const uint64_t count = opt.bytes / 4;
  Job j;
  if (opt.collective == SimCollective::kHybrid) {
    WEFT_ASSIGN_OR_RETURN(auto h, build_hybrid_schedule(f, order, count, 4));
    j.fabric_part = std::move(h.inter_host);
    j.intra_seconds = 2.0 * static_cast<double>(h.intra_bytes) / (opt.shm_gbps * 1e9 / 8);
    return j;
  }
  const Collective c = collective_of(opt.collective);
  WEFT_ASSIGN_OR_RETURN(j.fabric_part, build_schedule(c, order.size(), count, 4,
                                                      c == Collective::kNcclRing ? opt.nccl : NcclRingShape{}));
  return j;
}

Result<CaseResult> run_case(const char* name, const topo::Fabric& f, const ranking::RankOrder& order, const Job& job,
                            Router& router, const CompareOptions& opt) {
  WEFT_ASSIGN_OR_RETURN(auto r, simulate(f, order, job.fabric_part, router, opt.sim));
  CaseResult c;
  c.name = name;
  c.seconds = r.seconds + job.intra_seconds;
  for (const auto& st : r.steps) c.max_load = std::max(c.max_load, st.max_load);
  c.utilisation = r.utilisation();
  return c;
}

void finish(CaseResult& c, const CompareOptions& opt, int ranks) {
  c.algbw = algbw(opt.bytes, c.seconds);
  c.busbw = allreduce_busbw(opt.bytes, ranks, c.seconds);
}

// (a) and (b): the mean time over `trials` ECMP seeds, under the fabric's
// hash model (opt.hash; E-ECMP: a random QPN per connection too).
Result<CaseResult> ecmp_case(const char* name, const topo::Fabric& f, const ranking::RankOrder& order, const Job& job,
                             const CompareOptions& opt) {
  CaseResult first;
  double total = 0;
  for (int t = 0; t < opt.trials; ++t) {
    WEFT_ASSIGN_OR_RETURN(auto router,
                          make_ecmp_router(f, order, {.hash = opt.hash, .seed = opt.seed + static_cast<uint32_t>(t)}));
    WEFT_ASSIGN_OR_RETURN(auto c, run_case(name, f, order, job, *router, opt));
    total += c.seconds;
    if (t == 0) first = std::move(c);
  }
  first.seconds = total / opt.trials;
  return first;
}

}  // namespace

Result<Comparison> compare_routings(const topo::Fabric& f, const std::vector<int>& allocation,
                                    const CompareOptions& opt) {
  if (opt.trials < 1) return invalid_argument(fmt::format("trials must be >= 1 (got {})", opt.trials));
  if (opt.bytes < 4 || opt.bytes % 4) return invalid_argument(fmt::format("message size {} is not a positive multiple of 4 bytes", opt.bytes));
  if (opt.shm_gbps <= 0) return invalid_argument("intra-host bandwidth must be > 0");
  Comparison out;
  out.endpoints = static_cast<int>(allocation.size());
  WEFT_ASSIGN_OR_RETURN(auto input, ranking::rank(f, allocation, ranking::RankAlgo::kNaive));
  WEFT_ASSIGN_OR_RETURN(auto leafsets, ranking::rank(f, allocation, ranking::RankAlgo::kClos));
  // weft's order for the collective, resolved as weft rank resolves auto
  // for it (auto_order.h: the ring order for rings, leaf by leaf; on rail
  // fabrics leaf sets where HD's bound is lower).
  WEFT_ASSIGN_OR_RETURN(auto chosen, auto_order(f, allocation, collective_of(opt.collective), opt.nccl));
  const ranking::RankOrder weft_order = std::move(chosen.order);

  WEFT_ASSIGN_OR_RETURN(auto model, make_hash(opt.hash, opt.seed));
  WEFT_ASSIGN_OR_RETURN(auto job_a, job_for(f, input, opt));
  WEFT_ASSIGN_OR_RETURN(auto a, ecmp_case("(a) default", f, input, job_a, opt));
  WEFT_ASSIGN_OR_RETURN(auto job_b, job_for(f, leafsets, opt));
  WEFT_ASSIGN_OR_RETURN(auto b, ecmp_case("(b) leaf sets + ECMP", f, leafsets, job_b, opt));

  // (c): plan against the fabric's hash model (the one ECMP trial 0 uses),
  // then route by looking the planned ports (and QPNs, E-ECMP: the default
  // pool, qpn_pool.h) up in it again.
  WEFT_ASSIGN_OR_RETURN(auto job_c, job_for(f, weft_order, opt));
  auto table = make_model_path_table(f, std::move(model));
  PlannerOptions po;
  po.ports_per_pair = opt.ports_per_pair;
  if (opt.collective == SimCollective::kNcclRing) po.ports_per_pair = nccl_ring_ports_per_pair(opt.nccl, po.ports_per_pair);
  WEFT_ASSIGN_OR_RETURN(auto planned, plan_routes(f, weft_order, job_c.fabric_part, *table, po));
  WEFT_ASSIGN_OR_RETURN(auto replay, make_table_router(f, weft_order, planned.plan, *table));
  Job job_rounds = job_c;  // (d) stays without rounds: a crossbar needs none
  WEFT_RETURN_IF_ERROR(apply_plan_rounds(planned.plan, job_rounds.fabric_part));
  WEFT_ASSIGN_OR_RETURN(auto c, run_case("(c) weft", f, weft_order, job_rounds, *replay, opt));
  c.lower_bound = planned.stats.max_lower_bound;
  c.rounds = planned.stats.max_rounds;
  c.steps_in_rounds = planned.stats.steps_in_rounds;
  c.single_round_bound = planned.stats.max_single_round_bound;
  c.steps_above_bound = planned.stats.steps - planned.stats.steps_at_bound;

  auto crossbar = make_crossbar_router(f, weft_order);
  WEFT_ASSIGN_OR_RETURN(auto d, run_case("(d) ideal switch", f, weft_order, job_c, *crossbar, opt));

  out.cases = {std::move(a), std::move(b), std::move(c), std::move(d)};
  for (auto& cr : out.cases) finish(cr, opt, out.endpoints);
  return out;
}

}  // namespace weft::routing
