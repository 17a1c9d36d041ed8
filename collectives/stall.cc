// Stall resolution (stall.h): notices out, the chain followed, a verdict.
#include "stall.h"

#include <algorithm>
#include <thread>

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace weft::coll::internal {

StallVerdict stall_verdict(const std::vector<int>& waits_on, int me) {
  StallVerdict v;
  const int n = static_cast<int>(waits_on.size());
  std::vector<bool> seen(static_cast<size_t>(n), false);
  int cur = me;
  // Follow r -> waits_on[r] until a rank that said nothing (blamed), one
  // that waits on no one known, or a repeat (a cycle of ranks that all wait
  // on each other: no one stalled, the call was merely slow).
  while (cur >= 0 && cur < n && !seen[static_cast<size_t>(cur)]) {
    seen[static_cast<size_t>(cur)] = true;
    v.chain.push_back(cur);
    const int next = waits_on[static_cast<size_t>(cur)];
    if (next == Transport::kNoStallNotice) {
      v.blamed = cur;
      break;
    }
    cur = next;
  }
  if (v.blamed < 0) {
    if (cur >= 0 && cur < n) v.chain.push_back(cur);  // the repeat closes the cycle
    return v;
  }
  v.settled = true;
  for (int r = 0; r < n; ++r) {
    if (r == v.blamed) continue;
    if (waits_on[static_cast<size_t>(r)] == Transport::kNoStallNotice) v.settled = false;
    if (waits_on[static_cast<size_t>(r)] == v.blamed) v.waiters.push_back(r);
  }
  return v;
}

std::string describe(const StallVerdict& v) {
  if (v.blamed < 0) return fmt::format("wait chain {}", fmt::join(v.chain, " -> "));
  return fmt::format("rank {} stalled (wait chain {}; rank{} {} waited on it)", v.blamed, fmt::join(v.chain, " -> "),
                     v.waiters.size() == 1 ? "" : "s", fmt::join(v.waiters, ", "));
}

std::chrono::milliseconds stall_window(std::chrono::milliseconds timeout) {
  return std::clamp(timeout / 2, std::chrono::milliseconds(20), std::chrono::milliseconds(500));
}

Status resolve_stall(const Links& links, int me, int waits_on, const Status& why, std::chrono::milliseconds window) {
  for (Transport* t : links.transports) {
    if (!t->has_stall_notices()) return why;
  }
  for (Transport* t : links.transports) t->post_stall_notice(waits_on);
  const size_t n = links.pairs.size();
  std::vector<int> heard(n, Transport::kNoStallNotice);
  heard[static_cast<size_t>(me)] = waits_on;
  const auto start = Clock::now();
  const auto settle = start + std::min(window, kSettle);
  const auto end = start + window;
  StallVerdict v;
  for (;;) {
    // Polling moves what this rank posted, takes in notices, and reports a
    // peer that died, another rank's verdict (its abort notice) or abort().
    for (Transport* t : links.transports) WEFT_RETURN_IF_ERROR(t->poll().status());
    for (size_t r = 0; r < n; ++r) {
      if (r == static_cast<size_t>(me) || heard[r] != Transport::kNoStallNotice) continue;
      for (Transport* t : links.transports) {
        heard[r] = t->stall_notice(static_cast<int>(r));
        if (heard[r] != Transport::kNoStallNotice) break;
      }
      // Not every rank is connected to every other (communicator.h
      // "Connections"): a notice new to this rank goes on to all of its
      // peers, so that it reaches every rank of the communicator.
      if (heard[r] == Transport::kNoStallNotice) continue;
      for (Transport* t : links.transports) t->relay_stall_notice(static_cast<int>(r), heard[r]);
    }
    v = stall_verdict(heard, me);
    const auto now = Clock::now();
    if ((v.settled && now >= settle) || now >= end) break;
    // The ranks this one waits to hear from may share its CPU.
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  if (v.blamed >= 0) return deadline_exceeded(describe(v));
  return deadline_exceeded(fmt::format("{}; no rank stalled: {}", why.message(), describe(v)));
}

}  // namespace weft::coll::internal
