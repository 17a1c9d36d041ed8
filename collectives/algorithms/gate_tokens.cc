#include "algorithms/gate_tokens.h"

#include <algorithm>

namespace weft::coll::internal {

Result<Ticket> GateTokens::post_until(int peer, int n) {
  const auto p = static_cast<size_t>(peer);
  if (posted_[p] >= n) return Ticket{0};
  while (posted_[p] < n) {
    WEFT_ASSIGN_OR_RETURN(last_[p], ctx_.recv(peer, kScratch, 0, 0));
    ++posted_[p];
  }
  return last_[p];
}

Status GateTokens::drain(int peer, int n) {
  WEFT_ASSIGN_OR_RETURN(Ticket t, post_until(peer, n));
  return t == 0 ? ok_status() : ctx_.wait_recv(peer, t);
}

Status GateTokens::emit(const std::vector<int>& to) {
  for (int w : to) WEFT_RETURN_IF_ERROR(ctx_.send(w, kScratch, 0, 0).status());
  return ok_status();
}

Status GateTokens::wait_gates(const StepGates& sg, int partner, Ticket data, bool* emitted) {
  need_.clear();
  for (const auto& [peer, n] : sg.waits) {
    WEFT_ASSIGN_OR_RETURN(Ticket t, post_until(peer, n));
    if (t != 0) need_.emplace_back(peer, t);
  }
  size_t next = 0;
  if (!need_.empty() && data != 0 && !sg.early.empty()) {
    Status s = ctx_.poll_until([&](int& blame) -> Result<bool> {
      WEFT_ASSIGN_OR_RETURN(bool in, ctx_.test_recv(partner, data));
      if (in) {
        WEFT_RETURN_IF_ERROR(emit(sg.early));
        *emitted = true;
        return true;
      }
      for (; next < need_.size(); ++next) {
        WEFT_ASSIGN_OR_RETURN(bool got, ctx_.test_recv(need_[next].first, need_[next].second));
        if (!got) {
          blame = need_[next].first;
          return false;
        }
      }
      return true;
    });
    if (!s) return s;
  }
  for (; next < need_.size(); ++next) WEFT_RETURN_IF_ERROR(ctx_.wait_recv(need_[next].first, need_[next].second));
  return ok_status();
}

std::vector<std::vector<int>> token_steps(const std::vector<routing::Gate>& gates, int me, int size) {
  std::vector<std::vector<int>> steps(static_cast<size_t>(size));
  for (const routing::Gate& g : gates) {
    if (g.waiter == me) steps[static_cast<size_t>(g.from)].push_back(g.after_step);
  }
  for (auto& v : steps) std::sort(v.begin(), v.end());
  return steps;
}

int tokens_until(const std::vector<std::vector<int>>& steps, int peer, int step, bool inclusive) {
  const auto& v = steps[static_cast<size_t>(peer)];
  return static_cast<int>(inclusive ? std::upper_bound(v.begin(), v.end(), step) - v.begin()
                                    : std::lower_bound(v.begin(), v.end(), step) - v.begin());
}

}  // namespace weft::coll::internal
