// The measured path table over fabric.db: ports and routes of probed 5-tuples,
// mapped onto a topology file's hosts, leaves and spine ids.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include <fmt/format.h>

#include "weft/db/stores.h"
#include "weft/probe/db_path_table.h"
#include "weft/topology/builders.h"
#include "../scratch_name.h"

namespace weft::probe {
namespace {

namespace fs = std::filesystem;

class DbPathTableTest : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = (fs::temp_directory_path() / (weft::test::scratch_name("weft-dbpt") + ".db")).string();
    fs::remove(path_);
    topo::Clos2Spec spec;
    spec.spines = 3;
    spec.leaves = 2;
    spec.hosts_per_leaf = 2;
    fabric_ = *topo::build_clos2(spec);
    auto store = db::Database::open(path_);
    ASSERT_TRUE(store);
    for (const char* h : {"h1-1", "h1-2", "h2-1", "h2-2"}) {
      ids_[h] = *db::upsert_host(*store, {0, h, fmt::format("10.0.{}.{}", h[1] - '0', h[3] - '0'), ""});
    }
    db::CampaignSpec udp;
    const int64_t c1 = *db::create_campaign(*store, udp);
    std::vector<db::Observation> rows;
    // h1-1 -> h2-1: sport 100+p lands on spine (p % 3) + 1; 103 unanswered, 104 unstable.
    for (int p = 0; p < 7; ++p) {
      db::Observation o;
      o.src_id = ids_["h1-1"];
      o.dst_id = ids_["h2-1"];
      o.sport = 100 + p;
      o.dport = 4791;
      o.sent = 1;
      o.answered = p == 3 ? 0 : 1;
      if (p != 3) o.spine = p % 3 + 1;
      o.unstable = p == 4;
      rows.push_back(o);
    }
    db::Observation same;
    same.src_id = ids_["h1-1"];
    same.dst_id = ids_["h1-2"];
    same.sport = 100;
    same.dport = 4791;
    same.answered = 1;
    same.spine = 0;
    rows.push_back(same);
    ASSERT_TRUE(db::ObservationWriter(*store).write_batch(c1, rows));
    ASSERT_TRUE(db::finish_campaign(*store, c1, "done").is_ok());
    // A newer TCP campaign must not answer UDP questions.
    db::CampaignSpec tcp;
    tcp.protocol = 6;
    tcp.dport = 5201;
    const int64_t c2 = *db::create_campaign(*store, tcp);
    db::Observation t = rows[0];
    t.protocol = 6;
    t.dport = 5201;
    t.spine = 3;
    ASSERT_TRUE(db::ObservationWriter(*store).write_batch(c2, std::vector<db::Observation>{t}));
    ASSERT_TRUE(db::finish_campaign(*store, c2, "done").is_ok());
  }
  void TearDown() override {
    for (const char* ext : {"", "-wal", "-shm"}) fs::remove(path_ + ext);
  }
  int nic(const char* host) { return fabric_.hosts[static_cast<size_t>(*fabric_.find_host(host))].nics[0]; }
  int sw(const char* name) { return *fabric_.find_switch(name); }

  std::string path_;
  topo::Fabric fabric_;
  std::map<std::string, int64_t> ids_;
};

TEST_F(DbPathTableTest, OffersEveryAnsweredStablePortWithItsSpineRoute) {
  auto t = open_db_path_table(fabric_, path_);
  ASSERT_TRUE(t) << t.status().to_string();
  routing::PairRoutes out;
  routing::PairQuery q{nic("h1-1"), nic("h2-1"), routing::kProtoUdp, 4791};
  ASSERT_TRUE((*t)->ports(q, routing::PortRange{1, 65535}, 64, out).is_ok());
  ASSERT_EQ(out.ports.size(), 5u);  // 7 probed, one unanswered, one unstable
  const std::vector<int> want_sports = {100, 101, 102, 105, 106};
  const std::vector<int> want_spines = {1, 2, 3, 3, 1};
  for (size_t i = 0; i < out.ports.size(); ++i) {
    EXPECT_EQ(out.ports[i].sport, want_sports[i]);
    auto r = out.route(static_cast<size_t>(out.ports[i].route));
    ASSERT_EQ(r.size(), 3u);
    EXPECT_EQ(r[0], sw("l1"));
    EXPECT_EQ(r[1], sw(fmt::format("s{}", want_spines[i]).c_str()));
    EXPECT_EQ(r[2], sw("l2"));
  }
  EXPECT_EQ(out.num_routes(), 3u) << "one route per spine";
  ASSERT_TRUE((*t)->ports(q, routing::PortRange{101, 102}, 64, out).is_ok());
  EXPECT_EQ(out.ports.size(), 2u);
  ASSERT_TRUE((*t)->ports(q, routing::PortRange{1, 65535}, 2, out).is_ok());
  EXPECT_EQ(out.ports.size(), 2u) << "max_ports";
}

