// The planner's output stage (planner_internal.h): rounds over the chosen
// paths, the plan file's content, and the checker's verdict on it.
#include <algorithm>
#include <future>
#include <span>
#include <system_error>

#include "planner_internal.h"
#include "weft/routing/link_load.h"
#include "weft/routing/paths.h"
#include "weft/routing/planes.h"
#include "weft/routing/rounds.h"

namespace weft::routing::planner_internal {
namespace {

// Below this many flows the plan is built and judged on one thread.
constexpr size_t kParallelJudgeFlows = 4096;

// Serves step si's flows from one path per planned flow, each a span of a
// pool of directed links (a vector per flow costs an allocation each, ~10^6
// of them at 65,536 endpoints; the checker's buffers keep their capacity).
class StepPathsRouter final : public Router {
 public:
  StepPathsRouter(const std::vector<std::vector<int>>& step_ids, const std::vector<int>& pool,
                  const std::vector<uint32_t>& at)
      : step_ids_(step_ids), pool_(pool), at_(at) {}
  std::string_view name() const override { return "plan"; }
  Status route_step(const Step& step, int si, std::vector<Path>& paths) override {
    const auto& ids = step_ids_[static_cast<size_t>(si)];
    if (ids.size() != step.flows.size()) return internal_error("step flows changed under the planner");
    for (size_t i = 0; i < ids.size(); ++i) {
      const auto id = static_cast<size_t>(ids[i]);
      paths[i].dlinks.assign(pool_.begin() + at_[id], pool_.begin() + at_[id + 1]);
    }
    return ok_status();
  }

