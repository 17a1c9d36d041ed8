// Typed stores over weft's SQLite schema (migrations.cc, docs/database.md).
// Every function takes the Database and returns Status/Result; rows are plain
// structs. Observation writes are batched: one transaction per batch of
// thousands of rows (a transaction per row would cost an fsync each).
//
//   WEFT_ASSIGN_OR_RETURN(int64_t h1, upsert_host(db, {.name = "h1-1", .ip = "10.0.1.1"}));
//   WEFT_ASSIGN_OR_RETURN(int64_t c, create_campaign(db, spec));
//   ObservationWriter w(db);
//   WEFT_ASSIGN_OR_RETURN(size_t added, w.write_batch(c, rows));  // duplicates skipped
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "weft/db/database.h"

namespace weft::db {

struct HostRow {
  int64_t id = 0;
  std::string name;
  std::string ip;
  std::string agent;  // "ip:port" of its agent's control plane, "" if none
};

// What a campaign probes. fingerprint() identifies the spec for resuming: a
// campaign with the same fingerprint still 'running' continues where it stopped.
struct CampaignSpec {
  std::string method = "dscp";  // dscp | ttl
  std::string backend = "udp";  // udp | tcp-syn | dpdk
  int protocol = 17;            // 17 UDP, 6 TCP
  int dport = 4791;             // RoCEv2's UDP port by default
  int sport_first = 49152;
  int sport_count = 64;
  int probes_per_port = 1;
  std::optional<int> probe_dscp = 8;
  bool targeted = false;
  std::string config_json = "{}";  // the whole config, for the record

  std::string fingerprint() const;
};

struct CampaignRow {
  int64_t id = 0;
  CampaignSpec spec;
  std::string fingerprint;
  std::string state;  // running | done | aborted
  int64_t started_us = 0;
  std::optional<int64_t> finished_us;
};

struct Observation {
  int64_t src_id = 0;
  int64_t dst_id = 0;
  int protocol = 17;
  int sport = 0;
  int dport = 0;
  std::optional<int> spine;  // 0 = same leaf; nullopt = never answered
  std::optional<std::string> hop_addr;
  std::optional<int> dscp_seen;
  std::optional<int64_t> rtt_us;
  int sent = 1;
  int answered = 0;
  bool unstable = false;
  std::optional<int> other_spine;
  int64_t observed_us = 0;

  bool operator==(const Observation&) const = default;
};

// The fabric as inferred from one campaign.
struct InferredFabric {
  struct Spine {
    int number = 0;
    std::string address;  // "" when the method does not reveal it
  };
  struct Link {
    int spine = 0;
    int leaf = 0;
    int64_t flows = 0;
    bool dead = false;
  };
  std::map<int64_t, int> host_leaf;  // host id -> leaf number (1-based)
  std::vector<Spine> spines;
  std::vector<Link> links;
};

struct Anomaly {
  std::string kind;  // unstable | dead_link | unreachable | method_disagree
  std::string detail;
};

int64_t now_us();

// --- hosts
Result<int64_t> upsert_host(Database& db, const HostRow& host);  // by name; returns id
Result<std::vector<HostRow>> list_hosts(Database& db);

// --- campaigns
Result<int64_t> create_campaign(Database& db, const CampaignSpec& spec);
Result<CampaignRow> get_campaign(Database& db, int64_t id);
// The newest campaign with this fingerprint still 'running' (to resume), if any.
Result<std::optional<int64_t>> find_running_campaign(Database& db, const std::string& fingerprint);
// The newest finished campaign (of a protocol, when given).
Result<std::optional<int64_t>> latest_done_campaign(Database& db, std::optional<int> protocol = std::nullopt);
Status finish_campaign(Database& db, int64_t id, const std::string& state);

// --- observations
class ObservationWriter {
 public:
  explicit ObservationWriter(Database& db) : db_(db) {}
  // Inserts `rows` in one transaction; rows whose 5-tuple the campaign already
  // holds are skipped (resume never duplicates). Returns rows inserted.
  Result<size_t> write_batch(int64_t campaign_id, std::span<const Observation> rows);

 private:
  Database& db_;
  std::optional<Statement> insert_;
};

Result<std::vector<Observation>> load_observations(Database& db, int64_t campaign_id);
// Streams the (src, dst, sport) of the campaign's observations of one protocol
// and destination port, without holding them: a resumed campaign of millions
// of 5-tuples turns them into port ranges (probe/weft/probe/skip_set.h).
// Returns how many there were.
Result<int64_t> for_each_recorded(Database& db, int64_t campaign_id, int protocol, int dport,
                                  const std::function<void(int64_t src_id, int64_t dst_id, int sport)>& f);

// --- receiver statistics, inference, anomalies
Status add_rejections(Database& db, int64_t campaign_id, const std::map<std::string, int64_t>& by_reason);
Result<std::map<std::string, int64_t>> load_rejections(Database& db, int64_t campaign_id);
// Replaces the campaign's inferred fabric.
Status save_inference(Database& db, int64_t campaign_id, const InferredFabric& fabric);
Result<InferredFabric> load_inference(Database& db, int64_t campaign_id);
Status add_anomalies(Database& db, int64_t campaign_id, const std::vector<Anomaly>& anomalies);
Result<std::vector<Anomaly>> load_anomalies(Database& db, int64_t campaign_id);

}  // namespace weft::db
