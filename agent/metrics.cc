// The metrics endpoint's body (metrics.h). Names follow Prometheus' naming
// practice (https://prometheus.io/docs/practices/naming/): a weft_agent_ prefix,
// base units (seconds), counters end in _total.
#include "weft/agent/metrics.h"

#include <cmath>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "weft/probe/wire.h"

namespace weft::agent {
namespace {

using Labels = std::vector<std::pair<std::string_view, std::string>>;

class Exposition {
 public:
  void family(std::string_view name, std::string_view type, std::string_view help) {
    out_ += fmt::format("# HELP {} {}\n# TYPE {} {}\n", name, help, name, type);
  }
  void sample(std::string_view name, const Labels& labels, double v) {
    out_ += name;
    if (!labels.empty()) {
      out_ += '{';
      for (size_t i = 0; i < labels.size(); ++i) {
        out_ += fmt::format("{}{}=\"{}\"", i ? "," : "", labels[i].first, escape_label_value(labels[i].second));
      }
      out_ += '}';
    }
    out_ += ' ';
    out_ += std::isinf(v) ? (v > 0 ? "+Inf" : "-Inf") : fmt::format("{}", v);
    out_ += '\n';
  }
  void sample(std::string_view name, const Labels& labels, uint64_t v) {
    sample(name, labels, static_cast<double>(v));
  }
  // One family with one unlabelled sample.
  void single(std::string_view name, std::string_view type, std::string_view help, double v) {
    family(name, type, help);
    sample(name, {}, v);
  }
  std::string take() { return std::move(out_); }

