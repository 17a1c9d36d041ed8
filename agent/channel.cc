// The sealed control channel (channel.h): HMAC-SHA256 (RFC 2104) through
// probe::MacKey, constant-time tag comparison (CRYPTO_memcmp).
#include "weft/agent/channel.h"

#include <openssl/crypto.h>

#include <fmt/format.h>

namespace weft::agent {
namespace {

std::span<const uint8_t> bytes(std::string_view s) {
  return {reinterpret_cast<const uint8_t*>(s.data()), s.size()};
}

void put_be(std::string& out, uint64_t v, int n) {
  for (int i = n - 1; i >= 0; --i) out += static_cast<char>((v >> (8 * i)) & 0xff);
}

uint64_t get_be64(std::string_view s) {
  uint64_t v = 0;
  for (size_t i = 0; i < 8; ++i) v = v << 8 | static_cast<uint8_t>(s[i]);
  return v;
}

// What the tag covers: direction, counter, length, text.
probe::Digest tag_of(const probe::MacKey& key, Direction dir, uint64_t counter, std::string_view text) {
  std::string m;
  m.reserve(13 + text.size());
  m += static_cast<char>(dir);
  put_be(m, counter, 8);
  put_be(m, text.size(), 4);
  m += text;
  return key.mac(bytes(m));
}

probe::MacKey derive(const probe::MacKey& secret, std::string_view label, std::string_view a, std::string_view c) {
  std::string m(label);
  m += '\0';
  m += a;
  m += '|';
  m += c;
  return probe::MacKey(secret.mac(bytes(m)));
}

}  // namespace

SessionKeys session_keys(const probe::MacKey& secret, std::string_view agent_nonce, std::string_view client_nonce) {
  return {derive(secret, "weft-ctl-session-to-agent", agent_nonce, client_nonce),
          derive(secret, "weft-ctl-session-to-controller", agent_nonce, client_nonce)};
}

std::string Sealer::seal_text(std::string_view text) {
  const probe::Digest tag = tag_of(key_, dir_, next_, text);
  std::string out;
  out.reserve(4 + kSealOverhead + text.size());
  put_be(out, kSealOverhead + text.size(), 4);
  put_be(out, next_, 8);
  out.append(reinterpret_cast<const char*>(tag.data()), tag.size());
  out += text;
  ++next_;
  return out;
}

Result<std::string> Opener::open(std::string_view sealed, ControlReject* why) {
  if (sealed.size() < kSealOverhead) {
    *why = ControlReject::kTruncated;
    return data_loss(fmt::format("sealed frame of {} bytes is shorter than its {}-byte seal", sealed.size(),
                                 kSealOverhead));
  }
  const uint64_t counter = get_be64(sealed);
  const std::string_view tag = sealed.substr(8, 32), text = sealed.substr(kSealOverhead);
  // The tag first: an unauthenticated counter says nothing.
  const probe::Digest want = tag_of(key_, dir_, counter, text);
  if (CRYPTO_memcmp(want.data(), tag.data(), want.size()) != 0) {
    *why = ControlReject::kBadTag;
    return permission_denied("control frame fails its tag (forged, altered or from another session)");
  }
  if (counter < next_) {
    *why = ControlReject::kReplayed;
    return permission_denied(fmt::format("control frame {} replayed (expected {})", counter, next_));
  }
  if (counter > next_) {
    *why = ControlReject::kOutOfOrder;
    return permission_denied(fmt::format("control frame {} out of order (expected {})", counter, next_));
  }
  ++next_;
  return std::string(text);
}

}  // namespace weft::agent
