// How a rank chooses the IPv4 address its TCP peers connect to (and its own
// connections leave from) when TcpOptions::listen_address is "" (internal;
// the rules are documented in weft/collectives/transport.h, TcpOptions).
//
// As NCCL and Gloo do it: the address of the interface that routes to the
// rendezvous host (torchrun's MASTER_ADDR), so that ranks meet over the
// network the job was started on; an interface list in NCCL_SOCKET_IFNAME's
// syntax or an address when that is the wrong network (NCCL's
// src/misc/socket.cc, findInterfaces; Gloo's GLOO_SOCKET_IFNAME). On one
// host, loopback.
//
//   ListenOverrides o = listen_overrides(cfg.tcp);          // config, else environment
//   auto ifs = local_interfaces();                          // getifaddrs(3)
//   if (o.any()) addr = override_address(o, *ifs, store.local_address());
//   else addr = default_listen_address(host_count, store.local_address(), *ifs);
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "weft/collectives/transport.h"
#include "weft/common/status.h"

namespace weft::coll::internal {

// One IPv4 address of this host (of this network namespace).
struct NetInterface {
  std::string name;       // "eth0"
  std::string address;    // dotted IPv4
  bool up = false;        // IFF_UP
  bool loopback = false;  // IFF_LOOPBACK
  int prefix_len = 32;    // of ifa_netmask: the subnet the address is on
};

// The addresses of a comma-separated list ("10.0.1.1,10.0.3.1"), in order;
// empty elements are kept (override_address refuses them).
std::vector<std::string> address_list(std::string_view list);

// Every IPv4 address of this host, in getifaddrs(3) order.
Result<std::vector<NetInterface>> local_interfaces();

// An interface list in NCCL_SOCKET_IFNAME's syntax: comma-separated name
// prefixes ("eth,ib" matches eth0, eth1, ib0); "=" before the list makes the
// names exact ("=eth0"); "^" before it (and before "=") excludes them
// ("^docker,lo": every interface but those).
class IfnameFilter {
 public:
  static Result<IfnameFilter> parse(std::string_view spec);
  bool matches(std::string_view ifname) const;

 private:
  bool exclude_ = false;
  bool exact_ = false;
  std::vector<std::string> names_;
};

// What the user asked for, and where it was set (named in errors).
struct ListenOverrides {
  std::string address, address_from;  // "10.1.0.5", "WEFT_LISTEN_ADDR"
  std::string ifname, ifname_from;    // "eth1", "socket_ifname" (the config field)
  bool any() const { return !address.empty() || !ifname.empty(); }
};

// The config's listen_address or socket_ifname, else the environment's
// WEFT_LISTEN_ADDR or WEFT_SOCKET_IFNAME. One source setting both is an
// error: which one was meant cannot be told.
Result<ListenOverrides> listen_overrides(const TcpOptions& tcp);

// The address the overrides name, checked against this host's interfaces: an
// address must be one of them (127.0.0.0/8 while a loopback interface is
// up); a comma list of addresses (a rank with a port on several planes)
// must hold only such addresses, each once, and is returned as given; an
// interface list must match an interface that is up. Of several
// matches: the one with `route_address` (this process's address towards the
// rendezvous, "" if unknown), else the first that is not loopback, else the
// first.
Result<std::string> override_address(const ListenOverrides& o, const std::vector<NetInterface>& ifs,
                                     std::string_view route_address);

// listen_overrides + override_address without a route: a check that can
// run before the store is opened (launch_info_from_env, the C API). A rank
// 0 that failed after it began serving the TCP store would leave the ranks
// still connecting to retry until their deadline.
Status check_listen_overrides(const TcpOptions& tcp);

// No override: 127.0.0.1 when every rank is on this host (host_count 1);
// else `route_address`; else, as NCCL without NCCL_SOCKET_IFNAME, the first
// interface that is up and neither loopback nor docker*; else 127.0.0.1 (a
// host with nothing but loopback reaches no other host).
std::string default_listen_address(int host_count, std::string_view route_address,
                                   const std::vector<NetInterface>& ifs);

}  // namespace weft::coll::internal
