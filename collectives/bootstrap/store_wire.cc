// HMAC-SHA256 proofs and nonces of the TCP store's handshake (store_wire.h),
// with OpenSSL's one-shot HMAC() and RAND_bytes().
#include "bootstrap/store_wire.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#include <cstdlib>

#include <fmt/format.h>

namespace weft::coll::store_wire {
namespace {

Proof proof(std::string_view secret, std::string_view label, const Nonce& first, const Nonce& second) {
  Proof out{};
  if (secret.empty()) return out;
  std::string msg(label);
  msg += bytes(first);
  msg += bytes(second);
  unsigned int n = 0;
  HMAC(EVP_sha256(), secret.data(), static_cast<int>(secret.size()), reinterpret_cast<const uint8_t*>(msg.data()),
       msg.size(), out.data(), &n);
  return out;
}

}  // namespace

std::string size_error(const TcpStoreLimits& limits, uint64_t key_bytes, uint64_t value_bytes) {
  if (key_bytes > limits.max_key_bytes) {
    return fmt::format("key of {} bytes is over the store's limit of {} bytes (TcpStoreLimits::max_key_bytes)",
                       key_bytes, limits.max_key_bytes);
  }
  if (value_bytes > limits.max_value_bytes) {
    return fmt::format("value of {} bytes is over the store's limit of {} bytes (TcpStoreLimits::max_value_bytes)",
                       value_bytes, limits.max_value_bytes);
  }
  return "";
}

Nonce random_nonce() {
  Nonce n{};
  if (RAND_bytes(n.data(), static_cast<int>(n.size())) != 1) std::abort();  // no entropy: nothing safe to do
  return n;
}

Proof server_proof(std::string_view secret, const Nonce& client, const Nonce& server) {
  return proof(secret, "weft-store server", client, server);
}

Proof client_proof(std::string_view secret, const Nonce& server, const Nonce& client) {
  return proof(secret, "weft-store client", server, client);
}

bool proofs_equal(const Proof& a, const char* b) { return CRYPTO_memcmp(a.data(), b, a.size()) == 0; }

}  // namespace weft::coll::store_wire
