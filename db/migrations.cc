// The schema, as an ordered list of migrations. Never edit a migration that has
// shipped: append a new one. PRAGMA user_version = number of migrations applied.
// docs/database.md describes every table with example queries.
#include "migrations.h"

namespace weft::db::internal {

namespace {

// v1: what a probe campaign measures.
constexpr const char* kV1 = R"sql(
CREATE TABLE hosts (
  id      INTEGER PRIMARY KEY,
  name    TEXT NOT NULL UNIQUE,
  ip      TEXT NOT NULL UNIQUE,
  agent   TEXT                          -- control-plane endpoint "ip:port", NULL if none
);

CREATE TABLE campaigns (
  id              INTEGER PRIMARY KEY,
  fingerprint     TEXT NOT NULL,        -- hash of the spec: a resumed campaign matches it
  method          TEXT NOT NULL CHECK (method IN ('dscp', 'ttl')),
  backend         TEXT NOT NULL,        -- udp, tcp-syn, dpdk
  protocol        INTEGER NOT NULL CHECK (protocol IN (6, 17)),
  dport           INTEGER NOT NULL CHECK (dport BETWEEN 1 AND 65535),
  sport_first     INTEGER NOT NULL CHECK (sport_first BETWEEN 1 AND 65535),
  sport_count     INTEGER NOT NULL CHECK (sport_count >= 1 AND sport_first + sport_count <= 65536),
  probes_per_port INTEGER NOT NULL CHECK (probes_per_port >= 1),
  probe_dscp      INTEGER CHECK (probe_dscp BETWEEN 0 AND 63),
  targeted        INTEGER NOT NULL DEFAULT 0,   -- 1 = only a schedule's pairs, early stop
  state           TEXT NOT NULL CHECK (state IN ('running', 'done', 'aborted')),
  started_us      INTEGER NOT NULL,     -- unix time, microseconds
  finished_us     INTEGER,
  config          TEXT NOT NULL         -- the full campaign config as JSON
);

-- One row per probed 5-tuple of a campaign (N probes are folded into it).
CREATE TABLE observations (
  id           INTEGER PRIMARY KEY,
  campaign_id  INTEGER NOT NULL REFERENCES campaigns(id) ON DELETE CASCADE,
  src_id       INTEGER NOT NULL REFERENCES hosts(id),
  dst_id       INTEGER NOT NULL REFERENCES hosts(id),
  protocol     INTEGER NOT NULL CHECK (protocol IN (6, 17)),
  sport        INTEGER NOT NULL CHECK (sport BETWEEN 1 AND 65535),
  dport        INTEGER NOT NULL CHECK (dport BETWEEN 1 AND 65535),
  spine        INTEGER CHECK (spine >= 0),  -- 0 = same leaf (no spine), NULL = never answered
  hop_addr     TEXT,                  -- TTL method: source of the ICMP time-exceeded
  dscp_seen    INTEGER CHECK (dscp_seen BETWEEN 0 AND 63),
  rtt_us       INTEGER,               -- smallest round trip of the answered probes
  sent         INTEGER NOT NULL CHECK (sent >= 1),
  answered     INTEGER NOT NULL CHECK (answered BETWEEN 0 AND sent),
  unstable     INTEGER NOT NULL DEFAULT 0 CHECK (unstable IN (0, 1)),
  other_spine  INTEGER,               -- the second spine an unstable 5-tuple answered with
  observed_us  INTEGER NOT NULL,
  UNIQUE (campaign_id, src_id, dst_id, protocol, sport, dport)
);
CREATE INDEX observations_by_pair ON observations (src_id, dst_id, protocol, dport);

-- Packets dropped by a campaign's receivers, per reason (forged MAC, stale, ...).
CREATE TABLE rejections (
  campaign_id  INTEGER NOT NULL REFERENCES campaigns(id) ON DELETE CASCADE,
  reason       TEXT NOT NULL,
  count        INTEGER NOT NULL CHECK (count >= 0),
  PRIMARY KEY (campaign_id, reason)
);
)sql";

// v2: the fabric inferred from a campaign, its anomalies, and a readable view.
constexpr const char* kV2 = R"sql(
CREATE TABLE switches (
  id           INTEGER PRIMARY KEY,
  campaign_id  INTEGER NOT NULL REFERENCES campaigns(id) ON DELETE CASCADE,
  tier         TEXT NOT NULL CHECK (tier IN ('spine', 'leaf')),
  number       INTEGER NOT NULL CHECK (number >= 1),
  address      TEXT,                  -- spine: ICMP source address (TTL method)
  UNIQUE (campaign_id, tier, number)
);

CREATE TABLE host_leaf (
  campaign_id  INTEGER NOT NULL REFERENCES campaigns(id) ON DELETE CASCADE,
  host_id      INTEGER NOT NULL REFERENCES hosts(id),
  leaf_id      INTEGER NOT NULL REFERENCES switches(id) ON DELETE CASCADE,
  PRIMARY KEY (campaign_id, host_id)
);

CREATE TABLE links (
  id           INTEGER PRIMARY KEY,
  campaign_id  INTEGER NOT NULL REFERENCES campaigns(id) ON DELETE CASCADE,
  spine_id     INTEGER NOT NULL REFERENCES switches(id) ON DELETE CASCADE,
  leaf_id      INTEGER NOT NULL REFERENCES switches(id) ON DELETE CASCADE,
  flows        INTEGER NOT NULL CHECK (flows >= 0),  -- observed 5-tuples that crossed it
  state        TEXT NOT NULL CHECK (state IN ('up', 'dead')),
  UNIQUE (campaign_id, spine_id, leaf_id)
);

CREATE TABLE anomalies (
  id           INTEGER PRIMARY KEY,
  campaign_id  INTEGER NOT NULL REFERENCES campaigns(id) ON DELETE CASCADE,
  kind         TEXT NOT NULL CHECK (kind IN ('unstable', 'dead_link', 'unreachable', 'method_disagree')),
  detail       TEXT NOT NULL
);

CREATE VIEW paths AS
  SELECT o.campaign_id, s.name AS src, s.ip AS src_ip, d.name AS dst, d.ip AS dst_ip,
         CASE o.protocol WHEN 6 THEN 'tcp' ELSE 'udp' END AS proto,
         o.sport, o.dport, o.spine, o.hop_addr, o.dscp_seen, o.rtt_us, o.unstable
  FROM observations o JOIN hosts s ON s.id = o.src_id JOIN hosts d ON d.id = o.dst_id;
)sql";

