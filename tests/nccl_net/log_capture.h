// What the plugin says through NCCL's logger, as a test hands it one
// (ncclDebugLogger_t, nccl_net/weft/nccl_net/abi.h): each line formatted,
// with its level, in the order the plugin logged them.
#pragma once

#include <string>
#include <vector>

#include "weft/nccl_net/abi.h"

namespace weft::nccl_net::testing {

struct LogLine {
  ncclDebugLogLevel level;
  std::string text;
};
std::vector<LogLine>& log_lines();
void collect_log(ncclDebugLogLevel level, unsigned long flags, const char* file, int line, const char* fmt, ...);
// How many lines contain `what`.
int said(const std::string& what);

}  // namespace weft::nccl_net::testing
