// The authenticated, ordered control channel that follows the handshake
// (control.h): every frame carries a per-direction counter and an
// HMAC-SHA256 tag under a session key, so an on-path attacker can neither
// forge, replay, reorder nor truncate frames without the receiver noticing.
//
//   SessionKeys k = session_keys(secret, agent_nonce, client_nonce);
//   Sealer out(k.to_agent, Direction::kToAgent);      // on the controller
//   std::string wire = out.seal(json);                // length prefix + sealed body
//   Opener in(k.to_agent, Direction::kToAgent);       // on the agent
//   ControlReject why;
//   Result<std::string> text = in.open(body, &why);   // body = the bytes after the prefix
//
// Sealed body: counter (8 bytes, big-endian) | tag (32 bytes) | JSON text.
// tag = HMAC-SHA256(key, direction (1 byte) | counter (8) | JSON length (4) | JSON).
// Each direction has its own key and counter, starting at 0; the receiver
// accepts only the next counter, so the channel is a strict sequence and a
// session ends at the first frame that fails (an ordered channel cannot skip).
//
// Why a MAC per frame and not TLS 1.3 with a PSK: nothing in these frames is
// secret (campaign keys are derived on each agent from the shared secret and a
// public nonce; results are fabric paths), so integrity and order are what
// matter. A per-frame MAC keeps the JSON protocol and its validators as they
// are, lets every rejection be counted by its reason (a TLS alert says little),
// is a pure function a fuzzer can drive, and adds no record layer or
// certificate handling to a daemon that runs as root.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "weft/agent/control.h"
#include "weft/common/status.h"
#include "weft/probe/mac.h"

namespace weft::agent {

inline constexpr size_t kSealOverhead = 8 + 32;  // counter + HMAC-SHA256 tag

enum class Direction : uint8_t { kToAgent = 1, kToController = 2 };

struct SessionKeys {
  probe::MacKey to_agent;
  probe::MacKey to_controller;
};

// HMAC(secret, label | agent_nonce | client_nonce), one label per direction.
// Both nonces are fresh per connection, so keys (and counters) never repeat
// across sessions: a frame captured from one session fails the tag in another.
SessionKeys session_keys(const probe::MacKey& secret, std::string_view agent_nonce, std::string_view client_nonce);

class Sealer {
 public:
  Sealer(const probe::MacKey& key, Direction dir) : key_(key), dir_(dir) {}
  // A whole frame: 4-byte length, then the sealed body.
  // Text that is not UTF-8 (an echoed field cut mid-character) is sent with
  // U+FFFD where it is not: dump() would throw.
  std::string seal(const nlohmann::json& j) {
    return seal_text(j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
  }
  std::string seal_text(std::string_view text);
  uint64_t next() const { return next_; }

 private:
  probe::MacKey key_;
  Direction dir_;
  uint64_t next_ = 0;
};

class Opener {
 public:
  Opener(const probe::MacKey& key, Direction dir) : key_(key), dir_(dir) {}
  // Checks one sealed body (the bytes after the length prefix) and returns its
  // JSON text. On failure *why is kTruncated (shorter than counter and tag),
  // kBadTag (forged, altered, truncated and re-framed, or from another
  // session), kReplayed (authentic, counter already used) or kOutOfOrder
  // (authentic, a counter ahead of the next: a frame was dropped or swapped).
  // The expected counter advances only on success.
  Result<std::string> open(std::string_view sealed, ControlReject* why);
  uint64_t next() const { return next_; }

 private:
  probe::MacKey key_;
  Direction dir_;
  uint64_t next_ = 0;
};

}  // namespace weft::agent
