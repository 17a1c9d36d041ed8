// Reading plan epochs (plan_epochs.h).
#include "plan_epochs.h"

#include <sys/stat.h>

#include <fstream>
#include <map>
#include <sstream>
#include <tuple>

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "weft/routing/gates.h"
#include "weft/routing/schedule.h"

namespace weft::coll::internal {

Result<PlanEpoch> parse_plan_epoch(const std::string& text) {
  const nlohmann::json doc = nlohmann::json::parse(text, nullptr, false);
  if (doc.is_discarded()) return invalid_argument("not JSON");
  if (!doc.is_object()) return invalid_argument("/: not an object");
  const auto field = [&](const char* name) -> const nlohmann::json* {
    auto it = doc.find(name);
    return it == doc.end() ? nullptr : &*it;
  };
  const nlohmann::json* version = field("version");
  if (version == nullptr || !version->is_number_integer() || version->get<int64_t>() != 1) {
    return invalid_argument("/version: must be 1");
  }
  PlanEpoch e;
  const nlohmann::json* job = field("job");
  if (job == nullptr || !job->is_string()) return invalid_argument("/job: missing or not a string");
  e.job = job->get<std::string>();
  const nlohmann::json* epoch = field("epoch");
  if (epoch == nullptr || !epoch->is_number_unsigned()) return invalid_argument("/epoch: missing or not unsigned");
  e.epoch = epoch->get<uint64_t>();
  if (e.epoch > static_cast<uint64_t>(INT64_MAX)) return invalid_argument(fmt::format("/epoch: {} is too large", e.epoch));
  if (const nlohmann::json* reason = field("reason"); reason != nullptr) {
    if (!reason->is_string()) return invalid_argument("/reason: not a string");
    e.reason = reason->get<std::string>();
  }
  const nlohmann::json* plan = field("plan");
  if (plan == nullptr || !plan->is_object()) return invalid_argument("/plan: missing or not an object");
  Result<routing::RoutePlan> p = routing::parse_plan(plan->dump());
  if (!p) return p.status().with_context("/plan");
  e.plan = std::move(*p);
  return e;
}

Result<std::vector<routing::Gate>> plan_round_gates(const routing::RoutePlan& plan, const std::vector<int>& host_of) {
  const bool hd = plan.collective == routing::collective_name(routing::Collective::kAllreduceHd);
  const bool ring = plan.collective == routing::collective_name(routing::Collective::kAllreduceRing);
  const bool hybrid = plan.collective == kHybridPlan;
  std::vector<routing::Gate> gates;
  if (hd || hybrid) {
    WEFT_ASSIGN_OR_RETURN(gates, routing::plan_gates(plan));
  } else if (ring) {
    WEFT_ASSIGN_OR_RETURN(gates, routing::ring_plan_gates(plan));
  }
  if (hybrid) {
    if (!host_of.empty()) WEFT_RETURN_IF_ERROR(check_hybrid_plan(plan, host_of));
  } else if (!gates.empty()) {
    // Gates are only as true as the flows' steps.
    WEFT_ASSIGN_OR_RETURN(routing::Schedule sched,
                          routing::build_schedule(hd ? routing::Collective::kAllreduceHd
                                                     : routing::Collective::kAllreduceRing,
                                                  plan.ranks, 1));
    WEFT_RETURN_IF_ERROR(routing::apply_plan_rounds(plan, sched));
  }
  return gates;
}

Status plan_fits(const routing::RoutePlan& current, const routing::RoutePlan& next, const std::vector<int>& host_of) {
  if (next.ranks != current.ranks) {
    return invalid_argument(fmt::format("it is for {} ranks, the communicator has {}", next.ranks, current.ranks));
  }
  if (next.collective != current.collective) {
    return invalid_argument(
        fmt::format("its collective is '{}', the communicator runs '{}'", next.collective, current.collective));
  }
  using Key = std::tuple<int, int>;
  std::map<Key, const routing::PlanFlow*> now;
  for (const auto& f : current.flows) now[{f.src_rank, f.dst_rank}] = &f;
  if (next.flows.size() != now.size()) {
    return invalid_argument(fmt::format("it has {} flows, the plan run has {}", next.flows.size(), now.size()));
  }
  for (const auto& f : next.flows) {
    auto it = now.find({f.src_rank, f.dst_rank});
    if (it == now.end()) {
      return invalid_argument(fmt::format("flow {} -> {} is not in the plan run", f.src_rank, f.dst_rank));
    }
    const routing::PlanFlow& c = *it->second;
    if (f.protocol != c.protocol) {
      return invalid_argument(fmt::format("flow {} -> {} is {}, in the plan run {}", f.src_rank, f.dst_rank,
                                          f.protocol, c.protocol));
    }
    if (f.dport != c.dport) {
      return invalid_argument(fmt::format("flow {} -> {} has dport {}, the plan run {} (listen ports cannot change)",
                                          f.src_rank, f.dst_rank, f.dport, c.dport));
    }
  }
  // Rounds become gates: the same checks as at create().
  return plan_round_gates(next, host_of).status();
}

void PlanEpochFile::look(Clock::time_point now, const routing::RoutePlan& current, uint64_t running, bool force) {
  if (!force && now < next_look_) return;
  next_look_ = now + poll_;
  struct stat st{};
  if (::stat(path_.c_str(), &st) != 0) return;  // not published yet, or between the watcher's writes
  const Version v{st.st_dev, st.st_ino, st.st_size,
                  static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec};
  if (seen_ && *seen_ == v) return;
  seen_ = v;
  read(current, running);
}

void PlanEpochFile::read(const routing::RoutePlan& current, uint64_t running) {
  std::ifstream f(path_);
  std::stringstream text;
  text << f.rdbuf();
  const auto refuse = [&](uint64_t& counter, const std::string& why) {
    ++counter;
    spdlog::warn("weft: rank {} refuses the plan epoch in {}: {}; it keeps plan epoch {}", rank_, path_, why, running);
  };
  if (!f) return refuse(counters_.refused_unreadable, "it cannot be read");
  Result<PlanEpoch> e = parse_plan_epoch(text.str());
  if (!e) return refuse(counters_.refused_unreadable, e.status().message());
  if (e->job != job_) return refuse(counters_.refused_job, fmt::format("it is for job '{}', this is '{}'", e->job, job_));
  const uint64_t newest = held_ ? held_->epoch : running;
  if (e->epoch <= newest) {
    return refuse(counters_.refused_stale, fmt::format("epoch {} is not newer than {}", e->epoch, newest));
  }
  if (Status s = plan_fits(current, e->plan, host_of_); !s) {
    return refuse(counters_.refused_mismatch, fmt::format("epoch {}: {}", e->epoch, s.message()));
  }
  held_ = std::move(*e);
}

}  // namespace weft::coll::internal
