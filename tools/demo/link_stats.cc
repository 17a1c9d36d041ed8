// LinkStats (link_stats.h).
#include "link_stats.h"

#include <fcntl.h>
#include <linux/if_link.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <sched.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <utility>

#include <fmt/format.h>

namespace weft::cli::demo {
namespace {

struct FdGuard {
  int fd;
  ~FdGuard() {
    if (fd >= 0) ::close(fd);
  }
};

}  // namespace

Result<LinkStats> LinkStats::open(const std::string& netns_path) {
  FdGuard self{::open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC)};
  FdGuard target{::open(netns_path.c_str(), O_RDONLY | O_CLOEXEC)};
  if (self.fd < 0) return io_error("open /proc/self/ns/net", errno);
  if (target.fd < 0) return io_error("open " + netns_path, errno);
  if (::setns(target.fd, CLONE_NEWNET) != 0) return io_error("setns " + netns_path, errno);
  // A netlink socket belongs to the namespace it was created in, for good.
  const int fd = ::socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE);
  const int err = errno;
  if (::setns(self.fd, CLONE_NEWNET) != 0) {
    // Cannot happen with the fd we hold; carrying on in the wrong namespace would be worse.
    std::abort();
  }
  if (fd < 0) return io_error("netlink socket in " + netns_path, err);
  return LinkStats(fd, netns_path);
}

LinkStats::LinkStats(LinkStats&& o) noexcept
    : fd_(std::exchange(o.fd_, -1)), ns_(std::move(o.ns_)), seq_(o.seq_) {}

LinkStats& LinkStats::operator=(LinkStats&& o) noexcept {
  if (this != &o) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = std::exchange(o.fd_, -1);
    ns_ = std::move(o.ns_);
    seq_ = o.seq_;
  }
  return *this;
}

LinkStats::~LinkStats() {
  if (fd_ >= 0) ::close(fd_);
}

Result<std::map<std::string, IfBytes>> LinkStats::read() {
  struct {
    nlmsghdr nh;
    ifinfomsg ifm;
  } req{};
  req.nh.nlmsg_len = sizeof req;
  req.nh.nlmsg_type = RTM_GETLINK;
  req.nh.nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP;
  req.nh.nlmsg_seq = ++seq_;
  req.ifm.ifi_family = AF_UNSPEC;
  if (::send(fd_, &req, sizeof req, 0) != static_cast<ssize_t>(sizeof req)) return io_error("netlink send", errno);
  std::map<std::string, IfBytes> out;
  alignas(nlmsghdr) char buf[32768];
  // The netlink(3)/rtnetlink(3) walking macros are C: casts of their own.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wold-style-cast"
#pragma GCC diagnostic ignored "-Wcast-align"
  for (;;) {
    const ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return io_error("netlink recv in " + ns_, n < 0 ? errno : EPIPE);
    auto len = static_cast<unsigned int>(n);
    for (auto* nh = reinterpret_cast<nlmsghdr*>(buf); NLMSG_OK(nh, len); nh = NLMSG_NEXT(nh, len)) {
      if (nh->nlmsg_seq != seq_) continue;  // a stale answer
      if (nh->nlmsg_type == NLMSG_DONE) return out;
      if (nh->nlmsg_type == NLMSG_ERROR) {
        const auto* e = static_cast<const nlmsgerr*>(NLMSG_DATA(nh));
        return io_error("RTM_GETLINK in " + ns_, -e->error);
      }
      if (nh->nlmsg_type != RTM_NEWLINK) continue;
      auto* ifm = static_cast<ifinfomsg*>(NLMSG_DATA(nh));
      unsigned int alen = IFLA_PAYLOAD(nh);
      std::string name;
      IfBytes bytes;
      for (auto* a = IFLA_RTA(ifm); RTA_OK(a, alen); a = RTA_NEXT(a, alen)) {
        if (a->rta_type == IFLA_IFNAME) {
          name = static_cast<const char*>(RTA_DATA(a));
        } else if (a->rta_type == IFLA_STATS64 && RTA_PAYLOAD(a) >= sizeof(rtnl_link_stats64)) {
          rtnl_link_stats64 s;
          std::memcpy(&s, RTA_DATA(a), sizeof s);  // attribute data is only 4-byte aligned
          bytes = {s.rx_bytes, s.tx_bytes};
        }
      }
      if (!name.empty()) out[name] = bytes;
    }
  }
#pragma GCC diagnostic pop
}

}  // namespace weft::cli::demo
