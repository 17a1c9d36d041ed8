// RAII over the sqlite3 C API (https://sqlite.org/c3ref/intro.html). SQLite
// result codes are translated to Status here and nowhere else.
#include "weft/db/database.h"

#include <sqlite3.h>

#include <fmt/format.h>

#include "migrations.h"

namespace weft::db {

namespace {

Status sqlite_error(sqlite3* db, int rc, std::string_view what) {
  const char* msg = db ? sqlite3_errmsg(db) : sqlite3_errstr(rc);
  const int primary = rc & 0xff;
  const StatusCode code = primary == SQLITE_BUSY || primary == SQLITE_LOCKED ? StatusCode::kUnavailable
                          : primary == SQLITE_CORRUPT || primary == SQLITE_NOTADB ? StatusCode::kDataLoss
                          : primary == SQLITE_CONSTRAINT ? StatusCode::kFailedPrecondition
                          : primary == SQLITE_CANTOPEN || primary == SQLITE_IOERR ? StatusCode::kIo
                          : primary == SQLITE_READONLY ? StatusCode::kPermissionDenied
                                                       : StatusCode::kInternal;
  return Status(code, fmt::format("{}: {}", what, msg));
}

}  // namespace

Statement& Statement::operator=(Statement&& o) noexcept {
  if (this != &o) {
    if (st_) sqlite3_finalize(st_);
    db_ = o.db_;
    st_ = o.st_;
    o.st_ = nullptr;
  }
  return *this;
}

Statement::~Statement() {
  if (st_) sqlite3_finalize(st_);
}

Status Statement::bind(int index, int64_t v) {
  const int rc = sqlite3_bind_int64(st_, index, v);
  return rc == SQLITE_OK ? ok_status() : sqlite_error(db_, rc, "bind");
}
Status Statement::bind(int index, double v) {
  const int rc = sqlite3_bind_double(st_, index, v);
  return rc == SQLITE_OK ? ok_status() : sqlite_error(db_, rc, "bind");
}
Status Statement::bind(int index, std::string_view v) {
  const int rc = sqlite3_bind_text(st_, index, v.data(), static_cast<int>(v.size()), SQLITE_TRANSIENT);
  return rc == SQLITE_OK ? ok_status() : sqlite_error(db_, rc, "bind");
}
Status Statement::bind(int index, std::nullopt_t) {
  const int rc = sqlite3_bind_null(st_, index);
  return rc == SQLITE_OK ? ok_status() : sqlite_error(db_, rc, "bind");
}

Result<bool> Statement::step() {
  const int rc = sqlite3_step(st_);
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) return false;
  return sqlite_error(db_, rc, fmt::format("executing '{}'", std::string_view(sqlite3_sql(st_)).substr(0, 60)));
}

Status Statement::step_done() {
  auto r = step();
  sqlite3_reset(st_);
  sqlite3_clear_bindings(st_);
  return r.status();
}

void Statement::reset() {
  sqlite3_reset(st_);
  sqlite3_clear_bindings(st_);
}

int64_t Statement::column_int(int col) const { return sqlite3_column_int64(st_, col); }
double Statement::column_double(int col) const { return sqlite3_column_double(st_, col); }
bool Statement::column_is_null(int col) const { return sqlite3_column_type(st_, col) == SQLITE_NULL; }
std::string Statement::column_text(int col) const {
  const auto* p = sqlite3_column_text(st_, col);
  return p ? std::string(reinterpret_cast<const char*>(p), static_cast<size_t>(sqlite3_column_bytes(st_, col))) : "";
}

Transaction::~Transaction() {
  if (db_) (void)db_->exec("ROLLBACK");
}

// A COMMIT that fails may leave the transaction open (a deferred constraint,
// SQLITE_BUSY: https://sqlite.org/lang_transaction.html); it is rolled back so
// the connection can begin the next one.
Status Transaction::commit() {
  Database* db = db_;
  db_ = nullptr;
  if (!db) return failed_precondition("transaction already finished");
  Status st = db->exec("COMMIT");
  if (!st.is_ok() && sqlite3_get_autocommit(db->handle()) == 0) {
    (void)db->exec("ROLLBACK");
    return st.with_context("transaction rolled back");
  }
  return st;
}

Database& Database::operator=(Database&& o) noexcept {
  if (this != &o) {
    if (db_) sqlite3_close_v2(db_);
    db_ = o.db_;
    path_ = std::move(o.path_);
    o.db_ = nullptr;
  }
  return *this;
}

Database::~Database() {
  if (db_) sqlite3_close_v2(db_);
}

