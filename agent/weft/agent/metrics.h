// The agent's metrics in the Prometheus text exposition format, version 0.0.4
// (https://prometheus.io/docs/instrumenting/exposition_formats/): a # HELP and
// a # TYPE line for every family, then its samples. Every metric is listed,
// with its labels and their bounds, in docs/metrics.md.
//
//   std::string body = render_metrics(agent.snapshot());   // served as kMetricsContentType
#pragma once

#include <string>
#include <string_view>

#include "weft/agent/agent.h"

namespace weft::agent {

inline constexpr std::string_view kMetricsContentType = "text/plain; version=0.0.4; charset=utf-8";

std::string render_metrics(const AgentSnapshot& s);

// A label value as the format quotes it: backslash, double quote and line feed escaped.
std::string escape_label_value(std::string_view v);

}  // namespace weft::agent
