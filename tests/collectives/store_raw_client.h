// A client of the TCP store that speaks its protocol byte by byte
// (store.h), for tests that send what TcpStore never would.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <utility>

#include "bootstrap/store_wire.h"
#include "tcp/socket.h"
#include "weft/collectives/store.h"

namespace weft::coll::testing {

// A TcpStore client of the store listening on 127.0.0.1:port.
inline Result<std::unique_ptr<TcpStore>> store_client(uint16_t port, const TcpStoreOptions& o = {}) {
  return TcpStore::open("127.0.0.1", port, false, Clock::now() + std::chrono::seconds(10), o);
}

inline std::string store_request(uint32_t op, uint32_t klen, uint32_t vlen, const std::string& body = "") {
  std::string r;
  store_wire::put32(r, op);
  store_wire::put32(r, klen);
  store_wire::put32(r, vlen);
  return r + body;
}

// The client hello and, without a secret, the all-zero proof.
inline std::string store_hello(uint32_t magic = store_wire::kMagic, uint32_t version = store_wire::kVersion) {
  std::string h;
  store_wire::put32(h, magic);
  store_wire::put32(h, version);
  store_wire::put32(h, 0);
  return h + std::string(store_wire::kNonceBytes, '\x5a');
}

class RawStoreClient {
 public:
  explicit RawStoreClient(uint16_t port) {
    auto fd = tcp::connect_to(tcp::Endpoint{"127.0.0.1", port}, "0.0.0.0", 0, 1 << 16, Clock::now() + std::chrono::seconds(5));
    EXPECT_TRUE(fd) << fd.status().to_string();
    if (fd) fd_ = std::move(*fd);
  }
  // Hello and proof without a secret; true when the store let us in.
  bool handshake() {
    send(store_hello());
    if (reply().first != store_wire::kOk) return false;
    send(std::string(store_wire::kProofBytes, '\0'));
    return reply().first == store_wire::kOk;
  }
  void send(const std::string& bytes) {
    Status s = tcp::write_all(fd_.get(), bytes.data(), bytes.size(), Clock::now() + std::chrono::seconds(10));
    EXPECT_TRUE(s) << s.to_string();
  }
  // (status, payload); status ~0u when the connection closed or stalled.
  std::pair<uint32_t, std::string> reply() {
    const Deadline d = Clock::now() + std::chrono::seconds(10);
    char h[store_wire::kReplyHeader];
    if (!tcp::read_all(fd_.get(), h, sizeof h, d)) return {~0u, ""};
    std::string p(store_wire::get32(h + 4), '\0');
    if (!tcp::read_all(fd_.get(), p.data(), p.size(), d)) return {~0u, ""};
    return {store_wire::get32(h), p};
  }
  // True when the server closed the connection (EOF or reset) within 5 s.
  bool closed_by_server() {
    char c;
    const StatusCode code = tcp::read_all(fd_.get(), &c, 1, Clock::now() + std::chrono::seconds(5)).code();
    return code == StatusCode::kUnavailable || code == StatusCode::kIo;
  }
  int fd() const { return fd_.get(); }

 private:
  tcp::Fd fd_;
};

}  // namespace weft::coll::testing
