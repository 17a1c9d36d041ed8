// link_events (watch_store.h).
#include "weft/db/watch_store.h"

#include <fmt/format.h>

namespace weft::db {

Result<int64_t> add_link_down(Database& db, const LinkEventRow& row) {
  WEFT_ASSIGN_OR_RETURN(Statement st, db.prepare("INSERT INTO link_events(link, first_loss_us, localised_us, tuples, "
                                                 "failing) VALUES(?, ?, ?, ?, ?)"));
  WEFT_RETURN_IF_ERROR(st.bind_all(row.link, row.first_loss_us, row.localised_us, row.tuples, row.failing));
  WEFT_RETURN_IF_ERROR(st.step_done());
  return db.last_insert_rowid();
}

namespace {

Status set_time(Database& db, const char* column, int64_t id, int64_t us) {
  WEFT_ASSIGN_OR_RETURN(Statement st, db.prepare(fmt::format("UPDATE link_events SET {} = ? WHERE id = ?", column)));
  WEFT_RETURN_IF_ERROR(st.bind_all(us, id));
  return st.step_done();
}

}  // namespace

Status set_link_published(Database& db, int64_t id, int64_t us) { return set_time(db, "published_us", id, us); }
Status set_link_restored(Database& db, int64_t id, int64_t us) { return set_time(db, "restored_us", id, us); }

Result<std::vector<LinkEventRow>> load_link_events(Database& db) {
  WEFT_ASSIGN_OR_RETURN(Statement st, db.prepare("SELECT id, link, first_loss_us, localised_us, published_us, "
                                                 "restored_us, tuples, failing FROM link_events ORDER BY id"));
  std::vector<LinkEventRow> out;
  for (;;) {
    WEFT_ASSIGN_OR_RETURN(bool row, st.step());
    if (!row) return out;
    LinkEventRow r;
    r.id = st.column_int(0);
    r.link = st.column_text(1);
    r.first_loss_us = st.column_int(2);
    r.localised_us = st.column_int(3);
    if (!st.column_is_null(4)) r.published_us = st.column_int(4);
    if (!st.column_is_null(5)) r.restored_us = st.column_int(5);
    r.tuples = st.column_int(6);
    r.failing = st.column_int(7);
    out.push_back(std::move(r));
  }
}

}  // namespace weft::db
