// Control-plane messages (control.h). Every field is checked for type and range
// here, once; the agent and the controller only see validated values.
#include "weft/agent/control.h"

#include <openssl/crypto.h>

#include <algorithm>

#include <fmt/format.h>

#include "control_fields.h"
#include "weft/common/file_util.h"

namespace weft::agent {
namespace {

using nlohmann::json;
using internal::decode_run;
using internal::need;
using internal::need_hex;
using internal::uint_in;

// {"run", "dsts": [[ip, first, last, ...], ...]}: at most kSkipRangesPerFrame
// ranges, each within 1..65535 and first <= last.
Status validate_skip(const json& j) {
  WEFT_RETURN_IF_ERROR(uint_in(j, "run", 1, 0xffffffff).status());
  WEFT_RETURN_IF_ERROR(need(j, "dsts", json::value_t::array));
  size_t ranges = 0;
  for (const auto& d : j["dsts"]) {
    if (!d.is_array() || d.size() < 3 || d.size() % 2 != 1) {
      return invalid_argument("a skip entry is not [ip, first, last, ...]");
    }
    for (const auto& v : d) {
      if (!v.is_number_unsigned()) return invalid_argument("a skip entry holds a value that is no unsigned integer");
    }
    if (d[0].get<uint64_t>() == 0 || d[0].get<uint64_t>() > 0xffffffffu) {
      return invalid_argument("a skip entry's destination is not an IPv4 address as a number");
    }
    for (size_t i = 1; i < d.size(); i += 2) {
      const uint64_t first = d[i].get<uint64_t>(), last = d[i + 1].get<uint64_t>();
      if (first == 0 || last > 65535 || first > last) {
        return invalid_argument(fmt::format("skip range {}..{} is not within 1..65535 in order", first, last));
      }
    }
    ranges += d.size() / 2;
  }
  if (ranges > kSkipRangesPerFrame) {
    return invalid_argument(fmt::format("skip frame of {} ranges exceeds {}", ranges, kSkipRangesPerFrame));
  }
  return ok_status();
}

Status validate(const std::string& type, const json& j) {
  if (type == "hello") {
    WEFT_RETURN_IF_ERROR(uint_in(j, "version", 1, 1000).status());
    WEFT_RETURN_IF_ERROR(need(j, "host", json::value_t::string));
    return need_hex(j, "nonce", 32, 32);
  }
  if (type == "auth") {
    if (j.contains("version")) WEFT_RETURN_IF_ERROR(uint_in(j, "version", 1, 1000).status());
    WEFT_RETURN_IF_ERROR(need_hex(j, "nonce", 32, 32));
    return need_hex(j, "mac", 64, 64);
  }
  if (type == "auth_ok") return need_hex(j, "mac", 64, 64);
  if (type == "announce") {
    WEFT_RETURN_IF_ERROR(uint_in(j, "run", 1, 0xffffffff).status());
    return need_hex(j, "nonce", 32, 32);
  }
  if (type == "hosts") {
    WEFT_RETURN_IF_ERROR(need(j, "ips", json::value_t::array));
    for (const auto& ip : j["ips"]) {
      if (!ip.is_number_unsigned() || ip.get<uint64_t>() == 0 || ip.get<uint64_t>() > 0xffffffffu) {
        return invalid_argument("a host is not an IPv4 address as a number");
      }
    }
    return ok_status();
  }
  if (type == "retire") return uint_in(j, "run", 1, 0xffffffff).status();
  if (type == "skip") return validate_skip(j);
  if (type == "campaign") return decode_campaign(j).status();
  if (type == "results") {
    WEFT_RETURN_IF_ERROR(uint_in(j, "run", 1, 0xffffffff).status());
    WEFT_RETURN_IF_ERROR(need(j, "rows", json::value_t::array));
    for (const auto& r : j["rows"]) WEFT_RETURN_IF_ERROR(decode_flow(r).status());
    return ok_status();
  }
  if (type == "done") {
    WEFT_RETURN_IF_ERROR(uint_in(j, "run", 1, 0xffffffff).status());
    WEFT_RETURN_IF_ERROR(need(j, "stats", json::value_t::object));
    return need(j, "spend", json::value_t::array);
  }
  if (type == "monitor") return decode_monitor(j).status();
  if (type == "monitor_report") {
    WEFT_RETURN_IF_ERROR(uint_in(j, "run", 1, 0xffffffff).status());
    WEFT_RETURN_IF_ERROR(need(j, "t_ns", json::value_t::number_unsigned));
    WEFT_RETURN_IF_ERROR(need(j, "rows", json::value_t::array));
    for (const auto& r : j["rows"]) WEFT_RETURN_IF_ERROR(decode_tally(r).status());
    if (!j.contains("arrivals")) return ok_status();
    WEFT_RETURN_IF_ERROR(need(j, "arrivals", json::value_t::array));
    for (const auto& a : j["arrivals"]) WEFT_RETURN_IF_ERROR(decode_arrival(a).status());
    return ok_status();
  }
  if (type == "status") return ok_status();  // a request has no fields; a reply has extra ones
  if (type == "ok") return ok_status();
  // Read before authentication too (a full agent says so unsealed), where
  // anyone on the path can answer: the message must be what it claims.
  if (type == "error") return need(j, "message", json::value_t::string);
  return invalid_argument(fmt::format("unknown message type '{}'", type.substr(0, 32)));
}

std::string mac_hex(const probe::MacKey& k, const std::string& msg) {
  return probe::to_hex(k.mac(std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(msg.data()), msg.size())));
}

}  // namespace

