// JSON parsing with weft's error style: nlohmann's parse_error becomes a
// one-line Status "parse error at line L, column C: ..." (without the
// library's "[json.exception.parse_error.101]" prefix). A number too large
// for a double (1e999) is refused while parsing too, as out_of_range.406
// ("number overflow parsing '1e999'"): every exception the parser throws is
// a Status, never an escape.
#pragma once

#include <string_view>

#include <nlohmann/json.hpp>

#include "weft/common/status.h"

namespace weft {

namespace json_internal {
inline Status error(const nlohmann::json::exception& e, StatusCode code, std::string_view context) {
  std::string msg = e.what();
  auto pos = msg.find("] ");
  if (pos != std::string::npos) msg = msg.substr(pos + 2);
  if (!context.empty()) msg = std::string(context) + ": " + msg;
  return Status(code, std::move(msg));
}
}  // namespace json_internal

inline Result<nlohmann::json> parse_json(std::string_view text, StatusCode code = StatusCode::kInvalidArgument,
                                         std::string_view context = {}) {
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    return json_internal::error(e, code, context);
  }
}

// Whether `text` is JSON, with parse_json's message where it is not, but
// without keeping a tree: each value is dropped as soon as it is parsed (a
// parser callback that returns false), so a file of hundreds of megabytes
// costs its parse time and little memory.
inline Status check_json(std::string_view text, StatusCode code = StatusCode::kInvalidArgument,
                         std::string_view context = {}) {
  try {
    const nlohmann::json dropped =
        nlohmann::json::parse(text, [](int, nlohmann::json::parse_event_t, nlohmann::json&) { return false; });
    (void)dropped;  // discarded: the callback kept nothing
    return {};
  } catch (const nlohmann::json::exception& e) {
    return json_internal::error(e, code, context);
  }
}

}  // namespace weft
