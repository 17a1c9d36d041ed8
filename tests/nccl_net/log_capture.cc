#include "log_capture.h"

#include <cstdarg>
#include <cstdio>

namespace weft::nccl_net::testing {

std::vector<LogLine>& log_lines() {
  static std::vector<LogLine> lines;
  return lines;
}

void collect_log(ncclDebugLogLevel level, unsigned long, const char*, int, const char* fmt, ...) {
  char buf[1024];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(buf, sizeof(buf), fmt, ap);
  va_end(ap);
  log_lines().push_back({level, buf});
}

int said(const std::string& what) {
  int n = 0;
  for (const auto& l : log_lines()) n += l.text.find(what) != std::string::npos;
  return n;
}

}  // namespace weft::nccl_net::testing
