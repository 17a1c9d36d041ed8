// Stall resolution (internal; docs/collectives.md "Faults"): whom to blame
// when a collective call stalls on a rank that is alive but not progressing.
//
// A stopped rank (SIGSTOP, a debugger, an application stuck between calls)
// sends nothing and closes nothing, so only deadlines see it, and the first
// deadline to expire belongs to whichever rank started the call first. That
// rank waits on *someone*: under ring, on its predecessor, which itself
// waits on the stopped rank. So a wait that ends with kDeadlineExceeded does
// not name its peer at once:
//   1. the rank tells every peer whom it waits on (Transport::
//      post_stall_notice) and stops running the algorithm; it keeps polling
//      the transports, so what it already posted still moves;
//   2. a rank whose wait sees a notice does the same at once, before its own
//      deadline (the call is lost anyway: the first rank will fail it).
//      Each notice a collecting rank hears is passed on to its own peers
//      (Transport::relay_stall_notice): ranks are connected only to the
//      peers of their algorithms (communicator.h "Connections"), and this
//      way every notice reaches every rank of the call;
//   3. each collects the notices and follows "waits on" from itself to the
//      first rank that said nothing: that rank stalled. It decides when the
//      window ends, or earlier (after kSettle) once every rank but that one
//      has spoken;
//   4. the error names that rank and the chain; the communicator fails,
//      which aborts the transports and tells the peers, so that the ranks
//      still collecting end with the first verdict.
// A transport failure while collecting (a peer died, another rank decided,
// abort() from another thread) ends the window with that status.
//
// "Waits on" is the peer of the wait that was blocking the rank when it
// stopped (its deadline expired or a notice came in). A rank that says
// nothing within the window is in no wait of the call: not running, or busy
// outside the transports for that long — which is what the verdict means.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "context.h"

namespace weft::coll::internal {

struct StallVerdict {
  int blamed = -1;           // -1: none (the chain closes in a cycle, or ends at a rank waiting on no one known)
  std::vector<int> chain;    // this rank, the rank it waits on, ... (blamed last, or the rank that repeats)
  std::vector<int> waiters;  // ranks that said they wait on `blamed`, ascending
  bool settled = false;      // every rank but `blamed` has spoken: later notices cannot change the verdict
};

// waits_on[r]: whom rank r said it waits on (-1: no one known;
// Transport::kNoStallNotice: r said nothing). waits_on[me] is this rank's.
StallVerdict stall_verdict(const std::vector<int>& waits_on, int me);

// "rank 2 stalled (wait chain 0 -> 3 -> 2; ranks 1, 3 waited on it)"; the
// chain alone when no rank is blamed.
std::string describe(const StallVerdict& v);

// How long to collect notices: half the call's timeout, within [20 ms,
// 500 ms], so that the whole call ends within its timeout + 1 s (the
// bound process_test.cc checks) with room for the verdict to travel.
std::chrono::milliseconds stall_window(std::chrono::milliseconds timeout);
// A settled verdict is still held this long from the start of the window
// (or the window, if shorter): a rank descheduled on an oversubscribed host
// gets that long to answer before it is named (a CFS period is 24 ms at 8
// runnable tasks, sched(7)).
constexpr std::chrono::milliseconds kSettle{100};

// Resolves the stall that `why` (kDeadlineExceeded from a wait of this
// call: its deadline, or a notice) started; this rank (physical `me`) waited
// on `waits_on` (physical, -1 unknown). Returns `why` unchanged when a
// transport of the communicator carries no notices.
Status resolve_stall(const Links& links, int me, int waits_on, const Status& why, std::chrono::milliseconds window);

}  // namespace weft::coll::internal
