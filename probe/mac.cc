// HMAC-SHA256 via OpenSSL's one-shot HMAC() (openssl/hmac.h, not deprecated in
// 3.0) and CRYPTO_memcmp for constant-time tag comparison.
#include "weft/probe/mac.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#include <cstring>

#include <fmt/format.h>

namespace weft::probe {

MacKey::MacKey() = default;

MacKey::MacKey(std::span<const uint8_t> key) {
  // Keys longer than the block are hashed by HMAC anyway; we keep 32 bytes.
  if (key.size() <= key_.size()) {
    std::memcpy(key_.data(), key.data(), key.size());
  } else {
    unsigned int n = 0;
    EVP_Digest(key.data(), key.size(), key_.data(), &n, EVP_sha256(), nullptr);
  }
}

MacKey MacKey::from_string(std::string_view secret) {
  return MacKey(std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(secret.data()), secret.size()));
}

MacKey MacKey::derive(const MacKey& secret, std::string_view label, uint64_t campaign, std::string_view nonce) {
  std::string msg(label);
  msg += '\0';
  for (int i = 7; i >= 0; --i) msg += static_cast<char>((campaign >> (8 * i)) & 0xff);
  msg += nonce;
  Digest d = secret.mac(std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(msg.data()), msg.size()));
  return MacKey(d);
}

Digest MacKey::mac(std::span<const uint8_t> data) const {
  Digest out{};
  unsigned int n = 0;
  HMAC(EVP_sha256(), key_.data(), static_cast<int>(key_.size()), data.data(), data.size(), out.data(), &n);
  return out;
}

bool MacKey::verify(std::span<const uint8_t> data, std::span<const uint8_t> tag) const {
  if (tag.size() < 16 || tag.size() > 32) return false;
  const Digest d = mac(data);
  return CRYPTO_memcmp(d.data(), tag.data(), tag.size()) == 0;
}

std::string to_hex(std::span<const uint8_t> b) {
  std::string s;
  s.reserve(b.size() * 2);
  for (uint8_t c : b) s += fmt::format("{:02x}", c);
  return s;
}

Result<std::vector<uint8_t>> from_hex(std::string_view s) {
  if (s.size() % 2 != 0) return invalid_argument("hex string of odd length");
  std::vector<uint8_t> out;
  auto nib = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  for (size_t i = 0; i < s.size(); i += 2) {
    const int hi = nib(s[i]), lo = nib(s[i + 1]);
    if (hi < 0 || lo < 0) return invalid_argument(fmt::format("not a hex digit at {}", i));
    out.push_back(static_cast<uint8_t>(hi * 16 + lo));
  }
  return out;
}

std::vector<uint8_t> random_bytes(size_t n) {
  std::vector<uint8_t> b(n);
  if (RAND_bytes(b.data(), static_cast<int>(n)) != 1) {
    // RAND_bytes only fails when the OS entropy source is broken; never fall back silently.
    std::abort();
  }
  return b;
}

}  // namespace weft::probe
