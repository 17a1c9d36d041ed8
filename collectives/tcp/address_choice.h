// Which of its addresses a rank's connection leaves from, and which of the
// peer's it goes to (internal; docs/collectives-setup.md "Several
// addresses, several planes").
//
// A rank may listen on several addresses: one per plane port of its NIC on
// a multi-plane fabric (docs/topology-format.md "Rails and planes"), listed
// plane by plane. The planes share no switch, so a connection must leave
// from and arrive at addresses of one plane. A route plan says which
// (PeerRoute::src_addr / dst_addr, from the plan's flow); what it leaves
// open is chosen here, first match wins:
//   1. a pair on one subnet (the local address's prefix holds the remote);
//   2. a pair at the same position in both lists (the same plane, when both
//      ranks list their ports plane by plane);
//   3. the first of each list (one address each: the only choice).
//
//   auto pick = choose_addresses(locals, peer_endpoints, route, me, peer);
//   connect_to(pick->remote, pick->local, sport, ...);
#pragma once

#include <string>
#include <vector>

#include "tcp/socket.h"
#include "weft/collectives/transport.h"
#include "weft/common/status.h"

namespace weft::coll::tcp {

// One address this rank listens on, with its subnet's prefix length (32
// when unknown: then it shares a subnet with no other address).
struct LocalAddress {
  std::string address;
  int prefix_len = 32;
};

struct AddressPair {
  std::string local;  // this rank's address the connection binds
  Endpoint remote;    // the peer's listening endpoint it connects to
};

// The pair for a connection from rank `me` to rank `peer` (named in
// errors), by the rules above. A planned src_addr must be one of `locals`
// and a planned dst_addr one of `remotes`, else the error names the rank
// pair and both lists.
Result<AddressPair> choose_addresses(const std::vector<LocalAddress>& locals, const std::vector<Endpoint>& remotes,
                                     const PeerRoute& route, int me, int peer);

// "10.0.1.1:47000,10.0.3.1:47000": what a rank publishes, and back.
std::string endpoints_to_string(const std::vector<Endpoint>& e);
Result<std::vector<Endpoint>> parse_endpoints(const std::string& s);

}  // namespace weft::coll::tcp
