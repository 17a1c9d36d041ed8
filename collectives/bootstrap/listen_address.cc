// The listen address of the TCP transport (listen_address.h).
#include "bootstrap/listen_address.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>

#include <cerrno>
#include <cstdlib>

#include <fmt/format.h>

#include "bootstrap/config_env.h"

namespace weft::coll::internal {
namespace {

constexpr const char* kLoopback = "127.0.0.1";

// "lo 127.0.0.1, eth0 10.0.1.1 (down)", for errors.
std::string describe(const std::vector<NetInterface>& ifs) {
  if (ifs.empty()) return "none";
  std::string s;
  for (const NetInterface& i : ifs) {
    if (!s.empty()) s += ", ";
    s += fmt::format("{} {}{}", i.name, i.address, i.up ? "" : " (down)");
  }
  return s;
}

bool in_loopback_net(const std::string& address) { return address.rfind("127.", 0) == 0; }

int prefix_of(const sockaddr* mask) {
  if (!mask || mask->sa_family != AF_INET) return 32;
  return __builtin_popcount(reinterpret_cast<const sockaddr_in*>(mask)->sin_addr.s_addr);
}

// One address of an override (`what` names it in errors: "WEFT_LISTEN_ADDR=
// '10.0.1.1'", or for a list "WEFT_LISTEN_ADDR='10.0.1.1,10.9.9.9':
// '10.9.9.9'").
Status check_address(const std::string& what, const std::string& address, const std::vector<NetInterface>& ifs) {
  in_addr a{};
  if (::inet_pton(AF_INET, address.c_str(), &a) != 1) return invalid_argument(fmt::format("{} is not an IPv4 address", what));
  if (a.s_addr == htonl(INADDR_ANY)) {
    return invalid_argument(
        fmt::format("{} is no address peers can connect to: name one of this host's ({})", what, describe(ifs)));
  }
  for (const NetInterface& i : ifs) {
    if (i.address == address || (i.loopback && i.up && in_loopback_net(address))) return ok_status();
  }
  return invalid_argument(fmt::format("{} is not an address of this host (its IPv4 addresses: {})", what, describe(ifs)));
}

}  // namespace

std::vector<std::string> address_list(std::string_view list) {
  std::vector<std::string> out;
  for (;;) {
    const size_t comma = list.find(',');
    out.emplace_back(list.substr(0, comma));
    if (comma == std::string_view::npos) return out;
    list.remove_prefix(comma + 1);
  }
}

Result<std::vector<NetInterface>> local_interfaces() {
  ifaddrs* list = nullptr;
  if (::getifaddrs(&list) != 0) return io_error("getifaddrs", errno);
  std::vector<NetInterface> out;
  for (const ifaddrs* a = list; a; a = a->ifa_next) {
    if (!a->ifa_addr || a->ifa_addr->sa_family != AF_INET) continue;
    char buf[INET_ADDRSTRLEN] = {};
    ::inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(a->ifa_addr)->sin_addr, buf, sizeof buf);
    out.push_back({a->ifa_name, buf, (a->ifa_flags & IFF_UP) != 0, (a->ifa_flags & IFF_LOOPBACK) != 0,
                   prefix_of(a->ifa_netmask)});
  }
  ::freeifaddrs(list);
  return out;
}

Result<IfnameFilter> IfnameFilter::parse(std::string_view spec) {
  IfnameFilter f;
  std::string_view s = spec;
  if (!s.empty() && s.front() == '^') f.exclude_ = true, s.remove_prefix(1);
  if (!s.empty() && s.front() == '=') f.exact_ = true, s.remove_prefix(1);
  while (!s.empty()) {
    const size_t comma = s.find(',');
    const std::string_view name = s.substr(0, comma);
    if (!name.empty()) f.names_.emplace_back(name);
    s = comma == std::string_view::npos ? std::string_view() : s.substr(comma + 1);
  }
  if (f.names_.empty()) return invalid_argument(fmt::format("interface list '{}' names no interface", spec));
  return f;
}

bool IfnameFilter::matches(std::string_view ifname) const {
  bool named = false;
  for (const std::string& n : names_) named = named || (exact_ ? ifname == n : ifname.substr(0, n.size()) == n);
  return named != exclude_;
}

Result<ListenOverrides> listen_overrides(const TcpOptions& tcp) {
  ListenOverrides o;
  if (!tcp.listen_address.empty() || !tcp.socket_ifname.empty()) {
    o.address = tcp.listen_address, o.address_from = "listen_address";
    o.ifname = tcp.socket_ifname, o.ifname_from = "socket_ifname";
  } else {
    if (const char* a = env_value("WEFT_LISTEN_ADDR")) o.address = a, o.address_from = "WEFT_LISTEN_ADDR";
    if (const char* i = env_value("WEFT_SOCKET_IFNAME")) o.ifname = i, o.ifname_from = "WEFT_SOCKET_IFNAME";
  }
  if (!o.address.empty() && !o.ifname.empty()) {
    return invalid_argument(fmt::format("{}='{}' and {}='{}' both choose the listen address: set one", o.address_from,
                                        o.address, o.ifname_from, o.ifname));
  }
  return o;
}

Result<std::string> override_address(const ListenOverrides& o, const std::vector<NetInterface>& ifs,
                                     std::string_view route_address) {
  if (!o.address.empty()) {
    const std::vector<std::string> list = address_list(o.address);
    const std::string given = fmt::format("{}='{}'", o.address_from, o.address);
    for (size_t k = 0; k < list.size(); ++k) {
      const std::string what = list.size() == 1 ? given : fmt::format("{}: '{}'", given, list[k]);
      WEFT_RETURN_IF_ERROR(check_address(what, list[k], ifs));
      for (size_t j = 0; j < k; ++j) {
        if (list[j] == list[k]) return invalid_argument(fmt::format("{} is named twice", what));
      }
    }
    return o.address;
  }
  const Result<IfnameFilter> f = IfnameFilter::parse(o.ifname);
  if (!f) return f.status().with_context(o.ifname_from);
  const NetInterface* first = nullptr;
  const NetInterface* first_not_lo = nullptr;
  for (const NetInterface& i : ifs) {
    if (!i.up || !f->matches(i.name)) continue;
    if (i.address == route_address) return i.address;
    if (!first) first = &i;
    if (!first_not_lo && !i.loopback) first_not_lo = &i;
  }
  if (first_not_lo) return first_not_lo->address;
  if (first) return first->address;
  return not_found(fmt::format("{}='{}' matches no IPv4 interface that is up (this host's: {})", o.ifname_from,
                               o.ifname, describe(ifs)));
}

Status check_listen_overrides(const TcpOptions& tcp) {
  WEFT_ASSIGN_OR_RETURN(const ListenOverrides o, listen_overrides(tcp));
  if (!o.any()) return ok_status();
  WEFT_ASSIGN_OR_RETURN(const std::vector<NetInterface> ifs, local_interfaces());
  return override_address(o, ifs, "").status();
}

std::string default_listen_address(int host_count, std::string_view route_address,
                                   const std::vector<NetInterface>& ifs) {
  if (host_count <= 1) return kLoopback;
  if (!route_address.empty()) return std::string(route_address);
  for (const NetInterface& i : ifs) {
    if (i.up && !i.loopback && i.name.rfind("docker", 0) != 0) return i.address;
  }
  return kLoopback;  // nothing but loopback: no other host could be reached from here
}

}  // namespace weft::coll::internal
