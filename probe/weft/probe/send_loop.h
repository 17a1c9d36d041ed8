// The kernel UDP sender's sendmmsg(2) loop (socket.cc), apart from the socket
// so its retry policy can be tested with scripted results.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>

namespace weft::probe {

struct SendLoopTally {
  uint64_t sent = 0;
  uint64_t errors = 0;  // probes given up (ProbeStats::send_errors)
};

// Sends n messages with send_from(done), which sends messages [done, n) as
// sendmmsg(2) does: it returns how many left, or -1 with errno set.
//   EAGAIN, ENOBUFS: the socket buffer is full; retried up to spin_budget
//     times in a row. The budget is for one stall: every send that succeeds
//     refills it, so a long group that stalls now and then loses nothing.
//     Once it is spent, a probe that meets a full buffer is given up at once
//     until a send succeeds again (the socket is stuck: spending the whole
//     budget on every probe would not help).
//   EHOSTUNREACH, ENETUNREACH, ECONNREFUSED: an ICMP error the socket
//     recorded (ip(7) IP_RECVERR) that the next send returns once, without
//     sending; tried again up to twice.
//   anything else: that probe is given up, the next is tried.
SendLoopTally send_until_done(size_t n, int spin_budget, const std::function<int(size_t done)>& send_from);

}  // namespace weft::probe
