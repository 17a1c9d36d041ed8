// `weft watch --publish PATH`: re-plans the job on the fabric without the
// failed link and hands the plan to the running job as its next plan epoch
// (the file format the collective library reads: docs/route-plan.md "Plan
// epochs"); when the link comes back, the job's full plan is the next epoch.
//
// The fabric is the one the newest probe campaign inferred (probe's
// inferred_topology: leaves l<N>, spines s<N>, the names the watcher's links
// use) with the failed link down; the paths are the campaign's measured ones;
// the ranks, collective, protocol and listen ports are the job's plan's. A
// plan whose ranks, collective or destination ports differ from the job's is
// not published (the job could not adopt it).
//
//   auto pub = PlanPublisher::create(db, "fabric.db", job_plan, "/run/job/epochs.json", "job-7").value();
//   pub.publish_without("s2->l3");   // epoch 1, without link s2 - l3
//   pub.publish_full("s2->l3");      // epoch 2, the job's plan again
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "weft/common/status.h"
#include "weft/db/database.h"
#include "weft/ranking/rank_order.h"
#include "weft/routing/plan.h"
#include "weft/topology/fabric.h"

namespace weft::cli {

class PlanPublisher {
 public:
  // Continues after the epoch PATH already holds for this job, if any.
  static Result<PlanPublisher> create(db::Database& db, const std::string& db_path, routing::RoutePlan job_plan,
                                      std::string path, std::string job);
  // Plans without `link` ("s2->l3" or "l3->s2": the cable is avoided in both
  // directions) and writes the next epoch; returns its number.
  Result<uint64_t> publish_without(const std::string& link);
  // Writes the job's own plan as the next epoch; returns its number.
  Result<uint64_t> publish_full(const std::string& link);
  uint64_t epoch() const { return epoch_; }

 private:
  Status write(const routing::RoutePlan& plan, const std::string& reason);

  topo::Fabric fabric_;
  ranking::RankOrder order_;
  std::string db_path_;
  routing::RoutePlan job_plan_;
  std::string path_, job_;
  uint64_t epoch_ = 0;
};

// Rebuilds the plan of `job_plan`'s job on fabric `f` (links down are
// avoided) from the measured paths of db_path.
Result<routing::RoutePlan> replan(const topo::Fabric& f, const ranking::RankOrder& order,
                                  const routing::RoutePlan& job_plan, const std::string& db_path);

}  // namespace weft::cli
