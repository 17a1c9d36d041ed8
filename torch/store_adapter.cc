#include "store_adapter.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <exception>
#include <thread>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

namespace weft::pt {
namespace {

// The address connect(2) on a UDP socket picks for `host`: the kernel's
// route lookup, nothing sent (udp(7)). The same address a TCP connection to
// the store leaves from.
std::string source_address_towards(const std::string& host, uint16_t port) {
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* res = nullptr;
  if (::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &res) != 0 || !res) return "";
  // A name other than localhost that this host maps to loopback (Debian's
  // and Ubuntu's 127.0.1.1 for the host's own name): the other hosts reach
  // the store over the network, which this route does not name; unknown.
  in_addr literal{};
  const uint32_t to = ntohl(reinterpret_cast<const sockaddr_in*>(res->ai_addr)->sin_addr.s_addr);
  if (to >> 24 == 127 && ::inet_pton(AF_INET, host.c_str(), &literal) != 1 && host != "localhost" &&
      host.rfind("localhost.", 0) != 0) {
    ::freeaddrinfo(res);
    return "";
  }
  std::string out;
  const int fd = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd >= 0) {
    sockaddr_in local{};
    socklen_t len = sizeof(local);
    char text[INET_ADDRSTRLEN] = {};
    if (::connect(fd, res->ai_addr, res->ai_addrlen) == 0 &&
        ::getsockname(fd, reinterpret_cast<sockaddr*>(&local), &len) == 0 &&
        ::inet_ntop(AF_INET, &local.sin_addr, text, sizeof(text))) {
      out = text;
    }
    ::close(fd);
  }
  ::freeaddrinfo(res);
  return out;
}

}  // namespace

std::string route_address(const c10::intrusive_ptr<c10d::Store>& store) {
  c10::intrusive_ptr<c10d::Store> s = store;
  while (auto* prefix = dynamic_cast<c10d::PrefixStore*>(s.get())) s = prefix->getUnderlyingStore();
  if (auto* tcp = dynamic_cast<c10d::TCPStore*>(s.get())) return source_address_towards(tcp->getHost(), tcp->getPort());
  return "";
}

void hold_until_every_rank_failed(const c10::intrusive_ptr<c10d::Store>& store, int size,
                                  std::chrono::steady_clock::time_point deadline) {
  try {
    const std::string key = "weft/failed";
    for (int64_t n = store->add(key, 1); n < size; n = store->add(key, 0)) {
      if (std::chrono::steady_clock::now() >= deadline) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  } catch (const std::exception&) {
    // The store is gone (rank 0 failed first and left): nothing to hold.
  }
}

C10dStore::C10dStore(c10::intrusive_ptr<c10d::Store> store)
    : store_(std::move(store)), local_address_(route_address(store_)) {}

Status C10dStore::set(const std::string& key, const std::string& value) {
  try {
    store_->set(key, std::vector<uint8_t>(value.begin(), value.end()));
    return ok_status();
  } catch (const std::exception& e) {
    return unavailable(fmt::format("rendezvous store: set '{}': {}", key, e.what()));
  }
}

// c10d::Store::wait takes a timeout, where 0 means "forever": at least 1 ms
// is asked for, and a wait that throws after the deadline is a deadline.
Result<std::string> C10dStore::get(const std::string& key, std::chrono::steady_clock::time_point deadline) {
  using std::chrono::milliseconds;
  const auto left = std::chrono::duration_cast<milliseconds>(deadline - std::chrono::steady_clock::now());
  try {
    store_->wait({key}, std::max(left, milliseconds(1)));
    const std::vector<uint8_t> v = store_->get(key);
    return std::string(v.begin(), v.end());
  } catch (const std::exception& e) {
    if (std::chrono::steady_clock::now() >= deadline) {
      return deadline_exceeded(fmt::format("rendezvous store: key '{}' not set in time", key));
    }
    return unavailable(fmt::format("rendezvous store: get '{}': {}", key, e.what()));
  }
}

}  // namespace weft::pt