std::string_view control_reject_name(ControlReject r) {
  switch (r) {
    case ControlReject::kOversize: return "oversize";
    case ControlReject::kBadJson: return "bad_json";
    case ControlReject::kBadMessage: return "bad_message";
    case ControlReject::kBadAuth: return "bad_auth";
    case ControlReject::kUnauthenticated: return "unauthenticated";
    case ControlReject::kTimeout: return "timeout";
    case ControlReject::kBadTag: return "bad_tag";
    case ControlReject::kReplayed: return "replayed";
    case ControlReject::kOutOfOrder: return "out_of_order";
    case ControlReject::kTruncated: return "truncated";
    case ControlReject::kVersion: return "version";
    case ControlReject::kEvicted: return "evicted";
    case ControlReject::kSessionsFull: return "sessions_full";
    case ControlReject::kTargetRefused: return "target_not_in_hosts";
    case ControlReject::kNotReading: return "not_reading";
    case ControlReject::kCount: break;
  }
  return "?";
}

Result<ControlMessage> parse_control(std::string_view frame_body) {
  if (frame_body.size() > kMaxFrame) return invalid_argument("frame too large");
  json j = json::parse(frame_body, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return data_loss("control frame is not JSON");
  if (!j.is_object()) return invalid_argument("control frame is not a JSON object");
  auto t = j.find("type");
  if (t == j.end() || !t->is_string()) return invalid_argument("control frame has no string 'type'");
  ControlMessage m{t->get<std::string>(), std::move(j)};
  WEFT_RETURN_IF_ERROR(validate(m.type, m.body).with_context("'" + m.type.substr(0, 32) + "' message"));
  return m;
}


Result<CampaignCommand> decode_campaign(const json& j) {
  CampaignCommand c;
  WEFT_RETURN_IF_ERROR(decode_run(j, c));
  WEFT_RETURN_IF_ERROR(need(j, "method", json::value_t::string));
  c.method = j["method"].get<std::string>();
  WEFT_RETURN_IF_ERROR(probe::parse_method(c.method).status());
  WEFT_RETURN_IF_ERROR(need(j, "backend", json::value_t::string));
  c.backend = j["backend"].get<std::string>();
  if (c.backend != "udp" && c.backend != "tcp-syn" && c.backend != "dpdk") {
    return invalid_argument(fmt::format("unknown backend '{}'", c.backend.substr(0, 32)));
  }
  WEFT_ASSIGN_OR_RETURN(uint64_t dport, uint_in(j, "dport", 1, 65535));
  c.dport = static_cast<uint16_t>(dport);
  WEFT_ASSIGN_OR_RETURN(uint64_t x, uint_in(j, "probe_dscp", 0, 63));
  c.probe_dscp = static_cast<uint8_t>(x);
  auto& p = c.plan;
  WEFT_ASSIGN_OR_RETURN(uint64_t first, uint_in(j, "sport_first", 1, 65535));
  WEFT_ASSIGN_OR_RETURN(uint64_t count, uint_in(j, "sport_count", 1, 65535));
  if (first + count > 65536) return invalid_argument("source port range passes 65535");
  p.sport_first = static_cast<uint16_t>(first);
  p.sport_count = static_cast<uint16_t>(count);
  WEFT_ASSIGN_OR_RETURN(uint64_t probes, uint_in(j, "probes", 1, 1000));
  p.probes_per_port = static_cast<int>(probes);
  WEFT_RETURN_IF_ERROR(need(j, "rate", json::value_t::number_float));
  p.rate_pps = j["rate"].get<double>();
  if (!(p.rate_pps >= 0 && p.rate_pps <= 1e9)) return invalid_argument("field 'rate' is outside 0..1e9");
  WEFT_ASSIGN_OR_RETURN(uint64_t timeout, uint_in(j, "timeout_ms", 1, 60000));
  p.timeout_ms = static_cast<int>(timeout);
  WEFT_ASSIGN_OR_RETURN(uint64_t retries, uint_in(j, "retries", 0, 100));
  p.retries = static_cast<int>(retries);
  WEFT_ASSIGN_OR_RETURN(uint64_t window, uint_in(j, "port_window", 1, 4096));
  p.port_window = static_cast<uint16_t>(window);
  WEFT_ASSIGN_OR_RETURN(uint64_t stop, uint_in(j, "stop_at_spines", 0, 63));
  p.stop_at_spines = static_cast<int>(stop);
  if (j.contains("ports_per_spine")) {  // absent from controllers before it existed: 1
    WEFT_ASSIGN_OR_RETURN(uint64_t k, uint_in(j, "ports_per_spine", 1, 4096));
    p.ports_per_spine = static_cast<int>(k);
  }
  WEFT_RETURN_IF_ERROR(need(j, "targets", json::value_t::array));
  for (const auto& t : j["targets"]) {
    if (!t.is_number_unsigned() || t.get<uint64_t>() == 0 || t.get<uint64_t>() > 0xffffffffu) {
      return invalid_argument("a target is not an IPv4 address as a number");
    }
    p.targets.push_back(t.get<uint32_t>());
  }
  if (p.targets.empty()) return invalid_argument("campaign has no targets");
  if (j.contains("skip")) {
    return invalid_argument("field 'skip' is from an older controller: skip sets travel in 'skip' frames now");
  }
  if (j.contains("skip_frames")) {
    WEFT_ASSIGN_OR_RETURN(uint64_t n, uint_in(j, "skip_frames", 0, kMaxSkipRanges));
    c.skip_frames = static_cast<uint32_t>(n);
  }
  WEFT_RETURN_IF_ERROR(p.validate());
  return c;
}

json encode_campaign(const CampaignCommand& c) {
  return {{"type", "campaign"},          {"run", c.run},
          {"nonce", c.nonce},            {"method", c.method},
          {"backend", c.backend},        {"dport", c.dport},
          {"probe_dscp", c.probe_dscp},  {"sport_first", c.plan.sport_first},
          {"sport_count", c.plan.sport_count}, {"probes", c.plan.probes_per_port},
          {"rate", c.plan.rate_pps},     {"timeout_ms", c.plan.timeout_ms},
          {"retries", c.plan.retries},   {"stop_at_spines", c.plan.stop_at_spines},
          {"ports_per_spine", c.plan.ports_per_spine},
          {"port_window", c.plan.port_window},
          {"targets", c.plan.targets},   {"skip_frames", c.skip_frames}};
}

std::vector<json> encode_skip(uint32_t run, const probe::SkipSet& skip, size_t ranges_per_frame) {
  ranges_per_frame = std::max<size_t>(1, ranges_per_frame);
  std::vector<json> frames;
  json dsts = json::array();
  size_t in_frame = 0;
  const auto flush = [&] {
    if (in_frame == 0) return;
    frames.push_back({{"type", "skip"}, {"run", run}, {"dsts", std::move(dsts)}});
    dsts = json::array();
    in_frame = 0;
  };
  skip.for_each([&](uint32_t dst, const std::vector<probe::PortRange>& ranges) {
    for (size_t i = 0; i < ranges.size();) {
      json entry = json::array({dst});
      for (; i < ranges.size() && in_frame < ranges_per_frame; ++i, ++in_frame) {
        entry.push_back(ranges[i].first);
        entry.push_back(ranges[i].last);
      }
      dsts.push_back(std::move(entry));
      if (in_frame == ranges_per_frame) flush();
    }
  });
  flush();
  return frames;
}

size_t add_skip(const json& body, probe::SkipSet& into) {
  size_t n = 0;
  for (const auto& d : body["dsts"]) {
    const uint32_t dst = d[0].get<uint32_t>();
    for (size_t i = 1; i + 1 < d.size(); i += 2, ++n) into.add(dst, d[i].get<uint16_t>(), d[i + 1].get<uint16_t>());
  }
  return n;
}

// [dst, sport, sent, answered, spine, hop, dscp, unstable, other_spine, other_hop, rtt_ns]
json encode_flow(const probe::FlowResult& f) {
  return json::array({f.dst_ip, f.sport, f.sent, f.answered, f.spine, f.hop_ip, f.dscp_seen, f.unstable ? 1 : 0,
                      f.other_spine, f.other_hop_ip, f.min_rtt_ns});
}

Result<probe::FlowResult> decode_flow(const json& r) {
  if (!r.is_array() || r.size() != 11) return invalid_argument("a result row is not an 11-element array");
  for (const auto& v : r) {
    if (!v.is_number_integer()) return invalid_argument("a result row holds a non-integer");
  }
  auto in = [&](size_t i, int64_t lo, int64_t hi) { return r[i].get<int64_t>() >= lo && r[i].get<int64_t>() <= hi; };
  if (!in(0, 1, 0xffffffffLL) || !in(1, 1, 65535) || !in(2, 1, 1 << 20) || !in(3, 0, r[2].get<int64_t>()) ||
      !in(4, -1, 63) || !in(5, 0, 0xffffffffLL) || !in(6, -1, 63) || !in(7, 0, 1) || !in(8, -1, 63) ||
      !in(9, 0, 0xffffffffLL) || !in(10, 0, INT64_MAX)) {
    return invalid_argument("a result row has a value out of range");
  }
  probe::FlowResult f;
  f.dst_ip = r[0].get<uint32_t>();
  f.sport = r[1].get<uint16_t>();
  f.sent = r[2].get<int>();
  f.answered = r[3].get<int>();
  f.spine = r[4].get<int>();
  f.hop_ip = r[5].get<uint32_t>();
  f.dscp_seen = r[6].get<int>();
  f.unstable = r[7].get<int>() != 0;
  f.other_spine = r[8].get<int>();
  f.other_hop_ip = r[9].get<uint32_t>();
  f.min_rtt_ns = r[10].get<uint64_t>();
  return f;
}

json encode_stats(const probe::ProbeStats& s) {
  json rej = json::object();
  for (const auto& [k, v] : s.rejected_by_name()) rej[k] = v;
  return {{"sent", s.sent},       {"answered", s.answered},       {"timed_out", s.timed_out},
          {"retried", s.retried}, {"send_errors", s.send_errors}, {"rejected", rej}};
}

probe::ProbeStats decode_stats(const json& j) {
  probe::ProbeStats s;
  auto u = [&](const char* k) { return j.contains(k) && j[k].is_number_unsigned() ? j[k].get<uint64_t>() : 0; };
  s.sent = u("sent");
  s.answered = u("answered");
  s.timed_out = u("timed_out");
  s.retried = u("retried");
  s.send_errors = u("send_errors");
  if (j.contains("rejected") && j["rejected"].is_object()) {
    for (size_t i = 0; i < s.rejected.size(); ++i) {
      const std::string name(probe::reject_name(static_cast<probe::Reject>(i)));
      const auto& r = j["rejected"];
      // Counts travel as JSON integers (signed in nlohmann's model); negatives are not counts.
      if (r.contains(name) && r[name].is_number_integer() && r[name].get<int64_t>() >= 0) {
        s.rejected[i] = r[name].get<uint64_t>();
      }
    }
  }
  return s;
}

std::string client_proof(const probe::MacKey& secret, std::string_view agent_nonce, std::string_view client_nonce) {
  return mac_hex(secret, fmt::format("weft-ctl-client|{}|{}", agent_nonce, client_nonce));
}

std::string agent_proof(const probe::MacKey& secret, std::string_view client_nonce, std::string_view agent_nonce) {
  return mac_hex(secret, fmt::format("weft-ctl-agent|{}|{}", client_nonce, agent_nonce));
}

bool proof_matches(std::string_view want_hex, std::string_view got_hex) {
  return want_hex.size() == got_hex.size() && CRYPTO_memcmp(want_hex.data(), got_hex.data(), want_hex.size()) == 0;
}

probe::MacKey campaign_key(const probe::MacKey& secret, uint32_t run, std::string_view nonce) {
  return probe::MacKey::derive(secret, "weft-probe-campaign", run, nonce);
}

std::string frame(const json& j) {
  const std::string body = j.dump(-1, ' ', false, json::error_handler_t::replace);  // as Sealer::seal
  const uint32_t n = static_cast<uint32_t>(body.size());
  std::string out;
  out.reserve(4 + body.size());
  for (int i = 3; i >= 0; --i) out += static_cast<char>((n >> (8 * i)) & 0xff);
  return out + body;
}

int peer_version(const json& body) {
  auto v = body.find("version");
  return v != body.end() && v->is_number_unsigned() ? static_cast<int>(v->get<uint64_t>()) : 1;
}

uint32_t frame_length(const uint8_t h[4]) {
  return static_cast<uint32_t>(h[0]) << 24 | static_cast<uint32_t>(h[1]) << 16 | static_cast<uint32_t>(h[2]) << 8 | h[3];
}

Result<probe::MacKey> load_secret(const std::string& path) {
  WEFT_ASSIGN_OR_RETURN(std::string s, read_secret_file(path, 16));
  return probe::MacKey::from_string(s);
}

}  // namespace weft::agent
