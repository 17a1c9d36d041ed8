// The campaign runner (campaign.h): windows of source ports, rounds of probes,
// pacing by a token bucket, timeouts and retries; one FlowResult per 5-tuple.
#include "weft/probe/campaign.h"

#include <algorithm>
#include <chrono>
#include <map>
#include <thread>
#include <unordered_map>

#include <fmt/format.h>

namespace weft::probe {
namespace {

using Clock = std::chrono::steady_clock;

struct Flow {
  uint32_t target = 0;  // index into plan.targets
  uint16_t sport = 0;
  FlowResult r;
  bool have_path = false;
};

// Paces sends to rate_pps: before sending k more, wait until the bucket allows.
// The wait is sliced so a cancel is seen within kCancelSlice even at a rate of
// one probe an hour; take() returns false when cancelled.
class Pacer {
 public:
  static constexpr auto kCancelSlice = std::chrono::milliseconds(20);
  explicit Pacer(double pps) : pps_(pps), start_(Clock::now()) {}
  bool take(size_t n, const std::atomic<bool>* cancel) {
    if (pps_ <= 0) return true;
    sent_ += n;
    // Clamped before the cast to integer nanoseconds, which a rate of a few
    // probes per year would overflow: a year is as good as forever here.
    const double seconds = std::min(static_cast<double>(sent_) / pps_, 365.0 * 86400);
    const auto due = start_ + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
    for (auto now = Clock::now(); now < due; now = Clock::now()) {
      if (cancel && cancel->load()) return false;
      std::this_thread::sleep_until(std::min(due, now + kCancelSlice));
    }
    return true;
  }

