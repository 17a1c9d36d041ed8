// The agent control plane's messages: framing, parsing, authentication.
//
// Frames: a 4-byte big-endian length, then that many bytes. Before
// authentication a frame is at most kMaxPreAuthFrame bytes of JSON (an object
// with a "type"); after it, a sealed body (channel.h: counter, HMAC tag, JSON)
// of at most kMaxFrame bytes. Longer frames are refused before reading them.
//
// Handshake (mutual, shared secret, neither side sends the secret):
//   agent  -> {"type":"hello","version":2,"host":NAME,"nonce":A}
//   client -> {"type":"auth","version":2,"nonce":C,"mac":HMAC(secret,"weft-ctl-client|"+A+"|"+C)}
//   agent  -> {"type":"auth_ok","mac":HMAC(secret,"weft-ctl-agent|"+C+"|"+A)}
// Nonces are 16 random bytes in hex. A peer of another version is refused with
// an "error" naming both versions. From here on every frame in both directions
// is sealed under the session keys (channel.h), and the client's first frame is
//   hosts {ips}                the controller's host list; campaign targets must lie in it
// then commands:
//   announce {run, nonce}      derive the campaign key, let the reflector accept it
//   skip {run, dsts}           resume: 5-tuples the next campaign of `run` must not
//                              probe (as port ranges per destination), sent before it
//   campaign {run, nonce, ...} run a sweep from this host (CampaignCommand) and
//                              stream "results" frames, then "done"; a "results"
//                              without rows is a heartbeat (AgentConfig::sweep_heartbeat_ms)
//   status                     reflector statistics and health
//   retire {run}               forget a campaign key
//   monitor {run, nonce, ...}  probe a set of 5-tuples without end (MonitorCommand)
//                              and stream "monitor_report" frames until the session ends
// A frame that fails its seal ends the session; a sealed but malformed frame is
// answered by {"type":"error","message":...}; before authentication any bad
// frame closes the connection. Each is counted by reason.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "weft/common/status.h"
#include "weft/probe/campaign.h"
#include "weft/probe/mac.h"
#include "weft/probe/monitor.h"

