// libFuzzer target: the route plan reader (routing/plan_parse.cc) on any
// text. A text it takes must come back the same through the writer
// (plan_file.cc): read(write(read(x))) == read(x), but for rounds that are
// all 0, which the writer leaves out (docs/route-plan.md "Rounds"); one it
// refuses must say why in one line starting "route plan".
//   build-fuzz/plan_parse_fuzz -max_total_time=60 tests/fuzz/corpus/plan
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>

#include "weft/routing/plan.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  auto plan = weft::routing::parse_plan(text);
  if (!plan) {
    const std::string& m = plan.status().message();
    if (m.rfind("route plan", 0) != 0 || m.find('\n') != std::string::npos) __builtin_trap();
    return 0;
  }
  auto again = weft::routing::parse_plan(weft::routing::plan_to_json(*plan));
  for (auto& f : plan->flows) {
    if (std::all_of(f.rounds.begin(), f.rounds.end(), [](int r) { return r == 0; })) f.rounds.clear();
  }
  if (!again || *again != *plan) __builtin_trap();
  return 0;
}
