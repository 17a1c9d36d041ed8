#include <algorithm>
#include <map>
#include <mutex>

#include <fmt/format.h>

#include "loopback/loopback_transport.h"
#include "shm/shm_transport.h"
#include "tcp/tcp_transport.h"
#include "weft/collectives/transport.h"
#include "weft/config.h"
#if WEFT_HAVE_VERBS
#include "weft/verbs/verbs_transport.h"  // collectives/verbs/CMakeLists.txt adds it to this library
#endif

namespace weft::coll {
namespace {

struct Registry {
  std::mutex mu;
  std::map<std::string, TransportFactory> factories;
};

Registry& registry() {
  static Registry* r = [] {
    auto* reg = new Registry;  // never destroyed: factories may be used at exit
    reg->factories["loopback"] = make_loopback_transport;
    reg->factories["tcp"] = tcp::make_tcp_transport;
    reg->factories["shm"] = shm::make_shm_transport;
#if WEFT_HAVE_VERBS
    reg->factories["verbs"] = verbs::make_verbs_transport;
#endif
    return reg;
  }();
  return *r;
}

}  // namespace

std::vector<int> TransportConfig::peer_ranks() const {
  if (!peers.empty()) return peers;
  std::vector<int> all;
  for (int r = 0; r < size; ++r) {
    if (r != rank) all.push_back(r);
  }
  return all;
}

std::vector<int> TransportConfig::setup_peer_ranks() const { return connect_at_setup ? *connect_at_setup : peer_ranks(); }

Status Transport::connect_peers(const std::vector<int>& peers, Deadline deadline) {
  (void)deadline;
  for (int p : peers) {
    if (pair(p) == nullptr) {
      return failed_precondition(fmt::format("{} transport: rank {} was not connected at setup, and this transport "
                                             "connects no pair after setup",
                                             name(), p));
    }
  }
  return ok_status();
}

Status TransportConfig::validate() const {
  if (size < 1) return invalid_argument(fmt::format("transport: size must be >= 1 (got {})", size));
  if (rank < 0 || rank >= size) {
    return invalid_argument(fmt::format("transport: rank {} is outside [0, {})", rank, size));
  }
  if (local_index < -1 || local_index >= size) {
    return invalid_argument(fmt::format("transport: local_index must be -1 (unknown) or in 0..{} (got {})", size - 1,
                                        local_index));
  }
  if (ranks_on_host < 0 || ranks_on_host > size) {
    return invalid_argument(fmt::format("transport: ranks_on_host must be in 0..{} (got {})", size, ranks_on_host));
  }
  for (int p : peers) {
    if (p < 0 || p >= size || p == rank) {
      return invalid_argument(fmt::format("transport: peer {} is not another rank of [0, {})", p, size));
    }
  }
  if (connect_at_setup) {
    const std::vector<int> served = peer_ranks();
    for (int p : *connect_at_setup) {
      if (std::find(served.begin(), served.end(), p) == served.end()) {
        return invalid_argument(fmt::format("transport: rank {} is to be connected at setup but is not a peer", p));
      }
    }
  }
  if (!routes.empty() && routes.size() != static_cast<size_t>(size)) {
    return invalid_argument(fmt::format("transport: {} routes given for {} ranks", routes.size(), size));
  }
  if (tcp.connections_per_peer < 1 || tcp.connections_per_peer > 64) {
    return invalid_argument(fmt::format("tcp: connections_per_peer must be in 1..64 (got {})",
                                        tcp.connections_per_peer));
  }
  if (tcp.socket_buffer_bytes < 4096) {
    return invalid_argument(fmt::format("tcp: socket_buffer_bytes must be >= 4096 (got {})",
                                        tcp.socket_buffer_bytes));
  }
  if (tcp.congestion_control.size() > 15 ||
      tcp.congestion_control.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789_") != std::string::npos) {
    return invalid_argument(fmt::format("tcp: congestion_control '{}' is not an algorithm name (reno, cubic, ...; "
                                        "\"auto\" or \"\" for the host's default)", tcp.congestion_control));
  }
  if (tcp.spin_us < 0 || tcp.spin_us > 100000) {
    return invalid_argument(fmt::format("tcp: spin_us must be in 0..100000 (got {})", tcp.spin_us));
  }
  if (shm.spin_us < 0 || shm.spin_us > 100000) {
    return invalid_argument(fmt::format("shm: spin_us must be in 0..100000 (got {})", shm.spin_us));
  }
  if (shm.sleep_ms < 1 || shm.sleep_ms > 600000) {
    return invalid_argument(fmt::format("shm: sleep_ms must be in 1..600000 (got {})", shm.sleep_ms));
  }
  if (shm.slot_bytes < 4096 || shm.slot_bytes % 64 != 0) {
    return invalid_argument(fmt::format("shm: slot_bytes must be a multiple of 64, >= 4096 (got {})",
                                        shm.slot_bytes));
  }
  if (shm.slots < 2 || shm.slots > 1024) {
    return invalid_argument(fmt::format("shm: slots must be in 2..1024 (got {})", shm.slots));
  }
  if (verbs.port == 0) return invalid_argument("verbs: port 0 does not exist (ports are numbered from 1)");
  if (verbs.gid_index < -1 || verbs.gid_index > 65535) {
    return invalid_argument(fmt::format("verbs: gid_index must be -1 (scan) or in 0..65535 (got {})", verbs.gid_index));
  }
  if (verbs.queue_depth < 4 || verbs.queue_depth > 4096) {
    return invalid_argument(fmt::format("verbs: queue_depth must be in 4..4096 (got {})", verbs.queue_depth));
  }
  if (verbs.ack_timeout < 1 || verbs.ack_timeout > 31) {
    return invalid_argument(fmt::format("verbs: ack_timeout must be in 1..31 (got {})", verbs.ack_timeout));
  }
  if (verbs.spin_polls < 0) return invalid_argument(fmt::format("verbs: spin_polls must be >= 0 (got {})", verbs.spin_polls));
  for (const std::string& d : verbs.devices) {
    if (d.empty()) return invalid_argument("verbs: an empty name in the device list");
  }
  return ok_status();
}

std::string VerbsOptions::device_for(int local_index) const {
  if (!device.empty() || devices.empty()) return device;
  return devices[static_cast<size_t>(std::max(local_index, 0)) % devices.size()];
}

bool register_transport(const std::string& name, TransportFactory factory) {
  Registry& r = registry();
  std::lock_guard<std::mutex> l(r.mu);
  return r.factories.emplace(name, std::move(factory)).second;
}

std::vector<std::string> transport_names() {
  Registry& r = registry();
  std::lock_guard<std::mutex> l(r.mu);
  std::vector<std::string> out;
  for (const auto& [name, f] : r.factories) out.push_back(name);
  return out;
}

Result<std::unique_ptr<Transport>> make_transport(const TransportConfig& config, Store& store,
                                                  Deadline deadline) {
  WEFT_RETURN_IF_ERROR(config.validate());
  TransportFactory f;
  {
    Registry& r = registry();
    std::lock_guard<std::mutex> l(r.mu);
    auto it = r.factories.find(config.name);
    if (it == r.factories.end()) {
      std::string known;
      for (const auto& [name, fac] : r.factories) known += (known.empty() ? "" : ", ") + name;
      return not_found(fmt::format("unknown transport '{}' (known: {})", config.name, known));
    }
    f = it->second;
  }
  auto t = f(config, store, deadline);
  if (!t) return t.status().with_context(fmt::format("rank {}: {} transport", config.rank, config.name));
  return t;
}

}  // namespace weft::coll