 private:
  double pps_;
  Clock::time_point start_;
  uint64_t sent_ = 0;
};

// Whether sequence a was sent before b: serial number arithmetic (RFC 1982),
// so a campaign whose sequences wrap past 2^32 - 1 to 0 keeps its order as
// long as fewer than 2^31 probes lie between the two.
bool sequence_before(uint32_t a, uint32_t b) { return static_cast<int32_t>(a - b) < 0; }

void record_answer(Flow& f, const ProbeAnswer& a) {
  FlowResult& r = f.r;
  ++r.answered;
  if (r.min_rtt_ns == 0 || a.rtt_ns < r.min_rtt_ns) r.min_rtt_ns = a.rtt_ns;
  // TTL method: an answer from the reflector itself means no spine expired it.
  const int spine = a.hop_ip != 0 ? -1 : a.spine;
  if (!f.have_path) {
    f.have_path = true;
    r.spine = spine;
    r.hop_ip = a.hop_ip;
    r.dscp_seen = a.dscp_seen;
    return;
  }
  if (spine != r.spine || a.hop_ip != r.hop_ip) {
    r.unstable = true;
    r.other_spine = spine;
    r.other_hop_ip = a.hop_ip;
  }
}

}  // namespace

Status CampaignPlan::validate() const {
  if (targets.empty()) return invalid_argument("campaign has no targets");
  if (sport_count == 0 || sport_first == 0 || uint32_t{sport_first} + sport_count > 65536) {
    return invalid_argument(fmt::format("bad source port range {}+{}", sport_first, sport_count));
  }
  if (probes_per_port < 1) return invalid_argument("probes per port must be >= 1");
  if (timeout_ms < 1 || retries < 0) return invalid_argument("timeout must be >= 1 ms and retries >= 0");
  if (rate_pps < 0) return invalid_argument("rate must be >= 0 (0 = unlimited)");
  if (port_window == 0) return invalid_argument("port window must be >= 1");
  if (stop_at_spines < 0 || stop_at_spines > 63) return invalid_argument("stop_at_spines must be in 0..63");
  if (ports_per_spine < 1 || ports_per_spine > 4096) {
    return invalid_argument(fmt::format("ports per spine must be in 1..4096 (got {})", ports_per_spine));
  }
  return ok_status();
}

Result<CampaignOutcome> run_campaign(SenderBackend& backend, const CampaignPlan& plan, const FlowCallback& on_flow,
                                     const std::atomic<bool>* cancel) {
  WEFT_RETURN_IF_ERROR(plan.validate());
  CampaignOutcome out;
  out.spend.resize(plan.targets.size());
  std::unordered_map<uint32_t, size_t> target_of;
  for (size_t t = 0; t < plan.targets.size(); ++t) {
    out.spend[t].dst_ip = plan.targets[t];
    target_of[plan.targets[t]] = t;
  }
  // Per target: stable answered ports per path (a spine, or a TTL hop).
  std::vector<std::map<std::pair<int, uint32_t>, int>> seen_paths(plan.targets.size());
  const bool targeted = plan.stop_at_spines > 0;
  const uint16_t window =
      targeted ? static_cast<uint16_t>(std::min<int>(plan.port_window, plan.stop_at_spines * plan.ports_per_spine))
               : plan.port_window;
  auto tally = [&](size_t t) {
    PairSpend& s = out.spend[t];
    s.spines_found = s.full_spines = 0;
    for (const auto& [path, ports] : seen_paths[t]) {
      if (path.first <= 0 && path.second == 0) continue;  // same leaf (or unknown): no spine
      ++s.spines_found;
      s.full_spines += ports >= plan.ports_per_spine;
    }
    // A same-leaf pair never crosses a spine: K answered ports say all there is.
    const auto same = seen_paths[t].find({0, 0});
    const bool same_leaf_done = same != seen_paths[t].end() && same->second >= plan.ports_per_spine;
    s.complete = s.full_spines >= plan.stop_at_spines || same_leaf_done;
  };
  uint32_t seq = plan.first_sequence;
  Pacer pacer(plan.rate_pps);
  ProbeStats base = backend.stats();

  const auto cancelled = [cancel] { return cancel && cancel->load(); };
  for (uint32_t p0 = plan.sport_first; p0 < uint32_t{plan.sport_first} + plan.sport_count; p0 += window) {
    if (cancelled()) {
      out.cancelled = true;
      break;
    }
    const uint16_t w = static_cast<uint16_t>(std::min<uint32_t>(window, plan.sport_first + plan.sport_count - p0));
    std::vector<Flow> flows;
    for (uint32_t t = 0; t < plan.targets.size(); ++t) {
      if (targeted && out.spend[t].complete) continue;
      for (uint16_t i = 0; i < w; ++i) {
        const uint16_t sport = static_cast<uint16_t>(p0 + i);
        if (plan.skip.contains(plan.targets[t], sport)) continue;
        Flow f;
        f.target = t;
        f.sport = sport;
        f.r.dst_ip = plan.targets[t];
        f.r.sport = sport;
        flows.push_back(f);
      }
    }
    if (flows.empty()) continue;
    WEFT_RETURN_IF_ERROR(backend.open_ports(static_cast<uint16_t>(p0), w));
    // Sequence -> flow, every attempt of the current round only: an earlier
    // round's sequences are told apart by number (below), so the map never
    // holds more than (retries + 1) probes per flow of the window.
    std::unordered_map<uint32_t, size_t> sent_seq;
    std::vector<ProbeAnswer> answers;
    const uint32_t window_first = seq;
    // A cancel inside the window ends the campaign; its flows are not reported
    // (they were not probed as the plan says).
    for (int round = 0; round < plan.probes_per_port && !out.cancelled; ++round) {
      std::vector<char> settled(flows.size(), 0);
      const uint32_t round_first = seq;
      sent_seq.clear();
      size_t open = flows.size();
      for (int attempt = 0; attempt <= plan.retries && open > 0 && !out.cancelled; ++attempt) {
        std::vector<ProbeSend> batch;
        for (size_t i = 0; i < flows.size(); ++i) {
          if (settled[i]) continue;
          batch.push_back({flows[i].r.dst_ip, flows[i].sport, seq});
          sent_seq[seq++] = i;
          ++flows[i].r.sent;
          ++out.spend[flows[i].target].probes;
        }
        if (attempt > 0) out.stats.retried += batch.size();
        for (size_t at = 0; at < batch.size(); at += 64) {
          const size_t n = std::min<size_t>(64, batch.size() - at);
          if (!pacer.take(n, cancel)) {
            out.cancelled = true;
            break;
          }
          WEFT_RETURN_IF_ERROR(backend.send(std::span<const ProbeSend>(batch.data() + at, n)));
        }
        const auto deadline = Clock::now() + std::chrono::milliseconds(plan.timeout_ms);
        while (open > 0 && !out.cancelled) {
          if (cancelled()) {
            out.cancelled = true;
            break;
          }
          const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
          if (left <= 0) break;
          answers.clear();
          WEFT_RETURN_IF_ERROR(backend.poll(static_cast<int>(std::min<int64_t>(left, 20)), answers));
          for (const ProbeAnswer& a : answers) {
            if (sequence_before(a.sequence, round_first) && !sequence_before(a.sequence, window_first)) {
              out.stats.reject(Reject::kLate);  // an earlier round's answer, after its timeout
              continue;
            }
            auto it = sent_seq.find(a.sequence);
            if (it == sent_seq.end()) {  // not a probe of this window
              out.stats.reject(Reject::kUnexpected);
              continue;
            }
            Flow& f = flows[it->second];
            if (a.dst_ip != f.r.dst_ip || a.sport != f.sport) {
              out.stats.reject(Reject::kUnexpected);
              continue;
            }
            if (settled[it->second]) {
              out.stats.reject(Reject::kLate);  // an earlier attempt's answer after a retry was answered
              continue;
            }
            record_answer(f, a);
            ++out.stats.answered;
            settled[it->second] = 1;
            --open;
          }
        }
      }
      if (!out.cancelled) out.stats.timed_out += open;
    }
    if (out.cancelled) break;
    for (Flow& f : flows) {
      // An unstable port is no port to plan on (db_path_table.cc skips it).
      if (f.have_path && !f.r.unstable) ++seen_paths[f.target][{f.r.spine, f.r.hop_ip}];
      on_flow(f.r);
      ++out.flows;
    }
    if (targeted) {
      for (size_t t = 0; t < plan.targets.size(); ++t) tally(t);
      if (std::all_of(out.spend.begin(), out.spend.end(), [](const PairSpend& s) { return s.complete; })) break;
    }
  }
  for (size_t t = 0; t < plan.targets.size(); ++t) {
    const bool was_complete = out.spend[t].complete;
    tally(t);
    if (!targeted) out.spend[t].complete = was_complete;
  }
  const ProbeStats& now = backend.stats();
  out.stats.sent = now.sent - base.sent;
  out.stats.send_errors = now.send_errors - base.send_errors;
  for (size_t i = 0; i < out.stats.rejected.size(); ++i) out.stats.rejected[i] += now.rejected[i] - base.rejected[i];
  return out;
}

}  // namespace weft::probe