TEST(DbPathTableRail, MapsProbedHostNicNamesOntoTheNicsOfARailFabric) {
  const std::string path =
      (fs::temp_directory_path() / fmt::format("weft-dbpt-rail-{}.db", ::getpid())).string();
  fs::remove(path);
  auto f = topo::build_rail({.hosts = 2, .nics_per_host = 2, .leaves_per_rail = 1, .spines = 2});
  ASSERT_TRUE(f);
  {
    auto store = db::Database::open(path);
    ASSERT_TRUE(store);
    std::map<std::string, int64_t> id;
    int ip = 1;
    for (const char* h : {"h1:eth0", "h1:eth1", "h2:eth0", "h2:eth1"}) {
      id[h] = *db::upsert_host(*store, {0, h, fmt::format("10.0.9.{}", ip++), ""});
    }
    const int64_t c = *db::create_campaign(*store, db::CampaignSpec{});
    db::Observation o;  // h1's rail-0 NIC to h2's rail-1 NIC crosses spine 2
    o.src_id = id["h1:eth0"];
    o.dst_id = id["h2:eth1"];
    o.sport = 200;
    o.dport = 4791;
    o.answered = 1;
    o.spine = 2;
    ASSERT_TRUE(db::ObservationWriter(*store).write_batch(c, std::vector<db::Observation>{o}));
    ASSERT_TRUE(db::finish_campaign(*store, c, "done").is_ok());
  }
  auto t = open_db_path_table(*f, path);
  ASSERT_TRUE(t) << t.status().to_string();
  auto r = (*t)->route({*f->find_nic("h1:eth0"), *f->find_nic("h2:eth1"), routing::kProtoUdp, 200, 4791});
  ASSERT_TRUE(r) << r.status().to_string();
  EXPECT_EQ(*r, (routing::Route{*f->find_switch("r1-l1"), *f->find_switch("s2"), *f->find_switch("r2-l1")}));
  for (const char* ext : {"", "-wal", "-shm"}) fs::remove(path + ext);
}

TEST_F(DbPathTableTest, RouteOfOneTupleAndTheSameLeafCase) {
  auto t = open_db_path_table(fabric_, path_);
  ASSERT_TRUE(t);
  auto r = (*t)->route({nic("h1-1"), nic("h2-1"), routing::kProtoUdp, 102, 4791});
  ASSERT_TRUE(r);
  EXPECT_EQ(*r, (routing::Route{sw("l1"), sw("s3"), sw("l2")}));
  auto same = (*t)->route({nic("h1-1"), nic("h1-2"), routing::kProtoUdp, 100, 4791});
  ASSERT_TRUE(same);
  EXPECT_EQ(*same, (routing::Route{sw("l1")}));
  EXPECT_EQ((*t)->route({nic("h1-1"), nic("h2-1"), routing::kProtoUdp, 103, 4791}).status().code(),
            StatusCode::kNotFound) << "unanswered";
  EXPECT_EQ((*t)->route({nic("h1-1"), nic("h2-1"), routing::kProtoUdp, 999, 4791}).status().code(),
            StatusCode::kNotFound);
  auto tcp = (*t)->route({nic("h1-1"), nic("h2-1"), routing::kProtoTcp, 100, 5201});
  ASSERT_TRUE(tcp);
  EXPECT_EQ((*tcp)[1], sw("s3")) << "the TCP campaign answers TCP questions";
  EXPECT_FALSE((*t)->route({nic("h1-1"), nic("h1-1"), routing::kProtoUdp, 100, 4791})) << "bad pair";
}

TEST_F(DbPathTableTest, UnprobedPairsHaveNoPortsAndForeignTopologiesAreRefused) {
  auto t = open_db_path_table(fabric_, path_);
  ASSERT_TRUE(t);
  routing::PairRoutes out;
  ASSERT_TRUE((*t)->ports({nic("h2-2"), nic("h1-1"), routing::kProtoUdp, 4791}, {}, 64, out).is_ok());
  EXPECT_TRUE(out.ports.empty());
  topo::Clos2Spec other;
  other.leaves = 1;
  other.hosts_per_leaf = 1;
  auto f = *topo::build_clos2(other);
  f.hosts[0].name = "elsewhere";
  ASSERT_TRUE(f.finalize().is_ok());
  auto bad = open_db_path_table(f, path_);
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.status().message().find("none of its probed hosts is in the topology"), std::string::npos);
}

// A protocol or port no campaign probed is named with what the database
// holds, not answered "no ports" (which the planner reads as an unprobed
// pair and answers with "re-probe the pair").
TEST_F(DbPathTableTest, AProtocolOrPortNeverProbedIsNamedWithWhatTheDatabaseHolds) {
  auto t = open_db_path_table(fabric_, path_);
  ASSERT_TRUE(t);
  routing::PairRoutes out;
  const Status tcp = (*t)->ports({nic("h1-1"), nic("h2-1"), routing::kProtoTcp, 29500}, {}, 64, out);
  EXPECT_EQ(tcp.code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(tcp.message(), path_ +
                               " has no finished probe campaign of tcp/29500 (it holds tcp/5201, udp/4791): probe those "
                               "paths (weft probe --backend tcp-syn --dport 29500), or plan for the protocol and port "
                               "probed (weft route --protocol, --dport)");
  auto udp = (*t)->route({nic("h1-1"), nic("h2-1"), routing::kProtoUdp, 100, 4792});
  ASSERT_FALSE(udp);
  EXPECT_EQ(udp.status().message(),
            path_ + " has no finished probe campaign of udp/4792 (it holds tcp/5201, udp/4791): probe those paths "
                    "(weft probe --dport 4792), or plan for the protocol and port probed (weft route --protocol, --dport)");
}

}  // namespace
}  // namespace weft::probe
