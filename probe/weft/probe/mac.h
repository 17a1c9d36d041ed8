// Keyed MACs for probes and the agent control plane: HMAC-SHA256 (RFC 2104)
// from OpenSSL, truncated to 16 bytes for probes (RFC 2104 section 5 allows
// truncation to >= half the hash length). Comparisons are constant-time.
//
//   MacKey key = MacKey::derive(secret, "campaign", campaign_id, nonce);
//   auto tag = key.mac(bytes);            // 32 bytes
//   bool ok = key.verify(bytes, tag16);   // any tag length 16..32
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "weft/common/status.h"

namespace weft::probe {

using Digest = std::array<uint8_t, 32>;

class MacKey {
 public:
  MacKey();  // an all-zero key: useful only in tests
  explicit MacKey(std::span<const uint8_t> key);
  static MacKey from_string(std::string_view secret);
  // A per-campaign key: HMAC(secret, label | campaign | nonce). Agents derive
  // the same key from the shared secret and the campaign announcement, so the
  // key itself never crosses the network.
  static MacKey derive(const MacKey& secret, std::string_view label, uint64_t campaign, std::string_view nonce);

  Digest mac(std::span<const uint8_t> data) const;
  bool verify(std::span<const uint8_t> data, std::span<const uint8_t> tag) const;
  const std::array<uint8_t, 32>& bytes() const { return key_; }

 private:
  std::array<uint8_t, 32> key_{};
};

std::string to_hex(std::span<const uint8_t> b);
Result<std::vector<uint8_t>> from_hex(std::string_view s);
// Cryptographically random bytes (RAND_bytes).
std::vector<uint8_t> random_bytes(size_t n);

}  // namespace weft::probe
