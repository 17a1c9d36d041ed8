// Hosts, campaigns, rejection counters and anomalies (stores.h).
#include <chrono>

#include <fmt/format.h>

#include "weft/db/stores.h"

namespace weft::db {

int64_t now_us() {
  return std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// Readable and stable across builds (std::hash is neither): the spec's fields,
// plus FNV-1a 64 of the config JSON (which carries the host list).
std::string CampaignSpec::fingerprint() const {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : config_json) h = (h ^ c) * 1099511628211ull;
  return fmt::format("{}/{}/p{}/d{}/s{}+{}/n{}/x{}/t{}/{:016x}", method, backend, protocol, dport, sport_first,
                     sport_count, probes_per_port, probe_dscp.value_or(-1), targeted ? 1 : 0, h);
}

namespace {
Result<int64_t> upsert_host_at(Database& db, const HostRow& host) {
  WEFT_ASSIGN_OR_RETURN(Statement moved, db.prepare(
      "UPDATE hosts SET ip = 'moved:' || ip || '#' || id WHERE ip = ?1 AND name <> ?2"));
  WEFT_RETURN_IF_ERROR(moved.bind_all(host.ip, host.name));
  WEFT_RETURN_IF_ERROR(moved.step_done());
  WEFT_ASSIGN_OR_RETURN(Statement st, db.prepare(
      "INSERT INTO hosts(name, ip, agent) VALUES(?1, ?2, NULLIF(?3, '')) "
      "ON CONFLICT(name) DO UPDATE SET ip = excluded.ip, agent = COALESCE(excluded.agent, hosts.agent) "
      "RETURNING id"));
  WEFT_RETURN_IF_ERROR(st.bind_all(host.name, host.ip, host.agent));
  WEFT_ASSIGN_OR_RETURN(bool row, st.step());
  if (!row) return internal_error("upsert of host " + host.name + " returned no id");
  return st.column_int(0);
}
}  // namespace

// A host is its name; its ip is where it is now. An address another host
// held (readdressed, two hosts swapped, a retired host's address reused)
// moves to this one: the other row keeps its id and history, its ip becomes
// "moved:<ip>#<id>" (unique, and no address) until that host is listed again.
// A savepoint, not a transaction: the caller may hold one.
Result<int64_t> upsert_host(Database& db, const HostRow& host) {
  if (host.name.empty() || host.ip.empty()) return invalid_argument("a host needs a name and an ip");
  WEFT_RETURN_IF_ERROR(db.exec("SAVEPOINT weft_upsert_host"));
  auto id = upsert_host_at(db, host);
  if (!id) {
    (void)db.exec("ROLLBACK TO weft_upsert_host");
    (void)db.exec("RELEASE weft_upsert_host");
    return id.status();
  }
  WEFT_RETURN_IF_ERROR(db.exec("RELEASE weft_upsert_host"));
  return id;
}

Result<std::vector<HostRow>> list_hosts(Database& db) {
  WEFT_ASSIGN_OR_RETURN(Statement st, db.prepare("SELECT id, name, ip, COALESCE(agent, '') FROM hosts ORDER BY id"));
  std::vector<HostRow> out;
  for (;;) {
    WEFT_ASSIGN_OR_RETURN(bool row, st.step());
    if (!row) break;
    out.push_back({st.column_int(0), st.column_text(1), st.column_text(2), st.column_text(3)});
  }
  return out;
}

Result<int64_t> create_campaign(Database& db, const CampaignSpec& s) {
  WEFT_ASSIGN_OR_RETURN(Statement st, db.prepare(
      "INSERT INTO campaigns(fingerprint, method, backend, protocol, dport, sport_first, sport_count, "
      "probes_per_port, probe_dscp, targeted, state, started_us, config) "
      "VALUES(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 'running', ?, ?)"));
  WEFT_RETURN_IF_ERROR(st.bind_all(s.fingerprint(), s.method, s.backend, s.protocol, s.dport, s.sport_first,
                                   s.sport_count, s.probes_per_port, s.probe_dscp, s.targeted ? 1 : 0, now_us(),
                                   s.config_json));
  WEFT_RETURN_IF_ERROR(st.step_done().with_context("recording the campaign"));
  return db.last_insert_rowid();
}

Result<CampaignRow> get_campaign(Database& db, int64_t id) {
  WEFT_ASSIGN_OR_RETURN(Statement st, db.prepare(
      "SELECT id, fingerprint, method, backend, protocol, dport, sport_first, sport_count, probes_per_port, "
      "probe_dscp, targeted, state, started_us, finished_us, config FROM campaigns WHERE id = ?"));
  WEFT_RETURN_IF_ERROR(st.bind(1, id));
  WEFT_ASSIGN_OR_RETURN(bool row, st.step());
  if (!row) return not_found(fmt::format("no campaign {} in {}", id, db.path()));
  CampaignRow c;
  c.id = st.column_int(0);
  c.fingerprint = st.column_text(1);
  c.spec.method = st.column_text(2);
  c.spec.backend = st.column_text(3);
  c.spec.protocol = static_cast<int>(st.column_int(4));
  c.spec.dport = static_cast<int>(st.column_int(5));
  c.spec.sport_first = static_cast<int>(st.column_int(6));
  c.spec.sport_count = static_cast<int>(st.column_int(7));
  c.spec.probes_per_port = static_cast<int>(st.column_int(8));
  c.spec.probe_dscp = st.column_is_null(9) ? std::nullopt : std::optional<int>(static_cast<int>(st.column_int(9)));
  c.spec.targeted = st.column_int(10) != 0;
  c.state = st.column_text(11);
  c.started_us = st.column_int(12);
  if (!st.column_is_null(13)) c.finished_us = st.column_int(13);
  c.spec.config_json = st.column_text(14);
  return c;
}

namespace {
Result<std::optional<int64_t>> optional_id(Statement& st) {
  WEFT_ASSIGN_OR_RETURN(bool row, st.step());
  if (!row) return std::optional<int64_t>();
  return std::optional<int64_t>(st.column_int(0));
}
}  // namespace

Result<std::optional<int64_t>> find_running_campaign(Database& db, const std::string& fingerprint) {
  WEFT_ASSIGN_OR_RETURN(Statement st, db.prepare(
      "SELECT id FROM campaigns WHERE fingerprint = ? AND state = 'running' ORDER BY id DESC LIMIT 1"));
  WEFT_RETURN_IF_ERROR(st.bind(1, fingerprint));
  return optional_id(st);
}

Result<std::optional<int64_t>> latest_done_campaign(Database& db, std::optional<int> protocol) {
  WEFT_ASSIGN_OR_RETURN(Statement st, db.prepare(
      "SELECT id FROM campaigns WHERE state = 'done' AND (?1 IS NULL OR protocol = ?1) ORDER BY id DESC LIMIT 1"));
  WEFT_RETURN_IF_ERROR(st.bind(1, protocol));
  return optional_id(st);
}

Status finish_campaign(Database& db, int64_t id, const std::string& state) {
  if (state != "done" && state != "aborted") return invalid_argument("campaign state must be done or aborted");
  WEFT_ASSIGN_OR_RETURN(Statement st, db.prepare("UPDATE campaigns SET state = ?, finished_us = ? WHERE id = ?"));
  WEFT_RETURN_IF_ERROR(st.bind_all(state, now_us(), id));
  return st.step_done();
}

Status add_rejections(Database& db, int64_t campaign_id, const std::map<std::string, int64_t>& by_reason) {
  WEFT_ASSIGN_OR_RETURN(Transaction tx, db.begin());
  WEFT_ASSIGN_OR_RETURN(Statement st, db.prepare(
      "INSERT INTO rejections(campaign_id, reason, count) VALUES(?1, ?2, ?3) "
      "ON CONFLICT(campaign_id, reason) DO UPDATE SET count = count + excluded.count"));
  for (const auto& [reason, n] : by_reason) {
    if (n == 0) continue;
    WEFT_RETURN_IF_ERROR(st.bind_all(campaign_id, reason, n));
    WEFT_RETURN_IF_ERROR(st.step_done());
  }
  return tx.commit();
}

Result<std::map<std::string, int64_t>> load_rejections(Database& db, int64_t campaign_id) {
  WEFT_ASSIGN_OR_RETURN(Statement st, db.prepare("SELECT reason, count FROM rejections WHERE campaign_id = ?"));
  WEFT_RETURN_IF_ERROR(st.bind(1, campaign_id));
  std::map<std::string, int64_t> out;
  for (;;) {
    WEFT_ASSIGN_OR_RETURN(bool row, st.step());
    if (!row) return out;
    out[st.column_text(0)] = st.column_int(1);
  }
}

Status add_anomalies(Database& db, int64_t campaign_id, const std::vector<Anomaly>& anomalies) {
  WEFT_ASSIGN_OR_RETURN(Transaction tx, db.begin());
  WEFT_ASSIGN_OR_RETURN(Statement st, db.prepare("INSERT INTO anomalies(campaign_id, kind, detail) VALUES(?, ?, ?)"));
  for (const auto& a : anomalies) {
    WEFT_RETURN_IF_ERROR(st.bind_all(campaign_id, a.kind, a.detail));
    WEFT_RETURN_IF_ERROR(st.step_done().with_context("anomaly '" + a.kind + "'"));
  }
  return tx.commit();
}

Result<std::vector<Anomaly>> load_anomalies(Database& db, int64_t campaign_id) {
  WEFT_ASSIGN_OR_RETURN(Statement st, db.prepare("SELECT kind, detail FROM anomalies WHERE campaign_id = ? ORDER BY id"));
  WEFT_RETURN_IF_ERROR(st.bind(1, campaign_id));
  std::vector<Anomaly> out;
  for (;;) {
    WEFT_ASSIGN_OR_RETURN(bool row, st.step());
    if (!row) return out;
    out.push_back({st.column_text(0), st.column_text(1)});
  }
}

}  // namespace weft::db
