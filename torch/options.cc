#include "options.h"

#include <cstdlib>

#include <fmt/format.h>

namespace weft::pt {
namespace {

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

}  // namespace

Result<BackendOptions> backend_options_from_env() {
  BackendOptions o;
  if (std::string t = env("WEFT_TRANSPORT"); !t.empty()) {
    if (t != "auto" && t != "tcp" && t != "shm") {
      return invalid_argument(fmt::format("WEFT_TRANSPORT={}: expected auto, tcp or shm", t));
    }
    o.transport = t;
  }
  o.host = env("WEFT_HOST");
  o.plan_path = env("WEFT_PLAN");
  if (!o.plan_path.empty()) {
    auto plan = routing::load_plan(o.plan_path);
    if (!plan) return plan.status().with_context("WEFT_PLAN=" + o.plan_path);
    o.plan = std::move(*plan);
  }
  return o;
}

}  // namespace weft::pt