 private:
  std::string out_;
};

void probe_rejects(Exposition& e, std::string_view name, std::string_view help, const probe::ProbeStats& s) {
  e.family(name, "counter", help);
  for (size_t i = 0; i < s.rejected.size(); ++i) {
    e.sample(name, {{"reason", std::string(probe::reject_name(static_cast<probe::Reject>(i)))}}, s.rejected[i]);
  }
}

// The per-peer or per-path families: 5-tuples, probes sent and answered, RTT.
void paths(Exposition& e, std::string_view prefix, std::string_view label, std::string_view what,
           const std::map<std::string, PathTally>& m, bool histogram) {
  const std::string flows = fmt::format("{}_flows_total", prefix), sent = fmt::format("{}_probes_sent_total", prefix),
                    answered = fmt::format("{}_probes_answered_total", prefix),
                    rtt = fmt::format("{}_rtt_seconds", prefix);
  e.family(flows, "counter", fmt::format("5-tuples this agent's sweeps settled, by {}.", what));
  for (const auto& [k, t] : m) e.sample(flows, {{label, k}}, t.flows);
  e.family(sent, "counter", fmt::format("Probes this agent's sweeps sent, retries included, by {}.", what));
  for (const auto& [k, t] : m) e.sample(sent, {{label, k}}, t.probes_sent);
  e.family(answered, "counter", fmt::format("Probes this agent's sweeps got a valid answer to, by {}.", what));
  for (const auto& [k, t] : m) e.sample(answered, {{label, k}}, t.probes_answered);
  e.family(rtt, histogram ? "histogram" : "summary",
           fmt::format("Minimum round-trip time of each answered 5-tuple, by {}.", what));
  for (const auto& [k, t] : m) {
    if (histogram) {
      uint64_t cumulative = 0;
      for (size_t b = 0; b < kRttBuckets.size(); ++b) {
        cumulative += t.rtt_buckets[b];
        e.sample(rtt + "_bucket", {{label, k}, {"le", fmt::format("{}", kRttBuckets[b])}}, cumulative);
      }
      e.sample(rtt + "_bucket", {{label, k}, {"le", "+Inf"}}, t.rtt_count);
    }
    e.sample(rtt + "_sum", {{label, k}}, t.rtt_sum_seconds);
    e.sample(rtt + "_count", {{label, k}}, t.rtt_count);
  }
}

}  // namespace

std::string escape_label_value(std::string_view v) {
  std::string out;
  out.reserve(v.size());
  for (char c : v) {
    if (c == '\\') out += "\\\\";
    else if (c == '"') out += "\\\"";
    else if (c == '\n') out += "\\n";
    else out += c;
  }
  return out;
}

std::string render_metrics(const AgentSnapshot& s) {
  Exposition e;
  e.family("weft_agent_info", "gauge", "Always 1; the labels name this agent.");
  e.sample("weft_agent_info", {{"name", s.name}, {"version", "0.1.0"}}, uint64_t{1});

  // The sweeps this agent ran (the totals of their "done" frames).
  const probe::ProbeStats& w = s.sweeps.finished;
  e.single("weft_agent_probes_sent_total", "counter", "Probes sent by this agent's finished sweeps, retries included.",
           static_cast<double>(w.sent));
  e.single("weft_agent_probes_answered_total", "counter", "Probes of finished sweeps that got a valid answer.",
           static_cast<double>(w.answered));
  e.single("weft_agent_probes_timed_out_total", "counter",
           "Probes of finished sweeps whose every retry went unanswered.", static_cast<double>(w.timed_out));
  e.single("weft_agent_probes_retried_total", "counter", "Probes of finished sweeps sent again after a timeout.",
           static_cast<double>(w.retried));
  e.single("weft_agent_probe_send_errors_total", "counter",
           "Probes of finished sweeps the kernel or the NIC refused to send.", static_cast<double>(w.send_errors));
  probe_rejects(e, "weft_agent_probe_replies_rejected_total",
                "Replies to this agent's finished sweeps that were rejected, by reason.", w);

  // The reflector: answers to other hosts' probes.
  e.single("weft_agent_reflector_answered_total", "counter", "Probes from other hosts this agent's reflector answered.",
           static_cast<double>(s.reflector.answered));
  e.single("weft_agent_reflector_send_errors_total", "counter", "Answers the reflector failed to send.",
           static_cast<double>(s.reflector.send_errors));
  probe_rejects(e, "weft_agent_reflector_rejected_total",
                "Packets the reflector did not answer (forged, stale, replayed, malformed), by reason.", s.reflector);

  // The control plane.
  e.family("weft_agent_control_rejected_total", "counter", "Control-plane frames or sessions refused, by reason.");
  for (size_t i = 0; i < s.control.rejected.size(); ++i) {
    e.sample("weft_agent_control_rejected_total",
             {{"reason", std::string(control_reject_name(static_cast<ControlReject>(i)))}}, s.control.rejected[i]);
  }
  e.single("weft_agent_sessions", "gauge", "Control sessions open now.", static_cast<double>(s.live_sessions));
  e.single("weft_agent_sessions_total", "counter", "Control sessions accepted.", static_cast<double>(s.control.sessions));
  e.single("weft_agent_sessions_unauthenticated", "gauge", "Control sessions still in their handshake now.",
           s.control.strangers);
  e.single("weft_agent_sessions_authenticated", "gauge", "Authenticated control sessions now.",
           s.control.authenticated);
  e.single("weft_agent_campaigns_rate_capped_total", "counter",
           "Campaigns whose rate (faster than --max-rate, or unpaced) was capped to --max-rate.",
           static_cast<double>(s.control.rate_capped));

  // Campaigns and their progress.
  e.single("weft_agent_campaigns_started_total", "counter", "Campaign sweeps started on this agent.",
           static_cast<double>(s.sweeps.sweeps_started));
  e.single("weft_agent_campaigns_failed_total", "counter",
           "Campaign sweeps that ended with an error instead of a result.", static_cast<double>(s.sweeps.sweeps_failed));
  e.single("weft_agent_campaigns_running", "gauge", "Campaign sweeps running now.", s.sweeps.running);
  e.single("weft_agent_flows_settled_total", "counter", "5-tuples every sweep of this agent settled.",
           static_cast<double>(s.sweeps.flows_settled));
  e.single("weft_agent_running_flows_planned", "gauge",
           "5-tuples the running sweeps will settle at most (targeted sweeps stop earlier).",
           static_cast<double>(s.sweeps.running_planned));
  e.single("weft_agent_running_flows_settled", "gauge", "5-tuples the running sweeps have settled.",
           static_cast<double>(s.sweeps.running_settled));

  paths(e, "weft_agent_peer", "peer", "destination host (IPv4)", s.sweeps.peers, /*histogram=*/false);
  paths(e, "weft_agent_path", "spine", "spine (DSCP: its number, 0 = same leaf; TTL: the hop's address)",
        s.sweeps.paths, /*histogram=*/true);
  return e.take();
}

}  // namespace weft::agent
