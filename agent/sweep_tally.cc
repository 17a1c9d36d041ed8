// SweepTally (sweep_tally.h): per-peer and per-path totals of this agent's sweeps.
#include "weft/agent/sweep_tally.h"

#include <algorithm>
#include <set>

#include <fmt/format.h>
#include "weft/common/ipv4.h"

namespace weft::agent {
namespace {

// The tally of `label`, or of kOtherLabel once `cap` labels have their own.
PathTally& bounded(std::map<std::string, PathTally>& m, const std::string& label, size_t cap) {
  if (auto it = m.find(label); it != m.end()) return it->second;
  const size_t own = m.size() - m.count(kOtherLabel);
  return m[own < cap ? label : std::string(kOtherLabel)];
}

}  // namespace

void PathTally::add(const probe::FlowResult& f) {
  ++flows;
  probes_sent += static_cast<uint64_t>(f.sent);
  probes_answered += static_cast<uint64_t>(f.answered);
  if (f.answered == 0) return;
  const double rtt = static_cast<double>(f.min_rtt_ns) * 1e-9;
  ++rtt_count;
  rtt_sum_seconds += rtt;
  for (size_t b = 0; b < kRttBuckets.size(); ++b) {
    if (rtt <= kRttBuckets[b]) {
      ++rtt_buckets[b];
      break;
    }
  }
}

void PathTally::add(const PathTally& o) {
  flows += o.flows;
  probes_sent += o.probes_sent;
  probes_answered += o.probes_answered;
  rtt_count += o.rtt_count;
  rtt_sum_seconds += o.rtt_sum_seconds;
  for (size_t b = 0; b < rtt_buckets.size(); ++b) rtt_buckets[b] += o.rtt_buckets[b];
}

std::string path_label(const probe::FlowResult& f) {
  if (f.answered == 0) return kNoPathLabel;
  if (f.spine >= 0) return std::to_string(f.spine);
  return f.hop_ip == 0 ? "0" : ipv4_str(f.hop_ip);
}

uint64_t planned_flows(const probe::CampaignPlan& plan) {
  const uint32_t last = uint32_t{plan.sport_first} + plan.sport_count - 1;
  std::set<uint32_t> targets(plan.targets.begin(), plan.targets.end());
  uint64_t skipped = 0;
  for (uint32_t t : targets) skipped += plan.skip.ports_within(t, plan.sport_first, static_cast<uint16_t>(last));
  return plan.targets.size() * uint64_t{plan.sport_count} - skipped;
}

SweepTally::Sweep SweepTally::start(uint64_t planned) {
  std::lock_guard lock(mu_);
  ++s_.sweeps_started;
  ++s_.running;
  s_.running_planned += planned;
  return Sweep(this, planned);
}

PathTally& SweepTally::peer(const std::string& label) {
  std::map<std::string, PathTally>& m = s_.peers;
  peer_updated_[label] = ++updates_;
  if (auto it = m.find(label); it != m.end()) return it->second;
  if (m.size() - m.count(kOtherLabel) >= kMaxPeers) {
    auto oldest = peer_updated_.end();
    for (auto it = peer_updated_.begin(); it != peer_updated_.end(); ++it) {
      if (it->first != label && (oldest == peer_updated_.end() || it->second < oldest->second)) oldest = it;
    }
    m[kOtherLabel].add(m.at(oldest->first));
    m.erase(oldest->first);
    peer_updated_.erase(oldest);
  }
  return m[label];
}

SweepTallySnapshot SweepTally::snapshot() const {
  std::lock_guard lock(mu_);
  return s_;
}

void SweepTally::Sweep::flow(const probe::FlowResult& f) {
  std::lock_guard lock(t_->mu_);
  SweepTallySnapshot& s = t_->s_;
  ++settled_;
  ++s.flows_settled;
  ++s.running_settled;
  t_->peer(ipv4_str(f.dst_ip)).add(f);
  bounded(s.paths, path_label(f), kMaxPaths).add(f);
}

void SweepTally::Sweep::finish(const probe::ProbeStats& stats) {
  std::lock_guard lock(t_->mu_);
  t_->s_.finished += stats;
  finished_ = true;
}

SweepTally::Sweep::~Sweep() {
  if (!t_) return;
  std::lock_guard lock(t_->mu_);
  SweepTallySnapshot& s = t_->s_;
  --s.running;
  s.running_planned -= planned_;
  s.running_settled -= settled_;
  if (!finished_) ++s.sweeps_failed;
}

}  // namespace weft::agent