 private:
  const std::vector<std::vector<int>>& step_ids_;
  const std::vector<int>& pool_;       // directed links of every flow's path
  const std::vector<uint32_t>& at_;    // flow i's: pool_[at_[i], at_[i + 1])
};

}  // namespace

int class_rounds(const topo::Fabric& f, const Chosen& c, const std::vector<int>& ids, RoundAssigner& assigner,
                 std::vector<int>& round) {
  std::vector<int> links;
  for (int id : ids) {
    const auto sw = c.path(c.flows[static_cast<size_t>(id)]);
    for (size_t k = 0; k + 1 < sw.size(); ++k) {
      const int from = f.switch_vertex(sw[k]);
      links.push_back(f.directed_from(*f.link_between(from, f.switch_vertex(sw[k + 1])), from));
    }
  }
  std::vector<RoundFlow> rf;
  rf.reserve(ids.size());
  size_t at = 0;
  for (int id : ids) {
    const FlowInfo& fi = c.flows[static_cast<size_t>(id)];
    const size_t n = fi.path_len > 0 ? fi.path_len - 1 : 0;
    rf.push_back({fi.src, fi.dst, std::span<const int>(links).subspan(at, n)});
    at += n;
  }
  return assigner.assign(rf, round);
}

bool rounds_take_no_longer(const topo::Fabric& f, const Chosen& c, const std::vector<int>& ids,
                           const std::vector<int>& round) {
  // (directed link, round) of every link each flow crosses, access links
  // included: planes.h brings two flows to one port, whatever their rounds.
  PathFinder pf(f);
  std::vector<std::pair<int, int>> uses;
  for (size_t i = 0; i < ids.size(); ++i) {
    const FlowInfo& fi = c.flows[static_cast<size_t>(ids[i])];
    if (in_nic(fi)) continue;
    const auto path = route_path(pf, fi.src_nic, fi.dst_nic, c.path(fi));
    if (!path) return false;  // emit_plan routes it again and names the error
    for (int dl : path->dlinks) uses.emplace_back(dl, round[i]);
  }
  std::sort(uses.begin(), uses.end());
  // Time in units of one flow's bytes at 1 Gbit/s: a link's flows of one
  // round share it, so that round lasts at least count / rate there.
  std::vector<double> round_time;
  double sharing = 0;
  for (size_t lo = 0; lo < uses.size();) {
    const int dl = uses[lo].first;
    const double gbps = f.links[static_cast<size_t>(dl / 2)].gbps;
    double total = 0;
    while (lo < uses.size() && uses[lo].first == dl) {
      size_t hi = lo;
      while (hi < uses.size() && uses[hi] == uses[lo]) ++hi;
      const auto r = static_cast<size_t>(uses[lo].second);
      if (round_time.size() <= r) round_time.resize(r + 1, 0.0);
      const double t = static_cast<double>(hi - lo) / gbps;
      round_time[r] = std::max(round_time[r], t);
      total += t;
      lo = hi;
    }
    sharing = std::max(sharing, total);
  }
  double in_rounds = 0;
  for (double t : round_time) in_rounds += t;
  return in_rounds <= sharing * (1 + 1e-9);
}

bool assign_class_rounds(const topo::Fabric& f, Chosen& c, const std::vector<int>& ids, RoundAssigner& assigner,
                         std::vector<int>& round) {
  if (class_rounds(f, c, ids, assigner, round) == 1 || !rounds_take_no_longer(f, c, ids, round)) return false;
  for (size_t i = 0; i < ids.size(); ++i) c.flows[static_cast<size_t>(ids[i])].round = round[i];
  return true;
}

Status emit_plan(const topo::Fabric& f, const ranking::RankOrder& order, const Schedule& s,
                 const PlannerOptions& opt, const std::vector<uint16_t>& dports, Chosen& c, bool has_rounds,
                 bool second_thread, PlannedRoutes& out) {
  // The judge (a pass over every path and step) and the plan's flows (an
  // allocation per string) read different members of the flows: on two
  // threads where the planner has a second one.
  auto judge = [&]() -> Result<LoadReport> {
    // The judge: the link-load checker over the plan's paths (the switches
    // just written, as indices: make_plan_router would look the names up).
    PathFinder pf(f);
    std::vector<int> pool;
    std::vector<uint32_t> at(c.flows.size() + 1, 0);
    pool.reserve(c.path_pool.size() + 2 * c.flows.size());
    for (size_t i = 0; i < c.flows.size(); ++i) {
      if (!in_nic(c.flows[i])) {  // in-NIC flows have no path (planes.h)
        WEFT_ASSIGN_OR_RETURN(const Path path, route_path(pf, c.flows[i].src_nic, c.flows[i].dst_nic, c.path(c.flows[i])));
        pool.insert(pool.end(), path.dlinks.begin(), path.dlinks.end());
      }
      at[i + 1] = static_cast<uint32_t>(pool.size());
    }
    StepPathsRouter router(c.step_ids, pool, at);
    // The plan's rounds onto a copy of the schedule, as apply_plan_rounds
    // would copy them from the plan (every flow of a step is one of the
    // planner's, step_ids in the step's order).
    Schedule with_rounds;  // a copy only when the plan has rounds
    if (has_rounds) {
      with_rounds = s;
      for (size_t si = 0; si < with_rounds.steps.size(); ++si) {
        auto& flows = with_rounds.steps[si].flows;
        const auto& ids = c.step_ids[si];
        for (size_t k = 0; k < flows.size(); ++k) flows[k].round = c.flows[static_cast<size_t>(ids[k])].round;
      }
    }
    return check_link_load(f, order, has_rounds ? with_rounds : s, router);
  };
  std::future<Result<LoadReport>> judged;
  if (second_thread && c.flows.size() >= kParallelJudgeFlows) {
    try {
      judged = std::async(std::launch::async, judge);
    } catch (const std::system_error&) {  // no thread to be had: judged below, here
    }
  }
  RoutePlan& p = out.plan;
  p.collective = std::string(collective_name(s.collective));
  p.topology = f.name;
  p.ranks = s.ranks;
  // Built in place: a PlanFlow is ~330 bytes and a plan holds ~10^6 of them.
  // Not advised onto huge pages: on a VM whose balloon reports free memory
  // to the host, a fresh 2 MiB page is faulted in by the host too, and 3-6x
  // slower per byte than 4 KiB pages (bench/results/2026-11-27-planner-memory.md).
  p.flows.reserve(c.flows.size());
  p.flows.resize(c.flows.size());
  for (size_t i = 0; i < c.flows.size(); ++i) {
    FlowInfo& fi = c.flows[i];
    PlanFlow& pf = p.flows[i];
    pf.src_rank = fi.src, pf.dst_rank = fi.dst;
    const auto& sn = f.nics[static_cast<size_t>(fi.src_nic)];
    const auto& dn = f.nics[static_cast<size_t>(fi.dst_nic)];
    pf.src_host = f.hosts[static_cast<size_t>(sn.host)].name, pf.src_nic = sn.name;
    pf.dst_host = f.hosts[static_cast<size_t>(dn.host)].name, pf.dst_nic = dn.name;
    pf.protocol = opt.protocol;
    pf.sport = fi.sport;
    pf.dqpn = fi.dqpn;
    pf.dport = dports[static_cast<size_t>(fi.dst)];
    pf.path.reserve(fi.path_len);
    for (int sw : c.path(fi)) pf.path.push_back(f.switches[static_cast<size_t>(sw)].name);
    pf.conn = fi.conn, pf.qp = fi.qp;
    // The NCCL plugin finds its QPs by NIC address (docs/nccl.md); on a
    // multi-plane fabric a rank owns an address per plane and the library
    // connects from and to the flow's plane's (docs/collectives-setup.md
    // "Several addresses, several planes"): dn is already the port on the
    // source's plane (planes.h).
    const bool planes = f.nic_plane(fi.src_nic) >= 0;
    if (s.collective == Collective::kNcclRing || planes) pf.src_addr = sn.address, pf.dst_addr = dn.address;
    pf.steps = std::move(fi.steps);
    if (fi.round != 0) pf.rounds.assign(pf.steps.size(), fi.round);  // as the file has it (round 0: omitted)
    out.stats.fabric_flows += pf.path.size() > 1;
  }
  out.stats.flows = static_cast<int>(p.flows.size());
  WEFT_ASSIGN_OR_RETURN(auto rep, judged.valid() ? judged.get() : judge());
  for (const auto& sl : rep.steps) {
    p.steps.push_back({sl.step, sl.phase, sl.max_load, sl.lower_bound, sl.rounds});
    out.stats.steps_at_bound += at_bound(sl);
    out.stats.steps_in_rounds += sl.rounds > 1;
    out.stats.max_single_round_bound = std::max(out.stats.max_single_round_bound, sl.single_round_bound);
  }
  out.stats.max_rounds = rep.max_rounds;
  out.stats.steps = static_cast<int>(rep.steps.size());
  out.stats.max_load = rep.max_load;
  out.stats.max_lower_bound = rep.max_lower_bound;
  return ok_status();
}

}  // namespace weft::routing::planner_internal
