// libFuzzer target: the agent control-plane parser (frames from the network,
// before and after authentication) and the decoders behind it.
//   build-fuzz/control_message_fuzz -max_total_time=60
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "weft/agent/control.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace weft::agent;
  const std::string_view body(reinterpret_cast<const char*>(data), size);
  auto m = parse_control(body);
  if (!m) return 0;
  // A message that validated must decode without surprises.
  if (m->type == "campaign") {
    auto c = decode_campaign(m->body);
    if (!c) __builtin_trap();
    auto again = decode_campaign(encode_campaign(*c));
    if (!again || again->plan.targets != c->plan.targets || again->plan.skip != c->plan.skip) __builtin_trap();
  } else if (m->type == "results") {
    for (const auto& row : m->body["rows"]) {
      if (!decode_flow(row)) __builtin_trap();
    }
  } else if (m->type == "done") {
    (void)decode_stats(m->body["stats"]);
  }
  return 0;
}
