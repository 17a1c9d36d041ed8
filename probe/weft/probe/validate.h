// Acceptance of probe packets: the checks every receiver runs before a packet
// may influence anything (wire.h). A request is accepted by a reflector only
// under a known campaign key, within the time window, and once; a reply is
// accepted by a sender only under its campaign key (the sender then matches it
// to an outstanding probe, or counts it as unexpected).
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <shared_mutex>
#include <span>
#include <unordered_set>

#include "weft/probe/stats.h"

namespace weft::probe {

// Campaign keys known to a process (the agent's control plane adds them, the
// reflector reads them). Thread-safe.
class KeyRing {
 public:
  void set(uint32_t campaign, const MacKey& key);
  void erase(uint32_t campaign);
  std::shared_ptr<const MacKey> find(uint32_t campaign) const;
  size_t size() const;

 private:
  mutable std::shared_mutex mu_;
  std::map<uint32_t, std::shared_ptr<const MacKey>> keys_;
};

// Remembers the last `capacity` accepted (campaign, sequence, source, sport)
// tuples; a second sighting is a replay. Bounded memory under flood.
class ReplayGuard {
 public:
  explicit ReplayGuard(size_t capacity = 1 << 20) : capacity_(capacity) {}
  // True the first time a tuple is seen (and remembers it).
  bool first_sighting(uint32_t campaign, uint32_t sequence, uint32_t src_ip, uint16_t sport);

 private:
  size_t capacity_;
  std::unordered_set<uint64_t> seen_;
  std::deque<uint64_t> order_;
};

struct AcceptOptions {
  uint64_t window_ns = 30'000'000'000ull;  // |now - send time| allowed (clock skew + queueing)
};

class RequestAcceptor {
 public:
  RequestAcceptor(const KeyRing& keys, ProbeStats& stats, AcceptOptions opt = {})
      : keys_(keys), stats_(stats), opt_(opt) {}
  // Full validation of a request from src_ip:sport; counts the reason on failure.
  bool accept(std::span<const uint8_t> packet, uint32_t src_ip, uint16_t sport, uint64_t now_ns, ProbeHeader* h);

 private:
  const KeyRing& keys_;
  ProbeStats& stats_;
  AcceptOptions opt_;
  ReplayGuard guard_;
};

// Validates a reply (or the echoed request inside an ICMP error) for one campaign.
bool accept_reply(std::span<const uint8_t> packet, uint32_t campaign, const MacKey& key, ProbeType want,
                  ProbeStats& stats, ProbeHeader* h);

}  // namespace weft::probe