// v3: what `weft watch` saw: a directed spine-leaf link that failed while a
// job ran, when its first loss was reported, when it was localised, when a
// plan without it was published and when it came back (unix microseconds).
constexpr const char* kV3 = R"sql(
CREATE TABLE link_events (
  id             INTEGER PRIMARY KEY,
  link           TEXT NOT NULL,         -- "s2->l3" (spine 2 towards leaf 3) or "l3->s2"
  first_loss_us  INTEGER NOT NULL,
  localised_us   INTEGER NOT NULL CHECK (localised_us >= first_loss_us),
  published_us   INTEGER,               -- NULL: no plan published for it
  restored_us    INTEGER,               -- NULL: still down (or the watcher stopped first)
  tuples         INTEGER NOT NULL CHECK (tuples >= 0),  -- 5-tuples watched when it failed
  failing        INTEGER NOT NULL CHECK (failing >= 1)  -- of them failing when it was localised
);
)sql";

constexpr Migration kMigrations[] = {
    {1, "campaigns and observations", kV1},
    {2, "inferred fabric, anomalies, paths view", kV2},
    {3, "link events of weft watch", kV3},
};

}  // namespace

const Migration* migrations(size_t* count) {
  *count = sizeof(kMigrations) / sizeof(kMigrations[0]);
  return kMigrations;
}

}  // namespace weft::db::internal
