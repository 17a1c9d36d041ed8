// Probe acceptance (validate.h) and the shared stats helpers (stats.h).
#include "weft/probe/validate.h"

#include <algorithm>
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
  keys_[campaign] = {std::make_shared<const MacKey>(key), ++sets_};
  if (keys_.size() <= capacity_) return;
  auto oldest = keys_.begin();
  for (auto it = keys_.begin(); it != keys_.end(); ++it) {
    if (it->second.set_at < oldest->second.set_at) oldest = it;
  }
  keys_.erase(oldest);
  ++forgotten_;
}

void KeyRing::erase(uint32_t campaign) {
  std::unique_lock lock(mu_);
  keys_.erase(campaign);
}

std::shared_ptr<const MacKey> KeyRing::find(uint32_t campaign) const {
  std::shared_lock lock(mu_);
  auto it = keys_.find(campaign);
  return it == keys_.end() ? nullptr : it->second.key;
}

size_t KeyRing::size() const {
  std::shared_lock lock(mu_);
  return keys_.size();
}

uint64_t KeyRing::forgotten() const {
  std::shared_lock lock(mu_);
  return forgotten_;
}

bool RequestAcceptor::accept(std::span<const uint8_t> packet, const FiveTuple& seen, uint64_t now_ns,
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
  if (!tuple_matches(*h, seen, &why)) {
    stats_.reject(why);
    return false;
  }
  const uint64_t age = now_ns > h->send_time_ns ? now_ns - h->send_time_ns : h->send_time_ns - now_ns;
  if (age > opt_.window_ns) {
    stats_.reject(Reject::kStale);
    return false;
  }
  switch (guard_.check(h->campaign, h->tuple.src_ip, h->sequence, h->send_time_ns, now_ns)) {
    case Sighting::kFirst: return true;
    case Sighting::kReplayed: stats_.reject(Reject::kReplayed); break;
    case Sighting::kBehindWindow: stats_.reject(Reject::kBehindWindow); break;
    case Sighting::kTooManySenders: stats_.reject(Reject::kTooManySenders); break;
    case Sighting::kBeforeForgotten: stats_.reject(Reject::kStale); break;
  }
  return false;
}

bool accept_reply(std::span<const uint8_t> packet, const FiveTuple& seen, uint32_t campaign, const MacKey& key,
                  ProbeType want, ProbeStats& stats, ProbeHeader* h) {
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
  if (!tuple_matches(*h, seen, &why)) {
    stats.reject(why);
    return false;
  }
  return true;
}

}  // namespace weft::probe
