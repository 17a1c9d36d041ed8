// weft's SQLite database: one file (fabric.db) that holds probe campaigns, their
// observations and the inferred fabric. This header is the thin RAII layer over
// the sqlite3 C API; typed stores live in stores.h.
//
//   WEFT_ASSIGN_OR_RETURN(auto db, weft::db::Database::open("fabric.db"));
//   WEFT_ASSIGN_OR_RETURN(auto tx, db.begin());      // BEGIN IMMEDIATE
//   WEFT_ASSIGN_OR_RETURN(auto st, db.prepare("INSERT INTO hosts(name, ip) VALUES(?, ?)"));
//   WEFT_RETURN_IF_ERROR(st.bind_all("h1-1", "10.0.1.1"));
//   WEFT_RETURN_IF_ERROR(st.step_done());
//   WEFT_RETURN_IF_ERROR(tx.commit());                // rolled back if never committed
//
// open() sets WAL journalling (readers never block the campaign writer, and a
// killed writer leaves a consistent file: https://sqlite.org/wal.html),
// foreign_keys=ON (off by default in SQLite, per connection), a busy timeout,
// and applies every pending migration (migrations.cc; PRAGMA user_version is the
// schema version).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "weft/common/status.h"

struct sqlite3;
struct sqlite3_stmt;

namespace weft::db {

class Database;

// A prepared statement; reset and rebound for each row of a batch.
class Statement {
 public:
  Statement() = default;
  Statement(Statement&& o) noexcept : db_(o.db_), st_(o.st_) { o.st_ = nullptr; }
  Statement& operator=(Statement&& o) noexcept;
  ~Statement();

  Status bind(int index, int64_t v);
  Status bind(int index, double v);
  Status bind(int index, std::string_view v);
  Status bind(int index, std::nullopt_t);
  template <typename T>
  Status bind(int index, const std::optional<T>& v) {
    return v ? bind(index, *v) : bind(index, std::nullopt);
  }
  Status bind(int index, int v) { return bind(index, static_cast<int64_t>(v)); }
  Status bind(int index, const char* v) { return bind(index, std::string_view(v)); }
  Status bind(int index, const std::string& v) { return bind(index, std::string_view(v)); }
  template <typename... Args>
  Status bind_all(const Args&... args) {
    int i = 0;
    Status st;
    ((st.is_ok() ? (st = bind(++i, args), 0) : 0), ...);
    return st;
  }

  // One step: true = a row is ready, false = done.
  Result<bool> step();
  // Steps a statement that returns no row (INSERT, UPDATE), then resets it.
  Status step_done();
  void reset();

  int64_t column_int(int col) const;
  double column_double(int col) const;
  std::string column_text(int col) const;
  bool column_is_null(int col) const;

 private:
  friend class Database;
  Statement(sqlite3* db, sqlite3_stmt* st) : db_(db), st_(st) {}
  sqlite3* db_ = nullptr;
  sqlite3_stmt* st_ = nullptr;
};

// A write transaction (BEGIN IMMEDIATE: takes the write lock up front, so a
// batch never fails half-way on SQLITE_BUSY). Rolls back unless committed.
class Transaction {
 public:
  Transaction(Transaction&& o) noexcept : db_(o.db_) { o.db_ = nullptr; }
  Transaction& operator=(Transaction&&) = delete;
  ~Transaction();
  Status commit();

 private:
  friend class Database;
  explicit Transaction(Database* db) : db_(db) {}
  Database* db_;
};

struct OpenOptions {
  bool read_only = false;
  int busy_timeout_ms = 5000;
  // Apply pending migrations (refused for a read-only open of an old file).
  bool migrate = true;
};

class Database {
 public:
  static Result<Database> open(const std::string& path, const OpenOptions& opt = {});
  Database(Database&& o) noexcept : db_(o.db_), path_(std::move(o.path_)) { o.db_ = nullptr; }
  Database& operator=(Database&& o) noexcept;
  ~Database();

  Status exec(std::string_view sql);
  Result<Statement> prepare(std::string_view sql);
  Result<Transaction> begin();
  // The first column of the first row of `sql` as an integer (COUNT(*) etc.).
  Result<int64_t> query_int(std::string_view sql);
  int64_t last_insert_rowid() const;
  // PRAGMA user_version; an error for a file that is not an SQLite database.
  Result<int> schema_version() const;
  const std::string& path() const { return path_; }
  sqlite3* handle() const { return db_; }

 private:
  Database(sqlite3* db, std::string path) : db_(db), path_(std::move(path)) {}
  Status migrate();
  sqlite3* db_ = nullptr;
  std::string path_;
};

// The schema version this build writes (the number of migrations).
int latest_schema_version();

}  // namespace weft::db
