// Interface byte counters of another network namespace, over rtnetlink
// (RTM_GETLINK dump, IFLA_STATS64; rtnetlink(7)), from a socket opened inside
// that namespace once and kept: a reading is one syscall round trip, where
// `ip netns exec ... cat /sys/...` forked and remounted sysfs per namespace
// and took seconds per reading on a busy host.
//
//   auto spine = LinkStats::open("/run/netns/wf-s1").value();
//   auto bytes = spine.read().value();        // {"dn1": {rx, tx}, ...}
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "weft/common/status.h"

namespace weft::cli::demo {

struct IfBytes {
  uint64_t rx = 0;
  uint64_t tx = 0;
};

class LinkStats {
 public:
  // Needs CAP_SYS_ADMIN (setns(2)); the calling thread returns to its own
  // namespace before this returns.
  static Result<LinkStats> open(const std::string& netns_path);
  LinkStats(LinkStats&& o) noexcept;
  LinkStats& operator=(LinkStats&& o) noexcept;
  LinkStats(const LinkStats&) = delete;
  LinkStats& operator=(const LinkStats&) = delete;
  ~LinkStats();

  // Every interface of the namespace by name.
  Result<std::map<std::string, IfBytes>> read();

 private:
  explicit LinkStats(int fd, std::string ns) : fd_(fd), ns_(std::move(ns)) {}
  int fd_ = -1;
  std::string ns_;
  uint32_t seq_ = 0;
};

}  // namespace weft::cli::demo
