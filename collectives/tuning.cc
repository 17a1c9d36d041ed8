// Tuning files (weft/collectives/tuning.h): parsing with errors that name
// the file and the field, writing, $WEFT_TUNING. The built-in constants are
// in tuning_builtin.cc.
#include <algorithm>
#include <cmath>
#include <cstdlib>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "weft/collectives/communicator.h"
#include "weft/collectives/tuning.h"
#include "weft/common/file_util.h"
#include "weft/common/json.h"

namespace weft::coll {

using json = nlohmann::json;

namespace {

// The constants, in file order.
struct Field {
  const char* name;
  double TransportCost::*value;
};
constexpr Field kFields[] = {{"alpha_us", &TransportCost::alpha_us},
                             {"beta_ns_per_byte", &TransportCost::beta_ns_per_byte},
                             {"gamma_ns_per_byte", &TransportCost::gamma_ns_per_byte}};
constexpr Field kFar = {"beta_far_ns_per_byte", &TransportCost::beta_far_ns_per_byte};
constexpr Field kShared = {"alpha_shared_us", &TransportCost::alpha_shared_us};
// The byte counts (optional).
struct Bytes {
  const char* name;
  size_t TransportCost::*value;
};
constexpr Bytes kBytes[] = {{"cache_bytes", &TransportCost::cache_bytes}, {"hd_piece_bytes", &TransportCost::hd_piece_bytes}};
constexpr const char* kTopFields[] = {"version", "transports", "machine", "measured", "command", "load", "samples"};

bool known(std::string_view transport) {
  for (const std::string& t : known_transports()) {
    if (t == transport) return true;
  }
  return false;
}

Status check(const TransportCost& c, const std::string& where) {
  for (const Field& f : kFields) {
    const double v = c.*f.value;
    if (!std::isfinite(v) || v <= 0) return invalid_argument(fmt::format("{}/{}: must be a number > 0 (got {})", where, f.name, v));
  }
  if (c.hd_piece_bytes > 0 && c.hd_piece_bytes < kMinHdPieceBytes) {
    return invalid_argument(fmt::format("{}/hd_piece_bytes: {} is neither 0 (whole) nor at least {}", where, c.hd_piece_bytes,
                                        kMinHdPieceBytes));
  }
  const bool far = c.cache_bytes > 0;
  if (far != (c.beta_far_ns_per_byte != 0)) {
    return invalid_argument(fmt::format("{}/{}: give cache_bytes and beta_far_ns_per_byte together (got {} and {})", where,
                                        far ? kFar.name : "cache_bytes", c.cache_bytes, c.beta_far_ns_per_byte));
  }
  if (c.alpha_shared_us != 0 && !(std::isfinite(c.alpha_shared_us) && c.alpha_shared_us >= c.alpha_us)) {
    return invalid_argument(fmt::format("{}/{}: must be >= alpha_us {} (got {})", where, kShared.name, c.alpha_us, c.alpha_shared_us));
  }
  if (far && !(std::isfinite(c.beta_far_ns_per_byte) && c.beta_far_ns_per_byte >= c.beta_ns_per_byte)) {
    return invalid_argument(fmt::format("{}/{}: must be >= beta_ns_per_byte {} (got {})", where, kFar.name, c.beta_ns_per_byte,
                                        c.beta_far_ns_per_byte));
  }
  return ok_status();
}

Result<TransportCost> parse_cost(const json& j, TransportCost c, const std::string& where) {
  if (!j.is_object()) return invalid_argument(fmt::format("{}: not an object", where));
  for (const auto& [key, v] : j.items()) {
    bool ok = key == kFar.name || key == kShared.name;
    for (const Field& f : kFields) ok = ok || key == f.name;
    for (const Bytes& b : kBytes) ok = ok || key == b.name;
    if (!ok) {
      return invalid_argument(fmt::format("{}/{}: unknown field (alpha_us, beta_ns_per_byte, gamma_ns_per_byte, cache_bytes, "
                                          "beta_far_ns_per_byte, alpha_shared_us, hd_piece_bytes)", where, key));
    }
  }
  for (const Field& f : kFields) {
    auto it = j.find(f.name);
    if (it == j.end()) return invalid_argument(fmt::format("{}/{}: missing", where, f.name));
    if (!it->is_number()) return invalid_argument(fmt::format("{}/{}: not a number ({})", where, f.name, it->dump()));
    c.*f.value = it->get<double>();
  }
  for (const Field& f : {kFar, kShared}) {
    auto it = j.find(f.name);
    if (it == j.end()) continue;
    if (!it->is_number()) return invalid_argument(fmt::format("{}/{}: not a number ({})", where, f.name, it->dump()));
    c.*f.value = it->get<double>();
  }
  for (const Bytes& b : kBytes) {
    auto it = j.find(b.name);
    if (it == j.end()) continue;
    if (!it->is_number_unsigned()) return invalid_argument(fmt::format("{}/{}: not a byte count ({})", where, b.name, it->dump()));
    c.*b.value = it->get<size_t>();
  }
  WEFT_RETURN_IF_ERROR(check(c, where));
  return c;
}

}  // namespace

const std::vector<std::string>& known_transports() {
  static const std::vector<std::string> names = {"tcp", "shm", "verbs", "loopback", "pinning-loopback"};
  return names;
}

const TransportCost& Tuning::of(std::string_view transport) const {
  auto it = transports.find(transport);
  if (it == transports.end()) it = transports.find("tcp");
  return it->second;
}

Status Tuning::validate() const {
  if (!transports.count("tcp")) return invalid_argument(fmt::format("tuning {}: no \"tcp\" entry (the transports not named take it)", source));
  for (const auto& [name, c] : transports) {
    const std::string where = fmt::format("tuning {}: /transports/{}", source, name);
    if (!known(name)) return invalid_argument(where + ": unknown transport");
    WEFT_RETURN_IF_ERROR(check(c, where));
  }
  return ok_status();
}

Result<Tuning> parse_tuning(std::string_view text, std::string_view name) {
  const std::string file = fmt::format("tuning file {}", name);
  WEFT_ASSIGN_OR_RETURN(json root, parse_json(text, StatusCode::kInvalidArgument, file));
  if (!root.is_object()) return invalid_argument(file + ": not a JSON object");
  for (const auto& [key, v] : root.items()) {
    if (std::find(std::begin(kTopFields), std::end(kTopFields), key) == std::end(kTopFields)) {
      return invalid_argument(fmt::format("{}: /{}: unknown field", file, key));
    }
  }
  auto version = root.find("version");
  if (version == root.end()) return invalid_argument(file + ": /version: missing");
  if (!version->is_number_integer() || version->get<int64_t>() != Tuning::kVersion) {
    return invalid_argument(fmt::format("{}: /version: {} is not {} (the version this weft reads)", file, version->dump(), Tuning::kVersion));
  }
  auto ts = root.find("transports");
  if (ts == root.end() || !ts->is_object() || ts->empty()) {
    return invalid_argument(file + ": /transports: missing, or not an object naming transports");
  }
  Tuning t = built_in_tuning();
  t.source = std::string(name);
  for (const auto& [transport, j] : ts->items()) {
    const std::string where = fmt::format("{}: /transports/{}", file, transport);
    if (!known(transport)) {
      return invalid_argument(fmt::format("{}: unknown transport (known: {})", where, fmt::join(known_transports(), ", ")));
    }
    const auto builtin = t.transports.find(transport);
    TransportCost start;
    if (builtin != t.transports.end()) start.hd_piece_bytes = builtin->second.hd_piece_bytes;
    WEFT_ASSIGN_OR_RETURN(t.transports[transport], parse_cost(j, start, where));
  }
  return t;
}

Result<Tuning> load_tuning(const std::string& path) {
  auto text = read_file(path);
  if (!text) return text.status().with_context(fmt::format("tuning file {}", path));
  return parse_tuning(*text, path);
}

Result<Tuning> tuning_from_env() {
  const char* path = std::getenv("WEFT_TUNING");
  if (path == nullptr || *path == '\0') return built_in_tuning();
  auto t = load_tuning(path);
  if (!t) return t.status().with_context("WEFT_TUNING");
  return t;
}

std::string tuning_to_json(const Tuning& t, const TuningInfo& info, const std::map<std::string, CalibrationSamples>& samples) {
  json root = json::object();
  root["version"] = Tuning::kVersion;
  if (!info.machine.empty()) root["machine"] = info.machine;
  if (!info.measured.empty()) root["measured"] = info.measured;
  if (!info.command.empty()) root["command"] = info.command;
  if (!info.load.empty()) root["load"] = info.load;
  json ts = json::object();
  for (const auto& [name, c] : t.transports) {
    json j = json::object();
    for (const Field& f : kFields) j[f.name] = c.*f.value;
    if (c.cache_bytes > 0) j[kFar.name] = c.*kFar.value;
    if (c.alpha_shared_us > 0) j[kShared.name] = c.*kShared.value;
    for (const Bytes& b : kBytes) {
      if (b.value != &TransportCost::cache_bytes || c.cache_bytes > 0) j[b.name] = c.*b.value;
    }
    ts[name] = j;
  }
  root["transports"] = ts;
  if (!samples.empty()) {
    json js = json::object();
    for (const auto& [name, s] : samples) js[name] = {{"exchange_us", s.exchange_us}, {"reduce_us", s.reduce_us}, {"shared_us", s.shared_us}};
    root["samples"] = js;
  }
  return root.dump(2) + "\n";
}

}  // namespace weft::coll
