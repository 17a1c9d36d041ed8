// The monitoring loop (monitor.h).
#include "weft/probe/monitor.h"

#include <algorithm>
#include <chrono>
#include <set>
#include <unordered_map>
#include <utility>

#include <fmt/format.h>

#include "weft/probe/wire.h"

namespace weft::probe {

Status MonitorPlan::validate() const {
  if (tuples.size() > kMaxMonitorTuples) {
    return invalid_argument(fmt::format("{} 5-tuples to monitor, at most {}", tuples.size(), kMaxMonitorTuples));
  }
  std::set<std::pair<uint32_t, uint16_t>> seen;
  uint16_t lo = 65535, hi = 0;
  for (const MonitorTuple& t : tuples) {
    if (t.dst_ip == 0 || t.sport == 0) return invalid_argument("a monitored 5-tuple has address 0 or port 0");
    if (!seen.insert({t.dst_ip, t.sport}).second) {
      return invalid_argument(fmt::format("5-tuple to {:#x} from port {} is listed twice", t.dst_ip, t.sport));
    }
    lo = std::min(lo, t.sport);
    hi = std::max(hi, t.sport);
  }
  if (!tuples.empty() && hi - lo + 1 > kMaxMonitorPortSpan) {
    return invalid_argument(fmt::format("source ports {}..{} span more than {}", lo, hi, kMaxMonitorPortSpan));
  }
  if (!(rate_pps >= 1 && rate_pps <= 1e6)) {
    return invalid_argument(fmt::format("monitor rate {} probes/s is outside 1..1e6", rate_pps));
  }
  if (timeout_ms < 1 || timeout_ms > 10000) {
    return invalid_argument(fmt::format("monitor timeout {} ms is outside 1..10000", timeout_ms));
  }
  if (report_ms < 10 || report_ms > 60000) {
    return invalid_argument(fmt::format("monitor report interval {} ms is outside 10..60000", report_ms));
  }
  return ok_status();
}

Status run_monitor(SenderBackend& backend, const MonitorPlan& plan, const MonitorReport& report,
                   const std::atomic<bool>& cancel, uint32_t* next_sequence) {
  WEFT_RETURN_IF_ERROR(plan.validate());
  uint32_t seq = plan.first_sequence;
  struct Publish {  // on every return, errors included: what was sent is spent
    uint32_t* out;
    const uint32_t& seq;
    ~Publish() {
      if (out) *out = seq;
    }
  } publish{next_sequence, seq};
  using Clock = std::chrono::steady_clock;
  uint16_t lo = 65535, hi = 0;
  for (const MonitorTuple& t : plan.tuples) {
    lo = std::min(lo, t.sport);
    hi = std::max(hi, t.sport);
  }
  if (!plan.tuples.empty()) WEFT_RETURN_IF_ERROR(backend.open_ports(lo, static_cast<uint16_t>(hi - lo + 1)));

  std::vector<TupleTally> tally(plan.tuples.size());
  for (size_t i = 0; i < tally.size(); ++i) {
    tally[i].dst_ip = plan.tuples[i].dst_ip;
    tally[i].sport = plan.tuples[i].sport;
  }
  struct InFlight {
    size_t tuple;
    Clock::time_point sent;
  };
  std::unordered_map<uint32_t, InFlight> in_flight;  // by sequence
  const auto period = std::chrono::duration_cast<Clock::duration>(
      std::chrono::duration<double>(static_cast<double>(std::max<size_t>(1, plan.tuples.size())) / plan.rate_pps));
  const auto timeout = std::chrono::milliseconds(plan.timeout_ms);
  const auto report_every = std::chrono::milliseconds(plan.report_ms);
  std::vector<ProbeSend> batch;
  std::vector<ProbeAnswer> answers;
  auto next_round = Clock::now();
  auto next_report = next_round + report_every;
  while (!cancel.load()) {
    auto now = Clock::now();
    if (now >= next_round && !plan.tuples.empty()) {
      batch.clear();
      for (size_t i = 0; i < plan.tuples.size(); ++i) {
        batch.push_back({plan.tuples[i].dst_ip, plan.tuples[i].sport, seq});
        in_flight[seq++] = {i, now};
        ++tally[i].sent;
      }
      WEFT_RETURN_IF_ERROR(backend.send(batch));
      // A round that starts late (a loaded CPU) does not make up for it with a burst.
      next_round = std::max(next_round + period, now);
    }
    const auto wake = std::min(next_round, next_report);
    const int wait_ms = static_cast<int>(std::clamp<int64_t>(
        std::chrono::duration_cast<std::chrono::milliseconds>(wake - Clock::now()).count(), 0, 50));
    answers.clear();
    WEFT_RETURN_IF_ERROR(backend.poll(wait_ms, answers));
    for (const ProbeAnswer& a : answers) {
      auto it = in_flight.find(a.sequence);
      if (it == in_flight.end()) continue;  // answered after its timeout: already counted lost
      TupleTally& t = tally[it->second.tuple];
      if (a.dst_ip != t.dst_ip || a.sport != t.sport) continue;  // a valid answer for another tuple's sequence
      ++t.answered;
      t.streak = 0;
      t.spine = a.spine;
      t.rtt_ns = a.rtt_ns;
      in_flight.erase(it);
    }
    now = Clock::now();
    for (auto it = in_flight.begin(); it != in_flight.end();) {
      if (now - it->second.sent >= timeout) {
        TupleTally& t = tally[it->second.tuple];
        ++t.lost;
        ++t.streak;
        it = in_flight.erase(it);
      } else {
        ++it;
      }
    }
    if (now >= next_report) {
      report(realtime_ns(), tally);
      next_report += report_every;
      if (next_report < now) next_report = now + report_every;
    }
  }
  return ok_status();
}

}  // namespace weft::probe
