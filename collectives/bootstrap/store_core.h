// The TCP store server's protocol, without sockets (internal): the keys, the
// gets waiting for them and every connection's handshake and partial
// request, driven by the bytes each connection delivers. The event loop
// (tcp_store_server.cc) only moves bytes; the fuzz target
// (tests/fuzz/store_protocol_fuzz.cc) drives this directly.
//
//   StoreCore core(limits, secret);
//   const uint64_t c = core.open();
//   std::vector<StoreCore::Out> out;
//   if (!core.feed(c, bytes, out)) { /* send out, then close c */ }
//
// Single-threaded: one event loop calls it; counters() may be read from
// any thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "bootstrap/store_wire.h"
#include "weft/collectives/store.h"

namespace weft::coll::store_internal {

class StoreCore {
 public:
  struct Out {
    uint64_t conn;
    std::string bytes;
  };

  StoreCore(TcpStoreLimits limits, std::string secret) : limits_(limits), secret_(std::move(secret)) {}

  // A new connection; its id.
  uint64_t open();
  // Takes bytes that connection c delivered; appends what must be sent, to
  // c and to the connections whose gets a set answered, to `out`. False:
  // close c once its part of `out` is sent (garbage, refused); counted.
  bool feed(uint64_t c, std::string_view bytes, std::vector<Out>& out);
  // c hung up, or is being closed: forget it and its waiting get.
  void close(uint64_t c);
  // True when c has finished its handshake.
  bool ready(uint64_t c) const;
  // The handshake timer of c fired: counts it if c is still not ready.
  void handshake_expired(uint64_t c);
  void over_capacity() { ++over_capacity_; }

  size_t connections() const { return conns_.size(); }
  size_t keys() const { return kv_.size(); }
  size_t held_bytes() const { return held_; }
  TcpStoreCounters counters() const;

  // Bookkeeping charged per key on top of its key and value (store.h).
  static constexpr size_t kKeyOverhead = 64;

 private:
  enum class Phase { kHello, kProof, kReady };
  struct Conn {
    Phase phase = Phase::kHello;
    std::string in;       // bytes not consumed yet
    uint64_t skip = 0;    // bytes of an oversize request still to drop
    bool waiting = false;  // a get of this connection waits for wait_key
    std::string wait_key;
    store_wire::Nonce client_nonce{}, server_nonce{};
  };
  bool drop(std::atomic<uint64_t>& counter) {
    ++counter;
    return false;
  }
  bool hello(uint64_t id, Conn& c, std::vector<Out>& out);
  bool proof(uint64_t id, Conn& c, std::vector<Out>& out);
  // One request of a ready connection; 0 when more bytes are needed.
  // Sets *keep to false when the connection must go.
  size_t request(uint64_t id, Conn& c, std::vector<Out>& out, bool* keep);
  void set(uint64_t id, std::string key, std::string value, std::vector<Out>& out);

  TcpStoreLimits limits_;
  std::string secret_;
  uint64_t next_ = 1;
  std::unordered_map<uint64_t, Conn> conns_;
  std::map<std::string, std::string> kv_;
  std::multimap<std::string, uint64_t> waiting_;  // key -> connection whose get waits
  size_t held_ = 0;
  std::atomic<uint64_t> accepted_{0}, garbage_{0}, refused_{0}, timed_out_{0}, over_capacity_{0}, oversize_{0},
      full_{0};
};

}  // namespace weft::coll::store_internal
