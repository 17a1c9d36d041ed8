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

inline Result<nlohmann::json> parse_json(std::string_view text, StatusCode code = StatusCode::kInvalidArgument,
                                         std::string_view context = {}) {
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    std::string msg = e.what();
    auto pos = msg.find("] ");
    if (pos != std::string::npos) msg = msg.substr(pos + 2);
    if (!context.empty()) msg = std::string(context) + ": " + msg;
    return Status(code, std::move(msg));
  }
}

}  // namespace weft
