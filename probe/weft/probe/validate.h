// Acceptance of probe packets: the checks every receiver runs before a packet
// may influence anything (wire.h). A request is accepted by a reflector only
// under a known campaign key, from and to the 5-tuple its MAC names, within
// the time window, and once (replay_guard.h); a reply is accepted by a sender
// only under its campaign key and from and to the 5-tuple its MAC names (the
// sender then matches it to an outstanding probe, or counts it as unexpected).
// Each check runs only on what passed the ones before it: a forged packet
// fails the MAC before it can touch the replay guard.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <shared_mutex>
#include <span>

#include "weft/probe/replay_guard.h"
#include "weft/probe/stats.h"

namespace weft::probe {

// Campaign keys known to a process (the agent's control plane adds them, the
// reflector reads them). Thread-safe. A controller that dies before it
// retires its campaign leaves the key behind; an agent that runs for months
// would pile them up, so the ring holds at most `capacity` keys and setting
// one more forgets the one set (or set again) longest ago.
class KeyRing {
 public:
  static constexpr size_t kDefaultCapacity = 256;  // campaigns at once, far above what one fabric runs
  explicit KeyRing(size_t capacity = kDefaultCapacity) : capacity_(capacity < 1 ? 1 : capacity) {}
  void set(uint32_t campaign, const MacKey& key);
  void erase(uint32_t campaign);
  std::shared_ptr<const MacKey> find(uint32_t campaign) const;
  size_t size() const;
  uint64_t forgotten() const;  // keys dropped to make room

 private:
  struct Entry {
    std::shared_ptr<const MacKey> key;
    uint64_t set_at = 0;  // order of set()
  };
  mutable std::shared_mutex mu_;
  size_t capacity_;
  uint64_t sets_ = 0, forgotten_ = 0;
  std::map<uint32_t, Entry> keys_;
};

struct AcceptOptions {
  uint64_t window_ns = 30'000'000'000ull;  // |now - send time| allowed (clock skew + queueing)
  size_t max_senders = 16384;              // replay windows kept at once (replay_guard.h)
};

class RequestAcceptor {
 public:
  RequestAcceptor(const KeyRing& keys, ProbeStats& stats, AcceptOptions opt = {})
      : keys_(keys), stats_(stats), opt_(opt), guard_({opt.max_senders, opt.window_ns}) {}
  // Full validation of a request that arrived with 5-tuple `seen` (as the
  // receiver read it off the wire); counts the reason on failure. `now_ns`
  // is this host's CLOCK_REALTIME, used as it is: a clock stepped back (or
  // corrected after running ahead) judges freshness by the new reading, and
  // the replay guard still refuses requests it forgot (replay_guard.h).
  bool accept(std::span<const uint8_t> packet, const FiveTuple& seen, uint64_t now_ns, ProbeHeader* h);
  const ReplayGuard& guard() const { return guard_; }

 private:
  const KeyRing& keys_;
  ProbeStats& stats_;
  AcceptOptions opt_;
  ReplayGuard guard_;
};

// Validates a reply (or the echoed request inside an ICMP error) for one
// campaign, received with 5-tuple `seen` (for an ICMP-quoted request: the
// quoted one).
bool accept_reply(std::span<const uint8_t> packet, const FiveTuple& seen, uint32_t campaign, const MacKey& key,
                  ProbeType want, ProbeStats& stats, ProbeHeader* h);

}  // namespace weft::probe