namespace weft::agent {

inline constexpr uint32_t kMaxFrame = 4u << 20;
inline constexpr uint32_t kMaxPreAuthFrame = 1024;  // hello, auth, auth_ok, error: all well under
// 2: sealed frames after the handshake, "version" in auth, the hosts frame.
inline constexpr int kControlVersion = 2;

enum class ControlReject : uint8_t {
  kOversize,         // a frame longer than kMaxFrame
  kBadJson,          // not parseable JSON
  kBadMessage,       // JSON, but not a valid message of its type
  kBadAuth,          // wrong MAC in the handshake
  kUnauthenticated,  // a command before the handshake finished
  kTimeout,          // the peer went silent mid-frame or mid-handshake
  kBadTag,           // a sealed frame whose tag fails: forged, altered, or from another session
  kReplayed,         // a sealed frame whose counter was already used
  kOutOfOrder,       // a sealed frame ahead of the next counter: one was dropped or swapped
  kTruncated,        // the stream ended inside a frame, or a body shorter than its seal
  kVersion,          // a peer of another control-protocol version
  kEvicted,          // an unauthenticated session closed to make room for a newer one
  kSessionsFull,     // authenticated, but every authenticated session slot is taken
  kTargetRefused,    // a campaign target outside the controller's host list
  kNotReading,       // the peer took no frame within the idle timeout
  kCount
};
std::string_view control_reject_name(ControlReject r);

struct ControlMessage {
  std::string type;
  nlohmann::json body;
};

// Parses and validates a frame body: JSON object, known "type", and the fields
// that type requires with their types and ranges.
Result<ControlMessage> parse_control(std::string_view frame);

// The sweep an agent runs from its host.
struct CampaignCommand {
  uint32_t run = 0;
  std::string nonce;  // hex; with the secret and run it gives the campaign key
  uint32_t skip_frames = 0;  // "skip" frames of this run sent just before (plan.skip travels in them)
  std::string method = "dscp";
  std::string backend = "udp";
  uint16_t dport = 4791;
  uint8_t probe_dscp = 8;
  probe::CampaignPlan plan;
};
Result<CampaignCommand> decode_campaign(const nlohmann::json& body);
nlohmann::json encode_campaign(const CampaignCommand& c);

// Monitoring (probe/weft/probe/monitor.h): the watcher names the 5-tuples
// this host probes, as [dst, sport] pairs to the reflectors' UDP port `dport`;
// every target must be in the host list, and the rate is capped to the
// agent's --max-rate like a campaign's. The agent answers "ok" and then sends
//   {"type":"monitor_report","run":R,"t_ns":T,"rows":[[dst, sport, sent, answered, lost, streak, spine, rtt_ns], ...]}
// every plan.report_ms until the session closes, with "arrivals":[[src, sport, count], ...]:
// the run's requests this host's reflector received (reflector.h), so the
// watcher tells a path whose requests stop arriving from one whose replies
// are lost. An order with no tuples only reports arrivals. The same run
// ordered on a new session (a watcher that lost its connection and came
// back) takes the run over: the older session is closed and the new monitor
// starts once the old one has stopped. Ordered again on the session that
// runs it, it is refused with an "error".
struct MonitorCommand {
  uint32_t run = 0;
  std::string nonce;  // hex; with the secret and run it gives the probes' key
  uint16_t dport = 4791;
  uint8_t probe_dscp = 8;
  probe::MonitorPlan plan;
};
Result<MonitorCommand> decode_monitor(const nlohmann::json& body);
nlohmann::json encode_monitor(const MonitorCommand& c);
nlohmann::json encode_tally(const probe::TupleTally& t);
struct Arrival {
  uint32_t src_ip = 0;
  uint16_t sport = 0;
  uint64_t count = 0;
};
Result<Arrival> decode_arrival(const nlohmann::json& a);
Result<probe::TupleTally> decode_tally(const nlohmann::json& row);

// Resume at scale: a campaign's skip set (the 5-tuples already recorded)
// travels in "skip" frames of at most kSkipRangesPerFrame port ranges each,
// {"type":"skip","run":R,"dsts":[[ip, first, last, first, last, ...], ...]},
// sent just before the campaign frame, which counts them ("skip_frames").
// A frame stays far below kMaxFrame (about 12 bytes a range); an agent holds
// at most kMaxSkipRanges ranges for a session (16 MiB).
inline constexpr size_t kSkipRangesPerFrame = 16384;
inline constexpr size_t kMaxSkipRanges = size_t{1} << 22;
std::vector<nlohmann::json> encode_skip(uint32_t run, const probe::SkipSet& skip,
                                        size_t ranges_per_frame = kSkipRangesPerFrame);
// Adds a validated "skip" frame's ranges to `into`; returns how many it held.
size_t add_skip(const nlohmann::json& body, probe::SkipSet& into);

// One settled 5-tuple as an agent reports it (compact JSON array).
nlohmann::json encode_flow(const probe::FlowResult& f);
Result<probe::FlowResult> decode_flow(const nlohmann::json& row);

nlohmann::json encode_stats(const probe::ProbeStats& s);
probe::ProbeStats decode_stats(const nlohmann::json& j);

// The handshake MACs (hex).
std::string client_proof(const probe::MacKey& secret, std::string_view agent_nonce, std::string_view client_nonce);
std::string agent_proof(const probe::MacKey& secret, std::string_view client_nonce, std::string_view agent_nonce);
bool proof_matches(std::string_view want_hex, std::string_view got_hex);
probe::MacKey campaign_key(const probe::MacKey& secret, uint32_t run, std::string_view nonce);

// Frame helpers: 4-byte length prefix + body.
std::string frame(const nlohmann::json& j);
// The version a peer announced in hello or auth (absent before version 2: 1).
int peer_version(const nlohmann::json& body);
uint32_t frame_length(const uint8_t header[4]);

// Reads a shared secret file (trailing newline ignored); refuses empty files and
// files readable by group or others.
Result<probe::MacKey> load_secret(const std::string& path);

}  // namespace weft::agent
