// One stats struct for every probe backend and receiver (STYLE.md: a device
// interface with shared stats, after Seastar): what was sent, answered, timed
// out and retried, and each rejection by reason.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <string>

#include "weft/probe/wire.h"

namespace weft::probe {

struct ProbeStats {
  uint64_t sent = 0;
  uint64_t answered = 0;
  uint64_t timed_out = 0;  // probes whose every retry went unanswered
  uint64_t retried = 0;
  uint64_t send_errors = 0;  // EAGAIN/ENOBUFS etc. from the kernel or the NIC
  std::array<uint64_t, static_cast<size_t>(Reject::kCount)> rejected{};

  void reject(Reject r) { ++rejected[static_cast<size_t>(r)]; }
  uint64_t rejected_total() const;
  uint64_t rejected_for(Reject r) const { return rejected[static_cast<size_t>(r)]; }
  std::map<std::string, int64_t> rejected_by_name() const;  // non-zero reasons only
  ProbeStats& operator+=(const ProbeStats& o);
};

}  // namespace weft::probe
