// weft::db: schema, migrations, pragmas, batched writes and the typed stores.
#include <gtest/gtest.h>
#include <sqlite3.h>
#include <unistd.h>

#include <cstdio>
#include <chrono>
#include <filesystem>
#include <optional>
#include <set>
#include <thread>

#include <fmt/format.h>

#include "weft/common/file_util.h"
#include "weft/db/stores.h"
#include "weft/db/watch_store.h"
#include "../scratch_name.h"

namespace weft::db {
namespace internal {
struct Migration {
  int version;
  const char* what;
  const char* sql;
};
const Migration* migrations(size_t* count);
}  // namespace internal

namespace {

namespace fs = std::filesystem;

class DbTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / weft::test::scratch_name("weft-db");
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string path() const { return (dir_ / "fabric.db").string(); }

  // A db with hosts h0..h{n-1} and one campaign; returns host ids.
  std::vector<int64_t> seed(Database& db, int n, int64_t* campaign) {
    std::vector<int64_t> ids;
    for (int i = 0; i < n; ++i) ids.push_back(*upsert_host(db, {0, fmt::format("h{}", i), fmt::format("10.0.0.{}", i + 1), ""}));
    *campaign = *create_campaign(db, CampaignSpec{});
    return ids;
  }
  fs::path dir_;
};

Observation obs(int64_t src, int64_t dst, int sport, int spine) {
  Observation o;
  o.src_id = src;
  o.dst_id = dst;
  o.sport = sport;
  o.dport = 4791;
  o.spine = spine;
  o.dscp_seen = 8 + spine;
  o.rtt_us = 50 + sport % 7;
  o.sent = 1;
  o.answered = 1;
  o.observed_us = 1700000000000000 + sport;
  return o;
}

TEST_F(DbTest, OpenCreatesLatestSchemaWithWalAndForeignKeys) {
  auto db = Database::open(path());
  ASSERT_TRUE(db) << db.status().to_string();
  EXPECT_EQ(db->schema_version().value(), 3);
  EXPECT_EQ(latest_schema_version(), 3);
  auto mode = db->prepare("PRAGMA journal_mode");
  ASSERT_TRUE(mode);
  ASSERT_TRUE(*mode->step());
  EXPECT_EQ(mode->column_text(0), "wal");
  EXPECT_EQ(*db->query_int("PRAGMA foreign_keys"), 1);
  EXPECT_EQ(*db->query_int("SELECT COUNT(*) FROM sqlite_master WHERE type = 'table'"), 9);
}

TEST_F(DbTest, MigratesAVersion1FileAndKeepsItsRows) {
  {
    sqlite3* raw = nullptr;
    ASSERT_EQ(sqlite3_open(path().c_str(), &raw), SQLITE_OK);
    size_t n = 0;
    const auto* m = internal::migrations(&n);
    ASSERT_EQ(n, 3u);
    ASSERT_EQ(sqlite3_exec(raw, m[0].sql, nullptr, nullptr, nullptr), SQLITE_OK);
    ASSERT_EQ(sqlite3_exec(raw,
                           "PRAGMA user_version = 1;"
                           "INSERT INTO hosts(name, ip) VALUES('a', '10.0.0.1'), ('b', '10.0.0.2');"
                           "INSERT INTO campaigns(fingerprint, method, backend, protocol, dport, sport_first, "
                           "sport_count, probes_per_port, state, started_us, config) "
                           "VALUES('f', 'dscp', 'udp', 17, 4791, 1000, 3, 1, 'done', 5, '{}');"
                           "INSERT INTO observations(campaign_id, src_id, dst_id, protocol, sport, dport, spine, "
                           "sent, answered, observed_us) VALUES(1, 1, 2, 17, 1000, 4791, 3, 1, 1, 7);",
                           nullptr, nullptr, nullptr),
              SQLITE_OK);
    sqlite3_close(raw);
  }
  auto db = Database::open(path());
  ASSERT_TRUE(db) << db.status().to_string();
  EXPECT_EQ(db->schema_version().value(), 3);
  auto st = db->prepare("SELECT src, dst, proto, sport, spine FROM paths");
  ASSERT_TRUE(st);
  ASSERT_TRUE(*st->step());
  EXPECT_EQ(st->column_text(0), "a");
  EXPECT_EQ(st->column_text(1), "b");
  EXPECT_EQ(st->column_text(2), "udp");
  EXPECT_EQ(st->column_int(3), 1000);
  EXPECT_EQ(st->column_int(4), 3);
}

TEST_F(DbTest, RefusesAFileFromANewerWeft) {
  { ASSERT_TRUE(Database::open(path())->exec("PRAGMA user_version = 99").is_ok()); }
  auto db = Database::open(path());
  ASSERT_FALSE(db);
  EXPECT_EQ(db.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(db.status().message().find("schema version 99 is newer than this weft (3)"), std::string::npos)
      << db.status().message();
}

// Two processes opening a file an older weft wrote (weft watch and weft
// probe started together): the one that waited for the write lock finds the
// migration done and does not run it again.
TEST_F(DbTest, AMigrationAnotherConnectionRanWhileThisOneWaitedIsNotRunAgain) {
  size_t n = 0;
  const auto* m = internal::migrations(&n);
  sqlite3* raw = nullptr;
  ASSERT_EQ(sqlite3_open(path().c_str(), &raw), SQLITE_OK);
  const auto run = [raw](const std::string& sql) { return sqlite3_exec(raw, sql.c_str(), nullptr, nullptr, nullptr); };
  ASSERT_EQ(run("PRAGMA journal_mode = WAL"), SQLITE_OK);
  ASSERT_EQ(run(m[0].sql), SQLITE_OK);
  ASSERT_EQ(run("PRAGMA user_version = 1"), SQLITE_OK);
  ASSERT_EQ(run("BEGIN IMMEDIATE"), SQLITE_OK);
  std::optional<Result<Database>> opened;
  std::thread opener([&] { opened.emplace(Database::open(path())); });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // it read version 1 and waits for the lock
  for (size_t i = 1; i < n; ++i) ASSERT_EQ(run(m[i].sql), SQLITE_OK) << m[i].what;
  ASSERT_EQ(run(fmt::format("PRAGMA user_version = {}", n)), SQLITE_OK);
  ASSERT_EQ(run("COMMIT"), SQLITE_OK);
  opener.join();
  sqlite3_close(raw);
  ASSERT_TRUE(*opened) << opened->status().to_string();
  EXPECT_EQ((*opened)->schema_version().value(), static_cast<int>(n));
}

TEST_F(DbTest, ReadOnlyOpenOfAnUnmigratedFileIsRefused) {
  { ASSERT_TRUE(Database::open(path())->exec("PRAGMA user_version = 1").is_ok()); }
  OpenOptions ro;
  ro.read_only = true;
  auto db = Database::open(path(), ro);
  ASSERT_FALSE(db);
  EXPECT_NE(db.status().message().find("needs migrating to 3"), std::string::npos) << db.status().message();
}

TEST_F(DbTest, AFileThatIsNotADatabaseIsNamedAsSuch) {
  ASSERT_TRUE(weft::write_file_atomic(path(), std::string(4096, 'x')).is_ok());
  for (bool read_only : {true, false}) {
    OpenOptions opt;
    opt.read_only = read_only;
    auto db = Database::open(path(), opt);
    ASSERT_FALSE(db);
    EXPECT_NE(db.status().message().find(path() + ": "), std::string::npos) << db.status().message();
    EXPECT_NE(db.status().message().find("file is not a database"), std::string::npos) << db.status().message();
    EXPECT_EQ(db.status().message().find("schema version"), std::string::npos) << db.status().message();
  }
}

// A COMMIT refused by a deferred constraint leaves SQLite's transaction open;
// commit() rolls it back, so the next transaction begins and the refused row
// is gone.
TEST_F(DbTest, ACommitThatFailsRollsBackAndTheNextTransactionBegins) {
  auto db = Database::open(path());
  ASSERT_TRUE(db);
  ASSERT_TRUE(db->exec("CREATE TABLE parent(id INTEGER PRIMARY KEY);"
                       "CREATE TABLE child(pid INTEGER REFERENCES parent(id) DEFERRABLE INITIALLY DEFERRED)")
                  .is_ok());
  {
    auto tx = db->begin();
    ASSERT_TRUE(tx);
    ASSERT_TRUE(db->exec("INSERT INTO child VALUES (5)").is_ok());
    const Status st = tx->commit();
    EXPECT_FALSE(st.is_ok());
    EXPECT_NE(st.message().find("FOREIGN KEY constraint failed"), std::string::npos) << st.message();
    EXPECT_NE(st.message().find("rolled back"), std::string::npos) << st.message();
  }
  auto next = db->begin();
  ASSERT_TRUE(next) << next.status().message();
  ASSERT_TRUE(db->exec("INSERT INTO parent VALUES (5); INSERT INTO child VALUES (5)").is_ok());
  ASSERT_TRUE(next->commit().is_ok());
  auto rows = db->query_int("SELECT COUNT(*) FROM child");
  ASSERT_TRUE(rows);
  EXPECT_EQ(*rows, 1);
}

class BatchTest : public DbTest, public ::testing::WithParamInterface<int> {};

// Resume semantics: a second batch overlapping the first adds only new 5-tuples.
TEST_P(BatchTest, SecondOverlappingBatchAddsOnlyNewRows) {
  const int n = GetParam();
  auto db = Database::open(path());
  ASSERT_TRUE(db);
  int64_t c = 0;
  auto h = seed(*db, 3, &c);
  std::vector<Observation> first, second;
  for (int p = 0; p < n; ++p) first.push_back(obs(h[0], h[1], 1 + p, 1 + p % 5));
  for (int p = n / 2; p < n + 13; ++p) second.push_back(obs(h[0], h[1], 1 + p, 1 + p % 5));
  ObservationWriter w(*db);
  EXPECT_EQ(*w.write_batch(c, first), static_cast<size_t>(n));
  EXPECT_EQ(*w.write_batch(c, second), static_cast<size_t>(n - n / 2 + 13 - (n - n / 2)));
  EXPECT_EQ(*db->query_int("SELECT COUNT(*) FROM observations"), n + 13);
  auto back = load_observations(*db, c);
  ASSERT_TRUE(back);
  ASSERT_EQ(back->size(), static_cast<size_t>(n + 13));
  for (int p = 0; p < n; ++p) EXPECT_EQ((*back)[static_cast<size_t>(p)], first[static_cast<size_t>(p)]);
  std::set<int> sports;
  auto streamed = for_each_recorded(*db, c, 17, 4791, [&](int64_t src, int64_t dst, int sport) {
    EXPECT_EQ(src, h[0]);
    EXPECT_EQ(dst, h[1]);
    sports.insert(sport);
  });
  ASSERT_TRUE(streamed) << streamed.status().to_string();
  EXPECT_EQ(*streamed, n + 13);
  EXPECT_EQ(sports.size(), static_cast<size_t>(n + 13));
  EXPECT_EQ(*sports.begin(), 1);
  EXPECT_EQ(*sports.rbegin(), n + 13);
  EXPECT_EQ(*for_each_recorded(*db, c, 6, 4791, [](int64_t, int64_t, int) { ADD_FAILURE(); }), 0);
  EXPECT_EQ(*for_each_recorded(*db, c, 17, 4792, [](int64_t, int64_t, int) { ADD_FAILURE(); }), 0);
}
INSTANTIATE_TEST_SUITE_P(Sizes, BatchTest, ::testing::Values(1, 7, 4099));

TEST_F(DbTest, ForeignKeyRejectsObservationOfUnknownHostAndBatchRollsBack) {
  auto db = Database::open(path());
  int64_t c = 0;
  auto h = seed(*db, 2, &c);
  std::vector<Observation> rows = {obs(h[0], h[1], 5, 1), obs(h[0], 777, 6, 1)};
  ObservationWriter w(*db);
  auto r = w.write_batch(c, rows);
  ASSERT_FALSE(r);
  EXPECT_NE(r.status().message().find("FOREIGN KEY"), std::string::npos) << r.status().message();
  EXPECT_EQ(*db->query_int("SELECT COUNT(*) FROM observations"), 0) << "a failed batch must leave no row";
}

TEST_F(DbTest, CheckConstraintsRejectImpossibleValues) {
  auto db = Database::open(path());
  int64_t c = 0;
  auto h = seed(*db, 2, &c);
  ObservationWriter w(*db);
  Observation bad_dscp = obs(h[0], h[1], 5, 1);
  bad_dscp.dscp_seen = 64;
  EXPECT_FALSE(w.write_batch(c, std::vector<Observation>{bad_dscp}));
  Observation bad_answers = obs(h[0], h[1], 5, 1);
  bad_answers.answered = 2;
  EXPECT_FALSE(w.write_batch(c, std::vector<Observation>{bad_answers}));
  EXPECT_EQ(*db->query_int("SELECT COUNT(*) FROM observations"), 0);
}

TEST_F(DbTest, CampaignLifecycleAndResumeLookup) {
  auto db = Database::open(path());
  CampaignSpec s;
  s.sport_count = 13;
  s.config_json = R"({"hosts":["a","b"]})";
  const int64_t c = *create_campaign(*db, s);
  EXPECT_EQ(**find_running_campaign(*db, s.fingerprint()), c);
  EXPECT_FALSE(latest_done_campaign(*db)->has_value());
  ASSERT_TRUE(finish_campaign(*db, c, "done").is_ok());
  EXPECT_FALSE(find_running_campaign(*db, s.fingerprint())->has_value());
  EXPECT_EQ(**latest_done_campaign(*db, 17), c);
  EXPECT_FALSE(latest_done_campaign(*db, 6)->has_value());
  auto row = get_campaign(*db, c);
  ASSERT_TRUE(row);
  EXPECT_EQ(row->state, "done");
  EXPECT_EQ(row->spec.sport_count, 13);
  EXPECT_EQ(row->fingerprint, s.fingerprint());
  EXPECT_TRUE(row->finished_us.has_value());
  EXPECT_FALSE(finish_campaign(*db, c, "finished").is_ok());
  EXPECT_EQ(get_campaign(*db, 99).status().code(), StatusCode::kNotFound);
}

TEST(CampaignSpecTest, FingerprintIsStableAndNamesTheSpec) {
  CampaignSpec a;  // FNV-1a 64 of "{}" = 9bf65e00c699fdaf (computed independently)
  EXPECT_EQ(a.fingerprint(), "dscp/udp/p17/d4791/s49152+64/n1/x8/t0/9bf65e00c699fdaf");
  CampaignSpec b = a;
  b.config_json = R"({"hosts":["x"]})";
  EXPECT_NE(a.fingerprint(), b.fingerprint());
}

TEST_F(DbTest, InferenceRoundTripsAndIsReplaced) {
  auto db = Database::open(path());
  int64_t c = 0;
  auto h = seed(*db, 5, &c);
  InferredFabric f;
  f.host_leaf = {{h[0], 1}, {h[1], 1}, {h[2], 2}, {h[3], 3}, {h[4], 3}};
  f.spines = {{1, "10.254.0.1"}, {2, ""}, {3, "10.254.0.3"}};
  for (int s = 1; s <= 3; ++s)
    for (int l = 1; l <= 3; ++l) f.links.push_back({s, l, s * 10 + l, s == 2 && l == 3});
  ASSERT_TRUE(save_inference(*db, c, f).is_ok());
  auto back = load_inference(*db, c);
  ASSERT_TRUE(back) << back.status().to_string();
  EXPECT_EQ(back->host_leaf, f.host_leaf);
  ASSERT_EQ(back->spines.size(), 3u);
  EXPECT_EQ(back->spines[0].address, "10.254.0.1");
  EXPECT_EQ(back->spines[1].address, "");
  ASSERT_EQ(back->links.size(), 9u);
  EXPECT_TRUE(back->links[5].dead);  // spine 2 - leaf 3
  EXPECT_EQ(back->links[5].flows, 23);
  f.links.resize(2);
  ASSERT_TRUE(save_inference(*db, c, f).is_ok());
  EXPECT_EQ(load_inference(*db, c)->links.size(), 2u);
  EXPECT_EQ(*db->query_int("SELECT COUNT(*) FROM switches"), 6);
}

// A host is its name: an address another host held moves to the host
// listed with it now (readdressed, swapped, reused), in a transaction of
// the caller's or alone, and the other row keeps its id with no address.
TEST_F(DbTest, AnAddressAnotherHostHeldMovesToTheHostListedWithItNow) {
  auto db = Database::open(path());
  ASSERT_TRUE(db) << db.status().to_string();
  int64_t campaign = 0;
  const auto ids = seed(*db, 2, &campaign);  // h0 10.0.0.1, h1 10.0.0.2
  const auto hosts = [&] {
    std::vector<std::string> out;
    auto rows = list_hosts(*db);
    if (!rows) return std::vector<std::string>{rows.status().to_string()};
    for (const auto& h : *rows) out.push_back(fmt::format("{} {} {}", h.id, h.name, h.ip));
    return out;
  };
  auto swapped = upsert_host(*db, {0, "h0", "10.0.0.2", ""});
  ASSERT_TRUE(swapped) << swapped.status().to_string();
  EXPECT_EQ(*swapped, ids[0]);
  EXPECT_EQ(hosts(), (std::vector<std::string>{"1 h0 10.0.0.2", "2 h1 moved:10.0.0.2#2"}));
  {
    auto tx = db->begin();
    ASSERT_TRUE(tx);
    auto back = upsert_host(*db, {0, "h1", "10.0.0.1", ""});
    ASSERT_TRUE(back) << back.status().to_string();
    EXPECT_EQ(*back, ids[1]);
    ASSERT_TRUE(tx->commit().is_ok());
  }
  EXPECT_EQ(hosts(), (std::vector<std::string>{"1 h0 10.0.0.2", "2 h1 10.0.0.1"}));
  auto reused = upsert_host(*db, {0, "h2", "10.0.0.1", ""});
  ASSERT_TRUE(reused) << reused.status().to_string();
  EXPECT_EQ(*reused, 3);
  EXPECT_EQ(hosts(), (std::vector<std::string>{"1 h0 10.0.0.2", "2 h1 moved:10.0.0.1#2", "3 h2 10.0.0.1"}));
}

TEST_F(DbTest, RejectionsAccumulateByReason) {
  auto db = Database::open(path());
  int64_t c = 0;
  seed(*db, 1, &c);
  ASSERT_TRUE(add_rejections(*db, c, {{"bad_mac", 3}, {"truncated", 5}, {"stale", 0}}).is_ok());
  ASSERT_TRUE(add_rejections(*db, c, {{"bad_mac", 4}}).is_ok());
  auto r = load_rejections(*db, c);
  ASSERT_TRUE(r);
  EXPECT_EQ(*r, (std::map<std::string, int64_t>{{"bad_mac", 7}, {"truncated", 5}}));
}

TEST_F(DbTest, UncommittedTransactionRollsBack) {
  auto db = Database::open(path());
  {
    auto tx = db->begin();
    ASSERT_TRUE(tx);
    ASSERT_TRUE(upsert_host(*db, {0, "gone", "10.9.9.9", ""}));
  }
  EXPECT_EQ(*db->query_int("SELECT COUNT(*) FROM hosts"), 0);
}

TEST_F(DbTest, PlainSqlite3CliReadsTheFile) {
  if (::access("/usr/bin/sqlite3", X_OK) != 0) GTEST_SKIP() << "sqlite3 CLI not installed (apt-get install sqlite3)";
  {
    auto db = Database::open(path());
    int64_t c = 0;
    auto h = seed(*db, 2, &c);
    std::vector<Observation> rows;
    for (int p = 0; p < 7; ++p) rows.push_back(obs(h[0], h[1], 100 + p, 1 + p % 3));
    ASSERT_TRUE(ObservationWriter(*db).write_batch(c, rows));
  }
  const std::string cmd = "sqlite3 " + path() + " \"SELECT spine, COUNT(*) FROM paths GROUP BY spine\"";
  FILE* p = ::popen(cmd.c_str(), "r");
  ASSERT_NE(p, nullptr);
  char buf[256] = {};
  std::string out;
  while (size_t n = fread(buf, 1, sizeof buf, p)) out.append(buf, n);
  EXPECT_EQ(::pclose(p), 0);
  EXPECT_EQ(out, "1|3\n2|2\n3|2\n");
}

}  // namespace
}  // namespace weft::db

