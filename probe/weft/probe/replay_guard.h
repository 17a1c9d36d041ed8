// The reflector's anti-replay state: one sliding window of sequence numbers
// per sender, as IPsec's anti-replay window (RFC 4303 section 3.4.3), keyed on
// fields the probe MAC covers (campaign, source address), so a packet must be
// authentic before it can touch the guard.
//
// A sender numbers its requests of a campaign 1, 2, 3, ... across all its
// destinations (campaign.cc), so a reflector sees an increasing, sparse subset.
// Per sender the guard keeps the newest sequence accepted and a bitmap of the
// kWindow sequences at and below it: a sequence above the newest advances the
// window; one inside it is accepted once (its bit); one below it is rejected.
// Sequences compare in serial-number arithmetic (RFC 1982), so they may wrap.
//
// Guarantee: a request is accepted at most once, at any rate, whatever the
// clock does. A window is dropped only when every request it accepted has a
// send time more than `forget_after_ns` before `now`, i.e. when the
// acceptance window (validate.h) already rejects them all as stale; the
// guard then refuses every send time at or before the newest one it forgot
// (kBeforeForgotten), so a clock stepped back later re-opens none of them,
// while `now` itself is never latched: a reflector whose clock was ahead and
// is corrected accepts genuine requests at once. Under a steady clock that
// floor is more than forget_after_ns behind now and refuses nothing the
// acceptance window lets through.
//
// A sender that restarts (an agent process restarted under the same
// campaign or monitor run) numbers from 1 again. A request whose sequence
// the window calls replayed or behind, but whose send time is later than
// every request the window accepted, is not a copy of any of them; if its
// sequence is also among the first kWindow (1..4096, where a sender starts),
// the sender's numbering restarted. (The sequence bound keeps a request held
// back across a step of the sender's clock from passing for a restart, except
// within the first kWindow requests of a run.) The window starts again at that request, and
// refuses every send time at or before the old window's newest (its floor,
// kBeforeForgotten), so none of the old requests is accepted again. Without
// this a restarted sender was refused by every reflector until its old
// window expired (30 s of probes lost, read as failed links by a watcher).
// Serial arithmetic needs a sender to send
// fewer than 2^31 requests per 2 x forget_after_ns (35.8 M probes/s for
// +-30 s). Memory: at most max_senders windows of kBytesPerSender; a new
// sender beyond that, while every window is live, is refused.
//
//   ReplayGuard g({.max_senders = 16384, .forget_after_ns = 30'000'000'000});
//   switch (g.check(campaign, src_ip, sequence, send_time_ns, now_ns)) { ... }
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <unordered_map>

namespace weft::probe {

struct ReplayGuardOptions {
  size_t max_senders = 16384;                    // (campaign, source address) windows kept at once
  uint64_t forget_after_ns = 30'000'000'000ull;  // the acceptance window of send times
};

enum class Sighting : uint8_t {
  kFirst,           // accepted (and remembered)
  kReplayed,        // inside the window, seen before
  kBehindWindow,    // more than kWindow below the sender's newest
  kTooManySenders,  // a new sender while max_senders windows are live
  kBeforeForgotten, // sent at or before the newest send time of a forgotten window (or of the
                    // sender's window before it restarted its numbering)
};

class ReplayGuard {
 public:
  // Sequences tracked at and below a sender's newest: a genuine request may
  // arrive after at most kWindow - 1 later ones of its sender.
  static constexpr uint32_t kWindow = 4096;

  explicit ReplayGuard(ReplayGuardOptions opt = {}) : opt_(opt) {}

  Sighting check(uint32_t campaign, uint32_t src_ip, uint32_t sequence, uint64_t send_time_ns, uint64_t now_ns);

  size_t senders() const { return senders_.size(); }

  struct Window {
    uint32_t newest = 0;           // highest sequence accepted
    uint64_t newest_send_ns = 0;   // latest send time accepted
    uint64_t floor_send_ns = 0;    // send times at or before it are refused (the sender restarted)
    std::array<uint64_t, kWindow / 64> bits{};  // bit (s % kWindow): sequence s accepted
  };
  // Memory per sender: the window and its hash-table node (key, hash, link).
  static constexpr size_t kBytesPerSender = sizeof(Window) + 3 * sizeof(uint64_t);
  static_assert(kBytesPerSender == 560, "docs/probe.md states the guard's memory bound from this size");

 private:
  void forget_expired(uint64_t now_ns);

  ReplayGuardOptions opt_;
  std::unordered_map<uint64_t, Window> senders_;
  uint64_t forgotten_send_ns_ = 0;  // newest send time of any window dropped
  uint64_t last_sweep_ns_ = 0;      // forget_expired runs at most once a second of `now`
};

}  // namespace weft::probe
