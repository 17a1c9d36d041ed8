// Probe acceptance (validate.h) and the shared stats helpers (stats.h).
#include "weft/probe/validate.h"

#include <mutex>

namespace weft::probe {

uint64_t ProbeStats::rejected_total() const {
  uint64_t n = 0;
  for (uint64_t r : rejected) n += r;
  return n;
}

std::map<std::string, int64_t> ProbeStats::rejected_by_name() const {
  std::map<std::string, int64_t> m;
  for (size_t i = 0; i < rejected.size(); ++i) {
    if (rejected[i]) m[std::string(reject_name(static_cast<Reject>(i)))] = static_cast<int64_t>(rejected[i]);
  }
  return m;
}

ProbeStats& ProbeStats::operator+=(const ProbeStats& o) {
  sent += o.sent;
  answered += o.answered;
  timed_out += o.timed_out;
  retried += o.retried;
  send_errors += o.send_errors;
  for (size_t i = 0; i < rejected.size(); ++i) rejected[i] += o.rejected[i];
  return *this;
}

void KeyRing::set(uint32_t campaign, const MacKey& key) {
  std::unique_lock lock(mu_);
  keys_[campaign] = std::make_shared<const MacKey>(key);
}

void KeyRing::erase(uint32_t campaign) {
  std::unique_lock lock(mu_);
  keys_.erase(campaign);
}

std::shared_ptr<const MacKey> KeyRing::find(uint32_t campaign) const {
  std::shared_lock lock(mu_);
  auto it = keys_.find(campaign);
  return it == keys_.end() ? nullptr : it->second;
}

size_t KeyRing::size() const {
  std::shared_lock lock(mu_);
  return keys_.size();
}

bool ReplayGuard::first_sighting(uint32_t campaign, uint32_t sequence, uint32_t src_ip, uint16_t sport) {
  // Sequences are unique per (campaign, sender), so the tuple identifies one probe.
  uint64_t k = (static_cast<uint64_t>(campaign) << 32 | sequence) * 0x9e3779b97f4a7c15ull;
  k ^= (static_cast<uint64_t>(src_ip) << 16 | sport) * 0xc2b2ae3d27d4eb4full;
  if (!seen_.insert(k).second) return false;
  order_.push_back(k);
  if (order_.size() > capacity_) {
    seen_.erase(order_.front());
    order_.pop_front();
  }
  return true;
}

bool RequestAcceptor::accept(std::span<const uint8_t> packet, uint32_t src_ip, uint16_t sport, uint64_t now_ns,
                             ProbeHeader* h) {
  Reject why{};
  if (!parse_probe(packet, h, &why)) {
    stats_.reject(why);
    return false;
  }
  if (h->type != ProbeType::kRequest) {
    stats_.reject(Reject::kBadType);
    return false;
  }
  auto key = keys_.find(h->campaign);
  if (!key) {
    stats_.reject(Reject::kUnknownCampaign);
    return false;
  }
  if (!verify_probe_mac(packet, *key)) {
    stats_.reject(Reject::kBadMac);
    return false;
  }
  const uint64_t age = now_ns > h->send_time_ns ? now_ns - h->send_time_ns : h->send_time_ns - now_ns;
  if (age > opt_.window_ns) {
    stats_.reject(Reject::kStale);
    return false;
  }
  if (!guard_.first_sighting(h->campaign, h->sequence, src_ip, sport)) {
    stats_.reject(Reject::kReplayed);
    return false;
  }
  return true;
}

bool accept_reply(std::span<const uint8_t> packet, uint32_t campaign, const MacKey& key, ProbeType want,
                  ProbeStats& stats, ProbeHeader* h) {
  Reject why{};
  if (!parse_probe(packet, h, &why)) {
    stats.reject(why);
    return false;
  }
  if (h->type != want) {
    stats.reject(Reject::kBadType);
    return false;
  }
  if (h->campaign != campaign) {
    stats.reject(Reject::kUnknownCampaign);
    return false;
  }
  if (!verify_probe_mac(packet, key)) {
    stats.reject(Reject::kBadMac);
    return false;
  }
  return true;
}

}  // namespace weft::probe
