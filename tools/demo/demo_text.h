// Small text helpers the demo's files share.
#pragma once

#include <string>

namespace weft::cli::demo {

// Bytes per second in Mbit/s, the unit the demo's tables print.
inline double mbit(double bytes_per_s) { return bytes_per_s * 8 / 1e6; }

// The first non-blank line of a program's output: error messages quote it.
inline std::string first_line(const std::string& s) {
  const auto b = s.find_first_not_of("\n ");
  if (b == std::string::npos) return "";
  return s.substr(b, s.find('\n', b) - b);
}

}  // namespace weft::cli::demo
