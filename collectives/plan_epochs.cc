// Reading plan epochs (plan_epochs.h).
#include "plan_epochs.h"

#include <sys/stat.h>

#include <map>
#include <optional>
#include <tuple>

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "weft/common/file_util.h"
#include "weft/routing/gates.h"
#include "weft/routing/schedule.h"

namespace weft::coll::internal {

// The plan is read by routing::parse_plan_member (simdjson), not from a
// nlohmann::json tree: at 65,536 ranks the plan is 10^6 flows, and a tree
// of them took seconds and gigabytes per rank (routing/plan_parse.cc).
Result<PlanEpoch> parse_plan_epoch(const std::string& text) {
  WEFT_ASSIGN_OR_RETURN(routing::PlanMember doc, routing::parse_plan_member(text, "plan"));
  const auto field = [&](const char* name) -> std::optional<nlohmann::json> {
    auto it = doc.others.find(name);
    if (it == doc.others.end()) return std::nullopt;
    return nlohmann::json::parse(it->second, nullptr, false);  // one value, as simdjson wrote it
  };
  const std::optional<nlohmann::json> version = field("version");
  if (!version || !version->is_number_integer() || version->get<int64_t>() != 1) {
    return invalid_argument("/version: must be 1");
  }
  PlanEpoch e;
  const std::optional<nlohmann::json> job = field("job");
  if (!job || !job->is_string()) return invalid_argument("/job: missing or not a string");
  e.job = job->get<std::string>();
  const std::optional<nlohmann::json> epoch = field("epoch");
  if (!epoch || !epoch->is_number_unsigned()) return invalid_argument("/epoch: missing or not unsigned");
  e.epoch = epoch->get<uint64_t>();
  if (e.epoch > static_cast<uint64_t>(INT64_MAX)) return invalid_argument(fmt::format("/epoch: {} is too large", e.epoch));
  if (const std::optional<nlohmann::json> reason = field("reason"); reason) {
    if (!reason->is_string()) return invalid_argument("/reason: not a string");
    e.reason = reason->get<std::string>();
  }
  if (!doc.present) return invalid_argument("/plan: missing or not an object");
  if (!doc.plan_status) return doc.plan_status.with_context("/plan");
  e.plan = std::move(doc.plan);
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
  const Result<std::string> text = read_file(path_, routing::kPlanTextSpare);
  const auto refuse = [&](uint64_t& counter, const std::string& why) {
    ++counter;
    spdlog::warn("weft: rank {} refuses the plan epoch in {}: {}; it keeps plan epoch {}", rank_, path_, why, running);
  };
  if (!text) return refuse(counters_.refused_unreadable, "it cannot be read");
  Result<PlanEpoch> e = parse_plan_epoch(*text);
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
