// The TCP store's wire format (internal; store.h documents the protocol):
// constants, little-endian integers, replies and the HMAC-SHA256 proofs of
// the handshake. Shared by the client (tcp_store.cc), the server's protocol
// core (store_core.cc) and the fuzz target.
#pragma once

#include <array>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

#include "weft/collectives/store.h"

namespace weft::coll::store_wire {

constexpr uint32_t kMagic = 0x31545357;  // "WST1" on the wire
constexpr uint32_t kVersion = 1;
constexpr uint32_t kFlagSecret = 1;
constexpr size_t kNonceBytes = 32;
constexpr size_t kProofBytes = 32;  // HMAC-SHA256
constexpr size_t kHelloBytes = 12 + kNonceBytes;
constexpr size_t kChallengeBytes = 4 + kNonceBytes;
constexpr size_t kRequestHeader = 12;
constexpr size_t kReplyHeader = 8;
// An error reply's message is cut to this many bytes; a client refuses
// longer error or handshake replies.
constexpr size_t kMaxMessage = 512;
enum : uint32_t { kSet = 1, kGet = 2 };
enum : uint32_t { kOk = 0, kError = 1 };

using Nonce = std::array<uint8_t, kNonceBytes>;
using Proof = std::array<uint8_t, kProofBytes>;

inline void put32(std::string& out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out += static_cast<char>((v >> (8 * i)) & 0xff);
}
inline uint32_t get32(const char* p) {
  uint32_t v = 0;
  for (int i = 3; i >= 0; --i) v = v << 8 | static_cast<uint8_t>(p[i]);
  return v;
}
inline std::string_view bytes(const Nonce& n) { return {reinterpret_cast<const char*>(n.data()), n.size()}; }

inline std::string reply(uint32_t status, std::string_view payload) {
  std::string out;
  out.reserve(kReplyHeader + payload.size());
  put32(out, status);
  put32(out, static_cast<uint32_t>(payload.size()));
  out += payload;
  return out;
}
inline std::string error_reply(std::string_view message) { return reply(kError, message.substr(0, kMaxMessage)); }

// Why a key or value of these sizes is refused ("" when it fits), naming
// the size and the limit.
std::string size_error(const TcpStoreLimits& limits, uint64_t key_bytes, uint64_t value_bytes);

// 32 bytes from the OS's random source (RAND_bytes); aborts if it has none,
// never falls back to a predictable nonce.
Nonce random_nonce();

// The handshake's proofs: each side MACs both nonces under its own label,
// so a proof of one direction is never valid in the other (no reflection).
// Without a secret both are zeros.
Proof server_proof(std::string_view secret, const Nonce& client, const Nonce& server);
Proof client_proof(std::string_view secret, const Nonce& server, const Nonce& client);
bool proofs_equal(const Proof& a, const char* b);  // constant time (CRYPTO_memcmp)

}  // namespace weft::coll::store_wire
