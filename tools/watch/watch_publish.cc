// PlanPublisher (watch_publish.h).
#include "watch/watch_publish.h"

#include <cstdio>
#include <fstream>
#include <map>
#include <regex>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "path_source.h"
#include "weft/common/file_util.h"
#include "weft/probe/db_path_table.h"
#include "weft/probe/inferred_topology.h"
#include "weft/routing/planner.h"
#include "weft/routing/schedule.h"

namespace weft::cli {

namespace {

// The rank order a plan implies: rank r runs on the host its flows name.
Result<ranking::RankOrder> order_of(const topo::Fabric& f, const routing::RoutePlan& plan) {
  std::map<int, std::string> host_of;
  for (const auto& fl : plan.flows) {
    host_of[fl.src_rank] = fl.src_nic.empty() ? fl.src_host : fl.src_host + ":" + fl.src_nic;
    host_of[fl.dst_rank] = fl.dst_nic.empty() ? fl.dst_host : fl.dst_host + ":" + fl.dst_nic;
  }
  ranking::RankOrder order;
  for (int r = 0; r < plan.ranks; ++r) {
    auto it = host_of.find(r);
    if (it == host_of.end()) return invalid_argument(fmt::format("the plan names no host for rank {}", r));
    auto nic = f.find_nic(it->second);
    if (!nic) nic = f.find_nic(it->second.substr(0, it->second.find(':')));
    if (!nic) return not_found(fmt::format("rank {}'s host {} is not in the probed fabric", r, it->second));
    order.nics.push_back(*nic);
  }
  return order;
}

}  // namespace

Result<routing::RoutePlan> replan(const topo::Fabric& f, const ranking::RankOrder& order,
                                  const routing::RoutePlan& job_plan, const std::string& db_path) {
  auto coll = routing::parse_collective(job_plan.collective);
  if (!coll) return invalid_argument(fmt::format("the plan's collective '{}' is unknown", job_plan.collective));
  if (job_plan.flows.empty()) return invalid_argument("the job's plan has no flows");
  uint16_t first_dport = 65535;
  for (const auto& fl : job_plan.flows) first_dport = std::min(first_dport, fl.dport);
  routing::PlannerOptions opt{.protocol = job_plan.flows.front().protocol,
                              .sports = routing::PortRange{},
                              .ports_per_pair = kDbPortsPerPair,
                              .tcp_dport = first_dport,
                              .rounds = true};
  WEFT_RETURN_IF_ERROR(routing::validate(opt, f, order));
  WEFT_ASSIGN_OR_RETURN(auto table, probe::open_db_path_table(f, db_path));
  WEFT_ASSIGN_OR_RETURN(routing::Schedule sched, routing::build_schedule(*coll, order.size(), 1024, 4));
  WEFT_ASSIGN_OR_RETURN(routing::PlannedRoutes planned, routing::plan_routes(f, order, sched, *table, opt));
  routing::RoutePlan& p = planned.plan;
  // The job can only adopt a plan of its own shape (its listen ports are bound).
  if (p.ranks != job_plan.ranks || p.collective != job_plan.collective) {
    return failed_precondition(fmt::format("the new plan is {} over {} ranks, the job's {} over {}", p.collective,
                                           p.ranks, job_plan.collective, job_plan.ranks));
  }
  for (const auto& fl : p.flows) {
    const routing::PlanFlow* old = job_plan.find(fl.src_rank, fl.dst_rank);
    if (!old || old->dport != fl.dport || old->protocol != fl.protocol) {
      return failed_precondition(fmt::format("the new plan's flow {} -> {} does not match the job's (port {})",
                                             fl.src_rank, fl.dst_rank, fl.dport));
    }
  }
  return std::move(p);
}

Result<PlanPublisher> PlanPublisher::create(db::Database& db, const std::string& db_path,
                                            routing::RoutePlan job_plan, std::string path, std::string job) {
  if (job.empty()) return invalid_argument("publishing plan epochs needs the job's id (--job)");
  PlanPublisher p;
  WEFT_ASSIGN_OR_RETURN(p.fabric_, probe::inferred_topology(db, {}));
  WEFT_ASSIGN_OR_RETURN(p.order_, order_of(p.fabric_, job_plan));
  p.db_path_ = db_path;
  p.job_plan_ = std::move(job_plan);
  p.path_ = std::move(path);
  p.job_ = std::move(job);
  // A watcher restarted: go on after the epoch the job has seen.
  if (auto text = read_file(p.path_, routing::kPlanTextSpare)) {
    if (auto doc = routing::parse_plan_member(*text, "plan")) {
      const auto member = [&](const char* name) {
        auto it = doc->others.find(name);
        return it == doc->others.end() ? nlohmann::json() : nlohmann::json::parse(it->second, nullptr, false);
      };
      const nlohmann::json epoch = member("epoch");
      if (member("job") == p.job_ && epoch.is_number_unsigned()) p.epoch_ = epoch.get<uint64_t>();
    }
  }
  return p;
}

Status PlanPublisher::write(const routing::RoutePlan& plan, const std::string& reason) {
  // The plan goes in as plan_to_json writes it, not through a JSON tree: a
  // plan of 65,536 ranks is 10^6 flows (routing/plan_file.cc). A reason or
  // job that is not UTF-8 is written with U+FFFD where it is not.
  const nlohmann::json head = {{"version", 1}, {"job", job_}, {"epoch", epoch_ + 1}, {"reason", reason}};
  std::string fields = head.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  fields.pop_back();  // the closing '}'
  // rename(2) is atomic: a reader sees the old epoch or the new one, never half of one.
  const std::string tmp = path_ + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << fields << ", \"plan\": " << routing::plan_to_json(plan) << "}\n";
    if (!out.flush()) return io_error("writing " + tmp, errno);
  }
  if (std::rename(tmp.c_str(), path_.c_str()) != 0) return io_error("renaming " + tmp + " to " + path_, errno);
  ++epoch_;
  return ok_status();
}

Result<uint64_t> PlanPublisher::publish_without(const std::string& link) {
  static const std::regex kLink("([sl])(\\d+)->([sl])(\\d+)");
  std::smatch m;
  if (!std::regex_match(link, m, kLink) || m[1] == m[3]) {
    return invalid_argument(fmt::format("'{}' is not a spine-leaf link", link));
  }
  const std::string a = m[1].str() + m[2].str(), b = m[3].str() + m[4].str();
  topo::Fabric f = fabric_;
  auto sa = f.find_switch(a), sb = f.find_switch(b);
  if (!sa || !sb) return not_found(fmt::format("link {}: no switch {} in the probed fabric", link, !sa ? a : b));
  auto l = f.link_between(f.switch_vertex(*sa), f.switch_vertex(*sb));
  if (!l) return not_found(fmt::format("no link between {} and {}", a, b));
  f.links[static_cast<size_t>(*l)].state = topo::LinkState::kDown;
  WEFT_ASSIGN_OR_RETURN(routing::RoutePlan plan, replan(f, order_, job_plan_, db_path_));
  WEFT_RETURN_IF_ERROR(write(plan, fmt::format("link {} down", link)));
  return epoch_;
}

Result<uint64_t> PlanPublisher::publish_full(const std::string& link) {
  WEFT_RETURN_IF_ERROR(write(job_plan_, fmt::format("link {} up", link)));
  return epoch_;
}

}  // namespace weft::cli
