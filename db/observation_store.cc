// Observations and the inferred fabric (stores.h).
#include <fmt/format.h>

#include "weft/db/stores.h"

namespace weft::db {

Result<size_t> ObservationWriter::write_batch(int64_t campaign_id, std::span<const Observation> rows) {
  if (rows.empty()) return size_t{0};
  if (!insert_) {
    WEFT_ASSIGN_OR_RETURN(Statement st, db_.prepare(
        "INSERT INTO observations(campaign_id, src_id, dst_id, protocol, sport, dport, spine, hop_addr, dscp_seen, "
        "rtt_us, sent, answered, unstable, other_spine, observed_us) "
        "VALUES(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
        "ON CONFLICT(campaign_id, src_id, dst_id, protocol, sport, dport) DO NOTHING"));
    insert_ = std::move(st);
  }
  WEFT_ASSIGN_OR_RETURN(Transaction tx, db_.begin());
  size_t added = 0;
  const int64_t before = db_.query_int("SELECT total_changes()").value();
  for (const Observation& o : rows) {
    WEFT_RETURN_IF_ERROR(insert_->bind_all(campaign_id, o.src_id, o.dst_id, o.protocol, o.sport, o.dport, o.spine,
                                           o.hop_addr, o.dscp_seen, o.rtt_us, o.sent, o.answered,
                                           o.unstable ? 1 : 0, o.other_spine, o.observed_us));
    WEFT_RETURN_IF_ERROR(insert_->step_done().with_context(
        fmt::format("observation {}->{} sport {}", o.src_id, o.dst_id, o.sport)));
  }
  added = static_cast<size_t>(db_.query_int("SELECT total_changes()").value() - before);
  WEFT_RETURN_IF_ERROR(tx.commit());
  return added;
}

Result<std::vector<Observation>> load_observations(Database& db, int64_t campaign_id) {
  WEFT_ASSIGN_OR_RETURN(Statement st, db.prepare(
      "SELECT src_id, dst_id, protocol, sport, dport, spine, hop_addr, dscp_seen, rtt_us, sent, answered, unstable, "
      "other_spine, observed_us FROM observations WHERE campaign_id = ? ORDER BY src_id, dst_id, sport"));
  WEFT_RETURN_IF_ERROR(st.bind(1, campaign_id));
  std::vector<Observation> out;
  auto opt_int = [&](int c) { return st.column_is_null(c) ? std::nullopt : std::optional<int>(static_cast<int>(st.column_int(c))); };
  for (;;) {
    WEFT_ASSIGN_OR_RETURN(bool row, st.step());
    if (!row) return out;
    Observation o;
    o.src_id = st.column_int(0);
    o.dst_id = st.column_int(1);
    o.protocol = static_cast<int>(st.column_int(2));
    o.sport = static_cast<int>(st.column_int(3));
    o.dport = static_cast<int>(st.column_int(4));
    o.spine = opt_int(5);
    if (!st.column_is_null(6)) o.hop_addr = st.column_text(6);
    o.dscp_seen = opt_int(7);
    if (!st.column_is_null(8)) o.rtt_us = st.column_int(8);
    o.sent = static_cast<int>(st.column_int(9));
    o.answered = static_cast<int>(st.column_int(10));
    o.unstable = st.column_int(11) != 0;
    o.other_spine = opt_int(12);
    o.observed_us = st.column_int(13);
    out.push_back(std::move(o));
  }
}

Result<int64_t> for_each_recorded(Database& db, int64_t campaign_id, int protocol, int dport,
                                  const std::function<void(int64_t, int64_t, int)>& f) {
  WEFT_ASSIGN_OR_RETURN(Statement st, db.prepare("SELECT src_id, dst_id, sport FROM observations "
                                                 "WHERE campaign_id = ? AND protocol = ? AND dport = ?"));
  WEFT_RETURN_IF_ERROR(st.bind_all(campaign_id, protocol, dport));
  int64_t n = 0;
  for (;; ++n) {
    WEFT_ASSIGN_OR_RETURN(bool row, st.step());
    if (!row) return n;
    f(st.column_int(0), st.column_int(1), static_cast<int>(st.column_int(2)));
  }
}

Status save_inference(Database& db, int64_t campaign_id, const InferredFabric& f) {
  WEFT_ASSIGN_OR_RETURN(Transaction tx, db.begin());
  {
    WEFT_ASSIGN_OR_RETURN(Statement del, db.prepare("DELETE FROM switches WHERE campaign_id = ?"));
    WEFT_RETURN_IF_ERROR(del.bind(1, campaign_id));
    WEFT_RETURN_IF_ERROR(del.step_done());  // cascades to host_leaf and links
  }
  WEFT_ASSIGN_OR_RETURN(Statement sw, db.prepare(
      "INSERT INTO switches(campaign_id, tier, number, address) VALUES(?, ?, ?, NULLIF(?, '')) RETURNING id"));
  std::map<int, int64_t> spine_id, leaf_id;
  auto add_switch = [&](const char* tier, int number, const std::string& addr) -> Result<int64_t> {
    WEFT_RETURN_IF_ERROR(sw.bind_all(campaign_id, tier, number, addr));
    WEFT_ASSIGN_OR_RETURN(bool row, sw.step());
    if (!row) return internal_error("switch insert returned no id");
    const int64_t id = sw.column_int(0);
    sw.reset();
    return id;
  };
  for (const auto& s : f.spines) {
    WEFT_ASSIGN_OR_RETURN(spine_id[s.number], add_switch("spine", s.number, s.address));
  }
  for (const auto& [host, leaf] : f.host_leaf) {
    if (!leaf_id.count(leaf)) {
      WEFT_ASSIGN_OR_RETURN(leaf_id[leaf], add_switch("leaf", leaf, ""));
    }
  }
  WEFT_ASSIGN_OR_RETURN(Statement hl, db.prepare("INSERT INTO host_leaf(campaign_id, host_id, leaf_id) VALUES(?, ?, ?)"));
  for (const auto& [host, leaf] : f.host_leaf) {
    WEFT_RETURN_IF_ERROR(hl.bind_all(campaign_id, host, leaf_id[leaf]));
    WEFT_RETURN_IF_ERROR(hl.step_done().with_context(fmt::format("host {} on leaf {}", host, leaf)));
  }
  WEFT_ASSIGN_OR_RETURN(Statement ln, db.prepare(
      "INSERT INTO links(campaign_id, spine_id, leaf_id, flows, state) VALUES(?, ?, ?, ?, ?)"));
  for (const auto& l : f.links) {
    if (!spine_id.count(l.spine) || !leaf_id.count(l.leaf)) {
      return invalid_argument(fmt::format("link spine {} - leaf {} names an unknown switch", l.spine, l.leaf));
    }
    WEFT_RETURN_IF_ERROR(ln.bind_all(campaign_id, spine_id[l.spine], leaf_id[l.leaf], l.flows, l.dead ? "dead" : "up"));
    WEFT_RETURN_IF_ERROR(ln.step_done());
  }
  return tx.commit();
}

Result<InferredFabric> load_inference(Database& db, int64_t campaign_id) {
  InferredFabric f;
  WEFT_ASSIGN_OR_RETURN(Statement sp, db.prepare(
      "SELECT number, COALESCE(address, '') FROM switches WHERE campaign_id = ? AND tier = 'spine' ORDER BY number"));
  WEFT_RETURN_IF_ERROR(sp.bind(1, campaign_id));
  for (;;) {
    WEFT_ASSIGN_OR_RETURN(bool row, sp.step());
    if (!row) break;
    f.spines.push_back({static_cast<int>(sp.column_int(0)), sp.column_text(1)});
  }
  WEFT_ASSIGN_OR_RETURN(Statement hl, db.prepare(
      "SELECT h.host_id, s.number FROM host_leaf h JOIN switches s ON s.id = h.leaf_id WHERE h.campaign_id = ?"));
  WEFT_RETURN_IF_ERROR(hl.bind(1, campaign_id));
  for (;;) {
    WEFT_ASSIGN_OR_RETURN(bool row, hl.step());
    if (!row) break;
    f.host_leaf[hl.column_int(0)] = static_cast<int>(hl.column_int(1));
  }
  WEFT_ASSIGN_OR_RETURN(Statement ln, db.prepare(
      "SELECT s.number, l.number, k.flows, k.state FROM links k JOIN switches s ON s.id = k.spine_id "
      "JOIN switches l ON l.id = k.leaf_id WHERE k.campaign_id = ? ORDER BY s.number, l.number"));
  WEFT_RETURN_IF_ERROR(ln.bind(1, campaign_id));
  for (;;) {
    WEFT_ASSIGN_OR_RETURN(bool row, ln.step());
    if (!row) break;
    f.links.push_back({static_cast<int>(ln.column_int(0)), static_cast<int>(ln.column_int(1)), ln.column_int(2),
                       ln.column_text(3) == "dead"});
  }
  return f;
}

}  // namespace weft::db
