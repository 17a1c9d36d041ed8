// The probe controller behind `weft probe`: connects to every host's agent,
// authenticates, announces the campaign key to all reflectors, starts one sweep
// per source host, streams the results into fabric.db in batched transactions,
// then infers the fabric and records anomalies and rejections.
//
// Resume: a campaign is identified by its fingerprint (spec + host list). If the
// database holds one still 'running' (the controller was killed), the new run
// continues it: every agent is told to skip the 5-tuples already committed, so
// nothing is probed or stored twice.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "weft/db/stores.h"
#include "weft/probe/campaign.h"
#include "weft/probe/mac.h"

namespace weft::agent {

struct HostEntry {
  std::string name;
  std::string ip;
  uint16_t control_port = 7400;
};

// "name ip [control_port]" per line; '#' starts a comment.
Result<std::vector<HostEntry>> parse_hosts(const std::string& text, const std::string& origin);

struct ProbeRunConfig {
  std::string method = "dscp";
  std::string backend = "udp";
  uint16_t dport = 4791;
  uint8_t probe_dscp = 8;
  uint16_t sport_first = 49152;
  uint16_t sport_count = 64;
  int probes_per_port = 1;
  double rate_pps = 100000;   // per sending host
  int timeout_ms = 250;
  int retries = 2;
  uint16_t port_window = 16;  // source ports an agent probes (and reports) at a time
  // Targeted campaign: only these directed (src, dst) host-index pairs, each
  // stopping once it has ports_per_spine answered ports on every one of
  // stop_at_spines spines. ports_per_spine 0 = per sending host, the number
  // of pairs it sends on: a planner gives each of a host's flows its own
  // source port, so that many ports per spine always leave one free
  // (probe/weft/probe/campaign.h).
  std::optional<std::vector<std::pair<int, int>>> pairs;
  int stop_at_spines = 0;
  int ports_per_spine = 0;
  int connect_timeout_ms = 5000;
  // While sweeps run, a session with none of its own (a host that only
  // reflects, or whose sweep is done) gets a status request this often: the
  // agent closes a session idle for its idle timeout (600 s by default), and
  // its counters are read after the slowest sweep.
  int keep_open_ms = 30000;
  int batch_rows = 4096;       // observations per DB transaction
  bool progress = false;       // draw a progress bar with ETA on stderr

  Status validate() const;
  db::CampaignSpec spec(const std::vector<HostEntry>& hosts) const;
};

struct ProbeSummary {
  int64_t campaign_id = 0;
  bool resumed = false;
  bool targeted = false;
  int hosts = 0;
  int pairs = 0;
  int64_t flows = 0;            // 5-tuples recorded by this run
  int64_t flows_total = 0;      // in the campaign after this run
  int64_t answered_flows = 0;
  std::map<int, int64_t> flows_per_spine;  // spine -> 5-tuples (0 = same leaf)
  probe::ProbeStats senders;               // summed over the agents' sweeps
  probe::ProbeStats reflectors;            // reflector deltas during the run
  int leaves = 0;
  int spines = 0;
  std::vector<db::Anomaly> anomalies;
  std::vector<std::pair<std::string, int>> spend;  // targeted: "src->dst", probes
  std::vector<std::string> incomplete;              // targeted: "src->dst" pairs that did not complete
  double seconds = 0;
};

std::string format_summary(const ProbeSummary& s);

Result<ProbeSummary> run_probe(db::Database& db, const std::vector<HostEntry>& hosts, const probe::MacKey& secret,
                               const ProbeRunConfig& cfg);

}  // namespace weft::agent
