// The monitor order and its reports (control.h, "Monitoring").
#include "control_fields.h"
#include "weft/agent/control.h"

namespace weft::agent {

using internal::decode_run;
using internal::need;
using internal::need_hex;
using internal::uint_in;
using nlohmann::json;

Result<MonitorCommand> decode_monitor(const json& j) {
  MonitorCommand c;
  WEFT_RETURN_IF_ERROR(decode_run(j, c));
  WEFT_ASSIGN_OR_RETURN(uint64_t dport, uint_in(j, "dport", 1, 65535));
  c.dport = static_cast<uint16_t>(dport);
  WEFT_ASSIGN_OR_RETURN(uint64_t x, uint_in(j, "probe_dscp", 0, 63));
  c.probe_dscp = static_cast<uint8_t>(x);
  auto& p = c.plan;
  WEFT_RETURN_IF_ERROR(need(j, "rate", json::value_t::number_float));
  p.rate_pps = j["rate"].get<double>();
  WEFT_ASSIGN_OR_RETURN(uint64_t timeout, uint_in(j, "timeout_ms", 1, 10000));
  p.timeout_ms = static_cast<int>(timeout);
  WEFT_ASSIGN_OR_RETURN(uint64_t every, uint_in(j, "report_ms", 10, 60000));
  p.report_ms = static_cast<int>(every);
  WEFT_RETURN_IF_ERROR(need(j, "tuples", json::value_t::array));
  if (j["tuples"].size() > probe::kMaxMonitorTuples) {
    return invalid_argument(fmt::format("{} tuples to monitor, at most {}", j["tuples"].size(), probe::kMaxMonitorTuples));
  }
  for (const auto& t : j["tuples"]) {
    if (!t.is_array() || t.size() != 2 || !t[0].is_number_unsigned() || !t[1].is_number_unsigned() ||
        t[0].get<uint64_t>() == 0 || t[0].get<uint64_t>() > 0xffffffffu || t[1].get<uint64_t>() == 0 ||
        t[1].get<uint64_t>() > 65535) {
      return invalid_argument("a monitored tuple is not [IPv4 address as a number, source port]");
    }
    p.tuples.push_back({t[0].get<uint32_t>(), t[1].get<uint16_t>()});
  }
  WEFT_RETURN_IF_ERROR(p.validate());
  return c;
}

json encode_monitor(const MonitorCommand& c) {
  json tuples = json::array();
  for (const auto& t : c.plan.tuples) tuples.push_back({t.dst_ip, t.sport});
  return {{"type", "monitor"},        {"run", c.run},
          {"nonce", c.nonce},         {"dport", c.dport},
          {"probe_dscp", c.probe_dscp}, {"rate", c.plan.rate_pps},
          {"timeout_ms", c.plan.timeout_ms}, {"report_ms", c.plan.report_ms},
          {"tuples", std::move(tuples)}};
}

Result<Arrival> decode_arrival(const json& a) {
  if (!a.is_array() || a.size() != 3 || !a[0].is_number_unsigned() || !a[1].is_number_unsigned() ||
      !a[2].is_number_unsigned() || a[0].get<uint64_t>() == 0 || a[0].get<uint64_t>() > 0xffffffffu ||
      a[1].get<uint64_t>() == 0 || a[1].get<uint64_t>() > 65535) {
    return invalid_argument("an arrival is not [IPv4 address as a number, source port, count]");
  }
  return Arrival{a[0].get<uint32_t>(), a[1].get<uint16_t>(), a[2].get<uint64_t>()};
}

// [dst, sport, sent, answered, lost, streak, spine, rtt_ns]
json encode_tally(const probe::TupleTally& t) {
  return json::array({t.dst_ip, t.sport, t.sent, t.answered, t.lost, t.streak, t.spine, t.rtt_ns});
}

Result<probe::TupleTally> decode_tally(const json& r) {
  if (!r.is_array() || r.size() != 8) return invalid_argument("a monitor row is not an 8-element array");
  for (size_t i = 0; i < r.size(); ++i) {
    if (i == 6 ? !r[i].is_number_integer() : !r[i].is_number_unsigned()) {
      return invalid_argument("a monitor row holds a value of the wrong kind");
    }
  }
  probe::TupleTally t;
  const uint64_t dst = r[0].get<uint64_t>(), sport = r[1].get<uint64_t>();
  const int64_t spine = r[6].get<int64_t>();
  t.sent = r[2].get<uint64_t>();
  t.answered = r[3].get<uint64_t>();
  t.lost = r[4].get<uint64_t>();
  if (dst == 0 || dst > 0xffffffffu || sport == 0 || sport > 65535 || spine < -1 || spine > 63 ||
      t.answered + t.lost > t.sent || r[5].get<uint64_t>() > t.lost) {
    return invalid_argument("a monitor row has a value out of range");
  }
  t.dst_ip = static_cast<uint32_t>(dst);
  t.sport = static_cast<uint16_t>(sport);
  t.streak = static_cast<uint32_t>(r[5].get<uint64_t>());
  t.spine = static_cast<int>(spine);
  t.rtt_ns = r[7].get<uint64_t>();
  return t;
}

}  // namespace weft::agent