namespace weft::db {
namespace {

TEST_F(DbTest, ALinkEventKeepsItsTimesAndIsRestoredOnce) {
  auto db = Database::open(path());
  ASSERT_TRUE(db) << db.status().to_string();
  LinkEventRow r;
  r.link = "s2->l3";
  r.first_loss_us = 1700000000123456;
  r.localised_us = 1700000000456789;
  r.tuples = 61;
  r.failing = 7;
  auto id = add_link_down(*db, r);
  ASSERT_TRUE(id) << id.status().to_string();
  ASSERT_TRUE(set_link_restored(*db, *id, 1700000010000001).is_ok());
  auto rows = load_link_events(*db);
  ASSERT_TRUE(rows);
  ASSERT_EQ(rows->size(), 1u);
  const LinkEventRow& got = rows->front();
  EXPECT_EQ(got.link, "s2->l3");
  EXPECT_EQ(got.first_loss_us, 1700000000123456);
  EXPECT_EQ(got.localised_us, 1700000000456789);
  EXPECT_FALSE(got.published_us);
  EXPECT_EQ(got.restored_us, 1700000010000001);
  EXPECT_EQ(got.tuples, 61);
  EXPECT_EQ(got.failing, 7);
}

TEST_F(DbTest, ALinkLocalisedBeforeItsFirstLossIsRefused) {
  auto db = Database::open(path());
  ASSERT_TRUE(db);
  LinkEventRow r;
  r.link = "l1->s4";
  r.first_loss_us = 20;
  r.localised_us = 19;
  EXPECT_FALSE(add_link_down(*db, r));
}

}  // namespace
}  // namespace weft::db
