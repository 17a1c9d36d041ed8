// Per-sender sliding anti-replay windows (replay_guard.h; RFC 4303 section
// 3.4.3 with the bitmap kept as a ring indexed by sequence % kWindow, so an
// advance clears the slots it enters instead of shifting the map).
#include "weft/probe/replay_guard.h"

#include <algorithm>

namespace weft::probe {
namespace {

constexpr uint64_t kSweepEveryNs = 1'000'000'000ull;

bool test_bit(const ReplayGuard::Window& w, uint32_t seq) {
  const uint32_t pos = seq % ReplayGuard::kWindow;
  return (w.bits[pos / 64] >> (pos % 64)) & 1;
}

void set_bit(ReplayGuard::Window& w, uint32_t seq) {
  const uint32_t pos = seq % ReplayGuard::kWindow;
  w.bits[pos / 64] |= uint64_t{1} << (pos % 64);
}

// Clears the slots of sequences first, first+1, ..., first+count-1 (count <= kWindow).
void clear_slots(ReplayGuard::Window& w, uint32_t first, uint32_t count) {
  uint32_t pos = first % ReplayGuard::kWindow;
  while (count > 0) {
    const uint32_t off = pos % 64, n = std::min(64 - off, count);
    const uint64_t mask = n == 64 ? ~uint64_t{0} : ((uint64_t{1} << n) - 1) << off;
    w.bits[pos / 64] &= ~mask;
    pos = (pos + n) % ReplayGuard::kWindow;
    count -= n;
  }
}

}  // namespace

Sighting ReplayGuard::check(uint32_t campaign, uint32_t src_ip, uint32_t sequence, uint64_t send_time_ns,
                            uint64_t now_ns) {
  if (now_ns < last_sweep_ns_ || now_ns - last_sweep_ns_ >= kSweepEveryNs) forget_expired(now_ns);
  // At or before the newest send time of a forgotten window: possibly a
  // request that window accepted. Under a steady clock the acceptance window
  // already refused it as stale; after the clock stepped back it is refused here.
  if (send_time_ns <= forgotten_send_ns_) return Sighting::kBeforeForgotten;
  const uint64_t key = uint64_t{campaign} << 32 | src_ip;
  auto it = senders_.find(key);
  if (it == senders_.end()) {
    if (senders_.size() >= opt_.max_senders) return Sighting::kTooManySenders;
    Window& w = senders_[key];
    w.newest = sequence;
    w.newest_send_ns = send_time_ns;
    set_bit(w, sequence);
    return Sighting::kFirst;
  }
  Window& w = it->second;
  if (send_time_ns <= w.floor_send_ns) return Sighting::kBeforeForgotten;
  const uint32_t ahead = sequence - w.newest;  // serial-number arithmetic (RFC 1982)
  if (ahead != 0 && ahead < (uint32_t{1} << 31)) {
    clear_slots(w, w.newest + 1, std::min(ahead, kWindow));
    w.newest = sequence;
  } else if (const bool behind = w.newest - sequence >= kWindow; behind || test_bit(w, sequence)) {
    // Later than all this window accepted, so a copy of none of them, and
    // among the first sequences a sender uses: the sender restarted its
    // numbering (replay_guard.h).
    if (send_time_ns <= w.newest_send_ns || sequence - 1 >= kWindow) {
      return behind ? Sighting::kBehindWindow : Sighting::kReplayed;
    }
    w = Window{.newest = sequence, .newest_send_ns = send_time_ns, .floor_send_ns = w.newest_send_ns};
  }
  set_bit(w, sequence);
  w.newest_send_ns = std::max(w.newest_send_ns, send_time_ns);
  return Sighting::kFirst;
}

// A window whose newest accepted send time is more than forget_after_ns
// before now guards only requests the acceptance window already calls stale;
// forgotten_send_ns_ keeps refusing them if the clock later steps back.
void ReplayGuard::forget_expired(uint64_t now_ns) {
  last_sweep_ns_ = now_ns;
  if (now_ns <= opt_.forget_after_ns) return;
  const uint64_t horizon = now_ns - opt_.forget_after_ns;
  std::erase_if(senders_, [&](const auto& kv) {
    if (kv.second.newest_send_ns >= horizon) return false;
    forgotten_send_ns_ = std::max(forgotten_send_ns_, kv.second.newest_send_ns);
    return true;
  });
}

}  // namespace weft::probe
