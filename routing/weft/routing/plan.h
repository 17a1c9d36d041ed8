// The route plan file: what `weft route` writes and the collective library
// reads. One schema, versioned; see docs/route-plan.md.
//
//   {"version": 1, "collective": "allreduce-hd", "topology": "clos2-4x4x4x1",
//    "ranks": 16,
//    "flows": [{"src_rank": 0, "dst_rank": 4, "src_host": "h1-1", "dst_host": "h2-1",
//               "src_nic": "eth0", "dst_nic": "eth0", "protocol": "tcp",
//               "sport": 49152, "dport": 29500, "path": ["l1", "s2", "l2"],
//               "steps": [2, 5], "rounds": [0, 0]}],
//    "steps": [{"step": 2, "phase": "rs", "max_load": 1, "lower_bound": 1}]}
//
// The plan is per *directed* flow: the two directions of a pair hash
// independently. A RoCE QP sets its own UDP source port on each side; for TCP
// weft opens one connection per direction (the data of flow a->b rides only
// on the connection a opened to b, whose reverse direction carries ACKs
// alone), so each direction's 5-tuple is chosen on its own and no coupled
// port choice is needed. Every flow into one rank has that rank's listen
// port as dport.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "weft/common/status.h"
#include "weft/routing/schedule.h"

namespace weft::routing {

struct PlanFlow {
  int src_rank = 0;
  int dst_rank = 0;
  std::string src_host;
  std::string dst_host;
  std::string src_nic;   // NIC name on src_host ("" = the host's only NIC)
  std::string dst_nic;
  std::string protocol = "udp";  // "udp" (RoCEv2) or "tcp"
  uint16_t sport = 0;
  uint16_t dport = 0;
  std::vector<std::string> path;  // switch names, source leaf first
  std::vector<int> steps;         // schedule steps this flow serves
  // Time slice of the flow within each of its steps (parallel to steps;
  // empty = round 0 everywhere). A step whose flows cannot all have a link
  // of their own (a failed link leaves a leaf fewer uplinks than hosts) runs
  // in rounds: round r+1 of a link starts after round r on it has ended
  // (docs/route-plan.md "Rounds"), so no link carries two flows at once.
  std::vector<int> rounds;
  // Optional: the NICs' IPv4 addresses, and which connection of the pair and
  // which QP of that connection the flow is (several per directed pair). The
  // NCCL net plugin, which sees addresses but no ranks, looks flows up by
  // these (docs/nccl.md). Absent: "" and 0.
  std::string src_addr;
  std::string dst_addr;
  int conn = 0;
  int qp = 0;
  // Optional, udp only: the destination QP number the flow must use, on a
  // fabric whose switches hash it (E-ECMP, ecmp.h crc32-qp): 2..2^24-1, one
  // of the QPNs the destination published (docs/route-plan.md "E-ECMP").
  // Absent: 0.
  uint32_t dqpn = 0;
  int round_in(int step) const;  // this flow's round in `step` (0 when not listed)
  friend bool operator==(const PlanFlow&, const PlanFlow&) = default;
};

struct PlanStep {
  int step = 0;
  std::string phase;
  int max_load = 0;
  int lower_bound = 0;
  int rounds = 1;  // time slices of the step; max_load and lower_bound are per round
  friend bool operator==(const PlanStep&, const PlanStep&) = default;
};

struct RoutePlan {
  int version = 1;
  std::string collective;
  std::string topology;
  int ranks = 0;
  std::vector<PlanFlow> flows;
  std::vector<PlanStep> steps;
  friend bool operator==(const RoutePlan&, const RoutePlan&) = default;

  // The flow src -> dst, or nullptr.
  const PlanFlow* find(int src_rank, int dst_rank) const;
  // The flow of QP `qp` of connection `conn` from NIC address src_addr to
  // dst_addr, or nullptr.
  const PlanFlow* find_qp(const std::string& src_addr, const std::string& dst_addr, int conn, int qp) const;
};

// Parses and validates: version 1, ranks in [0, ranks), protocol udp|tcp,
// ports in 1..65535, dqpn (optional) a data QPN (2..2^24-1) on udp flows only, one flow per directed pair and (conn, qp), one dport per destination,
// rounds (optional) one per step, each in [0, that step's "rounds").
// Errors name the JSON path ("/flows/3/sport: ...").
Result<RoutePlan> parse_plan(const std::string& text);
Result<RoutePlan> load_plan(const std::string& path);
// Capacity a text given to parse_plan or parse_plan_member should have
// beyond its size, or the reader copies it first (a plan of 65,536 ranks is
// 332 MB): read_file(path, kPlanTextSpare) leaves it.
inline constexpr size_t kPlanTextSpare = 64;

// A JSON object that holds a route plan in one member (the plan epochs file,
// docs/route-plan.md "Plan epochs"): the plan read as parse_plan reads one,
// and the object's other members as JSON text for the caller to check.
struct PlanMember {
  std::map<std::string, std::string, std::less<>> others;  // name -> the value's JSON text
  bool present = false;  // the member is there and is an object
  Status plan_status;    // why `plan` was not read (when present)
  RoutePlan plan;
};
// Fails only for a text that is not JSON ("not JSON: ...") or not an object
// ("/: not an object"), with kInvalidArgument.
Result<PlanMember> parse_plan_member(const std::string& text, std::string_view member);
std::string plan_to_json(const RoutePlan& plan);
Status save_plan(const RoutePlan& plan, const std::string& path);

// Copies the plan's rounds onto the schedule's flows (matched by src/dst rank
// and step index); flows the plan does not list are set to round 0. Fails,
// naming the flow, when a plan flow lists a step the schedule does not have
// or a step in which the schedule has no such flow, and when a schedule
// flow's source is not one of its `ranks`.
Status apply_plan_rounds(const RoutePlan& plan, Schedule& s);

}  // namespace weft::routing
