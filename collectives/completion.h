// In-order completion of operations made of parts (internal): op t is done
// when all its parts are; the pair's "done" ticket only moves past complete
// ops, so a ticket stands for itself and every earlier op (transport.h).
#pragma once

#include <deque>

#include "weft/collectives/transport.h"

namespace weft::coll::internal {

struct Completion {
  Ticket posted = 0, done = 0;
  std::deque<int> left;  // parts left of ops done+1, done+2, ...

  Ticket post(int parts) {
    left.push_back(parts);
    ++posted;
    advance();
    return posted;
  }
  // Nothing posted is pending: an op that completes as it is posted may
  // take post_done(), the tickets of post(1) and part_done without the
  // queue (a small shared-memory exchange: shm_transport.cc).
  bool idle() const { return left.empty(); }
  Ticket post_done() {
    ++posted;
    ++done;
    return posted;
  }
  void part_done(Ticket op) {
    --left[static_cast<size_t>(op - done - 1)];
    advance();
  }
  void advance() {
    while (!left.empty() && left.front() == 0) {
      left.pop_front();
      ++done;
    }
  }
};

}  // namespace weft::coll::internal
