// Internal to agent/ (control.cc, control_monitor.cc): the field checks every
// control message's validator is built from. Each error names the field.
#pragma once

#include <cstdint>
#include <string>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "weft/common/status.h"
#include "weft/probe/mac.h"

namespace weft::agent::internal {

using nlohmann::json;

inline Status need(const json& j, const char* key, json::value_t type) {
  auto it = j.find(key);
  if (it == j.end()) return invalid_argument(fmt::format("missing field '{}'", key));
  // JSON has one integer type; a non-negative integer is acceptable as unsigned.
  const bool ok = type == json::value_t::number_unsigned
                      ? it->is_number_unsigned() || (it->is_number_integer() && it->get<int64_t>() >= 0)
                  : type == json::value_t::number_float  ? it->is_number()
                                                         : it->type() == type;
  if (!ok) return invalid_argument(fmt::format("field '{}' has the wrong type", key));
  return ok_status();
}

inline Status need_hex(const json& j, const char* key, size_t min_len, size_t max_len) {
  WEFT_RETURN_IF_ERROR(need(j, key, json::value_t::string));
  const std::string& s = j[key].get_ref<const std::string&>();
  if (s.size() < min_len || s.size() > max_len || !probe::from_hex(s)) {
    return invalid_argument(fmt::format("field '{}' is not {}..{} hex digits", key, min_len, max_len));
  }
  return ok_status();
}

inline Result<uint64_t> uint_in(const json& j, const char* key, uint64_t lo, uint64_t hi) {
  WEFT_RETURN_IF_ERROR(need(j, key, json::value_t::number_unsigned));
  const uint64_t v = j[key].get<uint64_t>();
  if (v < lo || v > hi) return invalid_argument(fmt::format("field '{}' = {} is outside {}..{}", key, v, lo, hi));
  return v;
}

// run and nonce, which every order that sends probes carries.
template <typename Order>
Status decode_run(const json& j, Order& c) {
  WEFT_ASSIGN_OR_RETURN(uint64_t run, uint_in(j, "run", 1, 0xffffffff));
  c.run = static_cast<uint32_t>(run);
  WEFT_RETURN_IF_ERROR(need_hex(j, "nonce", 32, 32));
  c.nonce = j["nonce"].get<std::string>();
  return ok_status();
}

}  // namespace weft::agent::internal
