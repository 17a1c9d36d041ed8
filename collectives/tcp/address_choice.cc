// address_choice.h: a connection's address pair among a rank's addresses.
#include "tcp/address_choice.h"

#include <arpa/inet.h>

#include <fmt/format.h>

#include "bootstrap/listen_address.h"

namespace weft::coll::tcp {
namespace {

// The host-order IPv4 address of a dotted quad; false when it is none.
bool ipv4(const std::string& s, uint32_t* out) {
  in_addr a{};
  if (::inet_pton(AF_INET, s.c_str(), &a) != 1) return false;
  *out = ntohl(a.s_addr);
  return true;
}

bool same_subnet(const LocalAddress& l, const std::string& remote) {
  uint32_t a = 0, b = 0;
  if (l.prefix_len <= 0 || l.prefix_len > 32 || !ipv4(l.address, &a) || !ipv4(remote, &b)) return false;
  const uint32_t mask = l.prefix_len == 32 ? ~0u : ~(~0u >> l.prefix_len);
  return (a & mask) == (b & mask);
}

std::string locals_text(const std::vector<LocalAddress>& l) {
  std::string s;
  for (const auto& a : l) {
    if (!s.empty()) s += ',';
    s += a.address;
  }
  return s;
}

}  // namespace

Result<AddressPair> choose_addresses(const std::vector<LocalAddress>& locals, const std::vector<Endpoint>& remotes,
                                     const PeerRoute& route, int me, int peer) {
  const auto fail = [&](const std::string& why) {
    return invalid_argument(fmt::format("tcp transport: rank {} -> rank {}: {} (rank {} listens on {}; rank {} on {})", me,
                                        peer, why, me, locals_text(locals), peer, endpoints_to_string(remotes)));
  };
  if (locals.empty() || remotes.empty()) return fail("no address to connect from or to");
  // Score the pairs the plan leaves open: 2 = one subnet, 1 = one position,
  // 0 = neither; the first best wins (rules in address_choice.h).
  int best = -1;
  AddressPair pick;
  bool src_found = route.src_addr.empty(), dst_found = route.dst_addr.empty();
  for (size_t r = 0; r < remotes.size(); ++r) {
    if (!route.dst_addr.empty() && remotes[r].host != route.dst_addr) continue;
    dst_found = true;
    for (size_t l = 0; l < locals.size(); ++l) {
      if (!route.src_addr.empty() && locals[l].address != route.src_addr) continue;
      src_found = true;
      const int score = same_subnet(locals[l], remotes[r].host) ? 2 : l == r ? 1 : 0;
      if (score > best) best = score, pick = {locals[l].address, remotes[r]};
    }
  }
  if (!src_found) {
    for (const auto& l : locals) src_found = src_found || l.address == route.src_addr;
  }
  if (!src_found) return fail(fmt::format("the plan's src_addr {} is not an address of rank {}", route.src_addr, me));
  if (!dst_found) return fail(fmt::format("the plan's dst_addr {} is not an address of rank {}", route.dst_addr, peer));
  return pick;
}

std::string endpoints_to_string(const std::vector<Endpoint>& e) {
  std::string s;
  for (const auto& x : e) {
    if (!s.empty()) s += ',';
    s += x.to_string();
  }
  return s;
}

Result<std::vector<Endpoint>> parse_endpoints(const std::string& s) {
  std::vector<Endpoint> out;
  for (const std::string& one : internal::address_list(s)) {
    WEFT_ASSIGN_OR_RETURN(Endpoint e, Endpoint::parse(one));
    out.push_back(std::move(e));
  }
  return out;
}

}  // namespace weft::coll::tcp
