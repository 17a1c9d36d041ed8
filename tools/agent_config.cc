// The agent's configuration file (agent_config.h), read with toml11. Why not
// CLI11's own config reader: in CLI11 2.1 it is TOML-like rather than TOML
// (no escapes in strings, no multi-line strings), its errors name neither the
// file nor the line, and it applies a file only while parsing argv, which a
// SIGHUP reload cannot repeat. CLI11 stays the table of settings: every key is
// converted and checked by the flag of the same name.
#include "agent_config.h"

#include <arpa/inet.h>

#include <charconv>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <toml.hpp>
#include "weft/common/ipv4.h"

namespace weft::cli {
namespace {

std::string flag_names(const CLI::App& cmd) {
  std::string out;
  for (const CLI::Option* o : cmd.get_options()) {
    for (const std::string& n : o->get_lnames()) {
      if (!command_line_only(n)) out += (out.empty() ? "" : ", ") + n;
    }
  }
  return out;
}

// A TOML value as the text a command-line flag would carry.
Result<std::string> as_flag_text(const toml::value& v) {
  switch (v.type()) {
    case toml::value_t::string: return v.as_string().str;
    case toml::value_t::integer: return std::to_string(v.as_integer());
    case toml::value_t::floating: return fmt::format("{}", v.as_floating());
    case toml::value_t::boolean: return std::string(v.as_boolean() ? "true" : "false");
    default: return invalid_argument(fmt::format("a {} is not a flag's value", toml::stringize(v.type())));
  }
}

// The text each flag holds now (empty: its default).
std::map<std::string, std::vector<std::string>> flag_texts(const CLI::App& cmd) {
  std::map<std::string, std::vector<std::string>> out;
  for (const CLI::Option* o : cmd.get_options()) {
    if (!o->get_lnames().empty()) out[o->get_lnames().front()] = o->results();
  }
  return out;
}

}  // namespace

bool command_line_only(std::string_view key) { return key == "config" || key == "help" || key == "print-config"; }

std::set<std::string> keys_given(const CLI::App& cmd) {
  std::set<std::string> out;
  for (const CLI::Option* o : cmd.get_options()) {
    if (o->count() > 0) out.insert(o->get_lnames().begin(), o->get_lnames().end());
  }
  return out;
}

Status apply_config_file(CLI::App& cmd, const std::string& path, const std::set<std::string>& given) {
  toml::value root;
  try {
    root = toml::parse(path);  // syntax errors carry the file, line and column
  } catch (const std::exception& e) {
    return invalid_argument(fmt::format("config file {}: {}", path, e.what()));
  }
  if (!root.is_table()) return invalid_argument(fmt::format("config file {}: not a TOML table", path));
  for (const auto& [key, value] : root.as_table()) {
    CLI::Option* opt = command_line_only(key) ? nullptr : cmd.get_option_no_throw("--" + key);
    if (!opt) {
      return invalid_argument(fmt::format("config file {}: unknown key '{}' (the keys are the flags of weft agent: {})",
                                          path, key, flag_names(cmd)));
    }
    if (given.count(key)) continue;  // the command line wins
    std::vector<std::string> texts;
    const bool array = value.is_array();
    for (const toml::value& v : array ? value.as_array() : toml::array{value}) {
      auto t = as_flag_text(v);
      if (!t) return invalid_argument(fmt::format("config file {}: key '{}': {}", path, key, t.status().message()));
      texts.push_back(*t);
    }
    try {
      opt->clear();
      for (auto& t : texts) opt->add_result(t);
      opt->run_callback();
    } catch (const CLI::Error& e) {
      return invalid_argument(fmt::format("config file {}: key '{}': {}", path, key, e.what()));
    }
  }
  return ok_status();
}

Result<std::set<std::string>> reapply_config_file(CLI::App& cmd, const std::string& path,
                                                  const std::set<std::string>& given,
                                                  const std::function<void()>& restore) {
  const auto before = flag_texts(cmd);
  for (CLI::Option* o : cmd.get_options()) {
    const auto& names = o->get_lnames();
    if (!names.empty() && !given.count(names.front()) && !command_line_only(names.front())) o->clear();
  }
  restore();
  if (!path.empty()) WEFT_RETURN_IF_ERROR(apply_config_file(cmd, path, given));
  std::set<std::string> changed;
  for (const auto& [key, texts] : flag_texts(cmd)) {
    if (before.at(key) != texts) changed.insert(key);
  }
  return changed;
}

Result<std::pair<std::string, uint16_t>> parse_address_port(std::string_view s, std::string_view flag) {
  const auto colon = s.rfind(':');
  if (colon == std::string_view::npos) return invalid_argument(fmt::format("{} '{}' is not ADDR:PORT", flag, s));
  std::string ip(s.substr(0, colon));
  in_addr a{};
  if (::inet_pton(AF_INET, ip.c_str(), &a) != 1) {
    return invalid_argument(fmt::format("{} address '{}' is not an IPv4 address", flag, ip));
  }
  const std::string_view digits = s.substr(colon + 1);
  unsigned port = 0;
  const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), port);
  if (digits.empty() || ec != std::errc() || end != digits.data() + digits.size() || port > 65535) {
    return invalid_argument(fmt::format("{} port '{}' in '{}' is not a number 0..65535", flag, digits, s));
  }
  return std::pair{ip, static_cast<uint16_t>(port)};
}

std::string describe_config(const agent::AgentConfig& c, const ServiceSettings& svc) {
  const std::string label = "weft-config-fingerprint";
  const auto fp = c.secret.mac(std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(label.data()), label.size()));
  const auto& r = c.reflector;
  nlohmann::ordered_json j = {
      {"name", c.name},
      {"listen", fmt::format("{}:{}", c.listen_ip, c.listen_port)},
      {"probe_ip", ipv4_str(c.probe_ip)},
      {"secret_fingerprint", probe::to_hex(std::span<const uint8_t>(fp.data(), 8))},
      {"reflector", {{"bind_ip", ipv4_str(r.bind_ip)}, {"udp_port", r.udp_port}, {"tcp_port", r.tcp_port},
                     {"probe_dscp", r.probe_dscp}, {"reply_dscp", r.reply_dscp}, {"pcap_device", r.pcap_device}}},
      {"handshake_timeout_ms", c.handshake_timeout_ms},
      {"idle_timeout_ms", c.idle_timeout_ms},
      {"max_sessions", c.max_sessions},
      {"max_strangers", c.max_strangers},
      {"max_strangers_per_source", c.max_strangers_per_source},
      {"max_rate_pps", c.max_rate_pps},
      {"metrics", svc.metrics},
      {"log_level", svc.log_level},
      {"drain_timeout_s", svc.drain_timeout_s}};
  return j.dump(2) + "\n";
}

}  // namespace weft::cli
