// Test support: read an HTTP endpoint (a metrics scrape, Prometheus's API)
// and one sample of a Prometheus text body.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

#include "weft/common/status.h"

namespace weft::test {

// GET http://host:port<target> in the calling thread's network namespace;
// the body of a 200 answer, else an error naming the status or the failure.
// Gives up after `timeout` (connect, request and answer together).
Result<std::string> http_get(std::string_view host, uint16_t port, std::string_view target,
                             std::chrono::milliseconds timeout = std::chrono::seconds(5));
inline Result<std::string> http_get(uint16_t port, std::string_view target) {
  return http_get("127.0.0.1", port, target);
}

// The value of the sample `series` ("name" or "name{labels}", exactly as
// exposed) in a Prometheus text body; -1 if it is absent.
double prometheus_sample(std::string_view text, std::string_view series);

}  // namespace weft::test