Result<Database> Database::open(const std::string& path, const OpenOptions& opt) {
  sqlite3* raw = nullptr;
  const int flags = (opt.read_only ? SQLITE_OPEN_READONLY : SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE) |
                    SQLITE_OPEN_NOMUTEX;
  const int rc = sqlite3_open_v2(path.c_str(), &raw, flags, nullptr);
  Database db(raw, path);  // owns raw even on failure
  if (rc != SQLITE_OK) return sqlite_error(raw, rc, "opening " + path);
  sqlite3_busy_timeout(raw, opt.busy_timeout_ms);
  sqlite3_extended_result_codes(raw, 1);
  WEFT_RETURN_IF_ERROR(db.exec("PRAGMA foreign_keys = ON").with_context(path));
  if (!opt.read_only) {
    // synchronous=NORMAL in WAL mode: a committed transaction survives a process
    // kill (only a power loss may drop the last commits), https://sqlite.org/pragma.html#pragma_synchronous
    // journal_mode answers the mode in force: a file system without shared
    // memory (some network mounts) keeps the rollback journal, where only FULL
    // keeps a power loss from corrupting the file.
    bool wal = false;
    {
      auto mode = db.prepare("PRAGMA journal_mode = WAL");
      if (!mode) return mode.status().with_context(path);
      auto row = mode->step();
      if (!row) return row.status().with_context(path);
      wal = *row && mode->column_text(0) == "wal";
    }
    WEFT_RETURN_IF_ERROR(db.exec(wal ? "PRAGMA synchronous = NORMAL" : "PRAGMA synchronous = FULL").with_context(path));
  }
  auto fk = db.query_int("PRAGMA foreign_keys");
  if (!fk || *fk != 1) return internal_error(path + ": SQLite refused foreign_keys=ON");
  // The first read of the file: one that is not SQLite fails here with
  // SQLite's "file is not a database".
  auto version = db.schema_version();
  if (!version) return version.status().with_context(path);
  const int have = *version;
  if (have > latest_schema_version()) {
    return failed_precondition(fmt::format("{}: schema version {} is newer than this weft ({}); upgrade weft", path,
                                           have, latest_schema_version()));
  }
  if (have < latest_schema_version()) {
    if (opt.read_only || !opt.migrate) {
      return failed_precondition(fmt::format("{}: schema version {} needs migrating to {}; open it read-write", path,
                                             have, latest_schema_version()));
    }
    WEFT_RETURN_IF_ERROR(db.migrate().with_context(path));
  }
  return db;
}

Status Database::exec(std::string_view sql) {
  char* err = nullptr;
  const std::string s(sql);
  const int rc = sqlite3_exec(db_, s.c_str(), nullptr, nullptr, &err);
  if (rc == SQLITE_OK) return ok_status();
  Status st = sqlite_error(db_, rc, fmt::format("'{}'", s.substr(0, 60)));
  sqlite3_free(err);
  return st;
}

Result<Statement> Database::prepare(std::string_view sql) {
  sqlite3_stmt* st = nullptr;
  const int rc = sqlite3_prepare_v2(db_, sql.data(), static_cast<int>(sql.size()), &st, nullptr);
  if (rc != SQLITE_OK) return sqlite_error(db_, rc, fmt::format("preparing '{}'", sql.substr(0, 60)));
  return Statement(db_, st);
}

Result<Transaction> Database::begin() {
  WEFT_RETURN_IF_ERROR(exec("BEGIN IMMEDIATE"));
  return Transaction(this);
}

Result<int64_t> Database::query_int(std::string_view sql) {
  WEFT_ASSIGN_OR_RETURN(Statement st, prepare(sql));
  WEFT_ASSIGN_OR_RETURN(bool row, st.step());
  if (!row) return not_found(fmt::format("no row from '{}'", sql.substr(0, 60)));
  return st.column_int(0);
}

int64_t Database::last_insert_rowid() const { return sqlite3_last_insert_rowid(db_); }

Result<int> Database::schema_version() const {
  WEFT_ASSIGN_OR_RETURN(const int64_t v, const_cast<Database*>(this)->query_int("PRAGMA user_version"));
  return static_cast<int>(v);
}

int latest_schema_version() {
  size_t n = 0;
  internal::migrations(&n);
  return static_cast<int>(n);
}

// Each migration runs in its own transaction together with the user_version
// bump, so a crash mid-migration leaves the previous version intact. The
// version is read again once the transaction holds the write lock: another
// process (weft watch and weft probe started together on a file an older
// weft wrote) may have migrated it while this one waited for the lock.
Status Database::migrate() {
  size_t n = 0;
  const internal::Migration* m = internal::migrations(&n);
  WEFT_ASSIGN_OR_RETURN(const int have, schema_version());
  if (have < 0) return failed_precondition(fmt::format("schema version {} is not one weft wrote", have));
  for (size_t i = static_cast<size_t>(have); i < n; ++i) {
    WEFT_ASSIGN_OR_RETURN(Transaction tx, begin());
    WEFT_ASSIGN_OR_RETURN(const int now, schema_version());
    if (now >= m[i].version) continue;  // done meanwhile; tx rolls back nothing
    WEFT_RETURN_IF_ERROR(exec(m[i].sql).with_context(fmt::format("migration {} ({})", m[i].version, m[i].what)));
    WEFT_RETURN_IF_ERROR(exec(fmt::format("PRAGMA user_version = {}", m[i].version)));
    WEFT_RETURN_IF_ERROR(tx.commit());
  }
  return ok_status();
}

}  // namespace weft::db
