// The inferred fabric of a campaign as a topology (weft topo infer, weft
// demo): hosts, leaves, spines by probe id, dead and unseen links down.
#include <gtest/gtest.h>

#include <limits>
#include <unistd.h>

#include <filesystem>

#include <fmt/format.h>

#include "weft/db/stores.h"
#include "weft/probe/inferred_topology.h"
#include "../scratch_name.h"

namespace weft::probe {
namespace {

namespace fs = std::filesystem;

class InferredTopologyTest : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = (fs::temp_directory_path() / (weft::test::scratch_name("weft-inftopo") + ".db")).string();
    fs::remove(path_);
    auto db = db::Database::open(path_);
    ASSERT_TRUE(db) << db.status().to_string();
    db_ = std::make_unique<db::Database>(std::move(*db));
  }
  void TearDown() override {
    db_.reset();
    for (const char* ext : {"", "-wal", "-shm"}) fs::remove(path_ + ext);
  }

  // Hosts a..e on leaves {1: a, b}, {2: c, d, e}; 3 spines (ids 2, 5, 7);
  // spine 5 - leaf 2 named dead; spine 7 - leaf 1 carried no flow.
  int64_t campaign(const std::string& state) {
    std::map<std::string, int64_t> id;
    for (const char* h : {"a", "b", "c", "d", "e"}) {
      id[h] = *db::upsert_host(*db_, {0, h, fmt::format("10.9.0.{}", h[0] - 'a' + 1), ""});
    }
    const int64_t c = *db::create_campaign(*db_, db::CampaignSpec{});
    db::InferredFabric inf;
    inf.host_leaf = {{id["a"], 1}, {id["b"], 1}, {id["c"], 2}, {id["d"], 2}, {id["e"], 2}};
    inf.spines = {{2, ""}, {5, ""}, {7, ""}};
    inf.links = {{2, 1, 40, false}, {2, 2, 40, false}, {5, 1, 13, false}, {5, 2, 0, true}, {7, 2, 9, false}};
    EXPECT_TRUE(db::save_inference(*db_, c, inf));
    if (state != "running") {
      EXPECT_TRUE(db::finish_campaign(*db_, c, state));
    }
    return c;
  }

  // A finished campaign over hosts named in `leaf_of` ("host:nic" -> leaf).
  int64_t campaign_of(const std::vector<std::pair<std::string, int>>& leaf_of, const std::vector<db::InferredFabric::Spine>& spines,
                      const std::vector<db::InferredFabric::Link>& links) {
    db::InferredFabric inf;
    int ip = 1;
    for (const auto& [name, leaf] : leaf_of) {
      inf.host_leaf[*db::upsert_host(*db_, {0, name, fmt::format("10.9.1.{}", ip++), ""})] = leaf;
    }
    inf.spines = spines;
    inf.links = links;
    const int64_t c = *db::create_campaign(*db_, db::CampaignSpec{});
    EXPECT_TRUE(db::save_inference(*db_, c, inf));
    EXPECT_TRUE(db::finish_campaign(*db_, c, "done"));
    return c;
  }

  std::string path_;
  std::unique_ptr<db::Database> db_;
};

TEST_F(InferredTopologyTest, RecognisesADualPlaneRailFabricFromPerNicHostNames) {
  // Hosts a, b with NICs x0, x1 (plane 0: leaves l1, l2) and y0, y1 (plane 1:
  // l3, l4); spines 2, 3 only ever carried plane 0 flows, 5, 6 plane 1; the
  // inference named 6 - l4 dead, and (as infer_fabric does for every pair
  // of a spine and a leaf that both carried flows) the cross-plane 2 - l3.
  campaign_of({{"a:x0", 1}, {"a:x1", 2}, {"a:y0", 3}, {"a:y1", 4}, {"b:x0", 1}, {"b:x1", 2}, {"b:y0", 3}, {"b:y1", 4}},
              {{2, ""}, {3, ""}, {5, ""}, {6, ""}},
              {{2, 1, 9, false}, {2, 2, 9, false}, {3, 1, 9, false}, {3, 2, 9, false}, {5, 3, 9, false}, {5, 4, 9, false},
               {6, 3, 9, false}, {6, 4, 0, true}, {2, 3, 0, true}});
  auto f = inferred_topology(*db_, {});
  ASSERT_TRUE(f) << f.status().to_string();
  EXPECT_EQ(f->kind, topo::FabricKind::kRail);
  EXPECT_EQ(f->num_planes(), 2);
  EXPECT_EQ(f->num_rails(), 2);
  ASSERT_EQ(f->hosts.size(), 2u);
  EXPECT_EQ(f->hosts[1].name, "b");
  ASSERT_EQ(f->hosts[1].nics.size(), 4u);
  auto nic = f->find_nic("b:y1");
  ASSERT_TRUE(nic);
  EXPECT_EQ(f->nics[static_cast<size_t>(*nic)].address, "10.9.1.8");
  EXPECT_EQ(f->nic_rail(*nic), 1);
  EXPECT_EQ(f->nic_plane(*nic), 1);
  EXPECT_EQ(f->nic_rail(*f->find_nic("a:y0")), 0);
  EXPECT_EQ(f->nic_plane(*f->find_nic("a:x1")), 0);
  auto link = [&](const char* spine, const char* leaf) {
    return f->link_between(f->switch_vertex(*f->find_switch(spine)), f->switch_vertex(*f->find_switch(leaf)));
  };
  EXPECT_FALSE(link("s2", "l3")) << "planes share no link";
  EXPECT_FALSE(link("s5", "l1"));
  ASSERT_TRUE(link("s6", "l4"));
  EXPECT_EQ(f->links[static_cast<size_t>(*link("s6", "l4"))].state, topo::LinkState::kDown) << "named dead";
  EXPECT_EQ(f->links.size(), 8u + 8u) << "8 access links, 2 x 2 x 2 spine-leaf links";
}

// The dual-plane rail fabric above with leaf l4 down (no flow crossed it):
// its hosts are one NIC short in plane 1, so it stays there, its uplinks
// down, and no link joins the planes.
TEST_F(InferredTopologyTest, ALeafThatCarriedNothingKeepsThePlaneItsHostsAreShortOf) {
  campaign_of({{"a:x0", 1}, {"a:x1", 2}, {"a:y0", 3}, {"a:y1", 4}, {"b:x0", 1}, {"b:x1", 2}, {"b:y0", 3}, {"b:y1", 4}},
              {{2, ""}, {3, ""}, {5, ""}, {6, ""}},
              {{2, 1, 9, false}, {2, 2, 9, false}, {3, 1, 9, false}, {3, 2, 9, false}, {5, 3, 9, false},
               {6, 3, 9, false}});
  auto f = inferred_topology(*db_, {});
  ASSERT_TRUE(f) << f.status().to_string();
  EXPECT_EQ(f->kind, topo::FabricKind::kRail);
  EXPECT_EQ(f->num_planes(), 2);
  EXPECT_EQ(f->nic_plane(*f->find_nic("a:y1")), 1);
  EXPECT_EQ(f->nic_rail(*f->find_nic("b:y1")), 1);
  auto link = [&](const char* spine, const char* leaf) {
    return f->link_between(f->switch_vertex(*f->find_switch(spine)), f->switch_vertex(*f->find_switch(leaf)));
  };
  for (const char* spine : {"s5", "s6"}) {
    ASSERT_TRUE(link(spine, "l4")) << spine;
    EXPECT_EQ(f->links[static_cast<size_t>(*link(spine, "l4"))].state, topo::LinkState::kDown) << spine;
    EXPECT_FALSE(link(spine, "l1")) << spine << ": planes share no link";
  }
  EXPECT_FALSE(link("s2", "l4"));
  EXPECT_EQ(f->links.size(), 8u + 8u) << "8 access links, 2 x 2 x 2 spine-leaf links";
}

// No spine at all, every host with a NIC on each leaf: dual-ToR planes look
// like a rail fabric whose spines are all down, so it reads as one plane
// (its cross-leaf pairs stay failures).
TEST_F(InferredTopologyTest, LeavesWithoutAnySpineAreNotTakenForPlanes) {
  campaign_of({{"a:p0", 1}, {"a:p1", 2}, {"b:p0", 1}, {"b:p1", 2}, {"c:p0", 1}, {"c:p1", 2}}, {}, {});
  auto f = inferred_topology(*db_, {});
  ASSERT_TRUE(f) << f.status().to_string();
  EXPECT_EQ(f->num_planes(), 0);
}

// A single-plane fabric whose hosts have a NIC on each of two leaves, one
// leaf cut off: a failure, not a plane.
TEST_F(InferredTopologyTest, ALeafCutOffInOnePlaneIsAFailureNotAPlane) {
  campaign_of({{"a:eth0", 1}, {"a:eth1", 2}, {"b:eth0", 1}, {"b:eth1", 2}, {"c:eth0", 3}, {"c:eth1", 1}},
              {{1, ""}, {2, ""}}, {{1, 1, 4, false}, {1, 3, 4, false}, {2, 1, 4, false}, {2, 3, 4, false}});
  auto f = inferred_topology(*db_, {});
  ASSERT_TRUE(f) << f.status().to_string();
  EXPECT_EQ(f->num_planes(), 0);
  auto l2 = f->switch_vertex(*f->find_switch("l2"));
  for (const char* spine : {"s1", "s2"}) {
    auto k = f->link_between(f->switch_vertex(*f->find_switch(spine)), l2);
    ASSERT_TRUE(k) << spine;
    EXPECT_EQ(f->links[static_cast<size_t>(*k)].state, topo::LinkState::kDown);
  }
}

TEST_F(InferredTopologyTest, HostsWithSeveralNicsOnOneLeafAreAClosNotARailFabric) {
  campaign_of({{"a:eth0", 1}, {"a:eth1", 1}, {"b:eth0", 2}, {"b:eth1", 2}}, {{1, ""}, {2, ""}},
              {{1, 1, 4, false}, {1, 2, 4, false}, {2, 1, 4, false}, {2, 2, 4, false}});
  auto f = inferred_topology(*db_, {});
  ASSERT_TRUE(f) << f.status().to_string();
  EXPECT_EQ(f->kind, topo::FabricKind::kClos2);
  EXPECT_EQ(f->num_planes(), 0);
  EXPECT_EQ(f->num_rails(), 0);
  ASSERT_EQ(f->hosts.size(), 2u);
  EXPECT_EQ(f->hosts[0].nics.size(), 2u);
  EXPECT_EQ(f->nic_switch(*f->find_nic("b:eth1")), *f->find_switch("l2"));
}

TEST_F(InferredTopologyTest, HostsLeavesSpinesAndLinkStatesComeFromTheInference) {
  const int64_t c = campaign("done");
  auto f = inferred_topology(*db_, {.campaign = std::nullopt, .fabric_gbps = 0.2, .access_gbps = 0.1, .name = ""});
  ASSERT_TRUE(f) << f.status().to_string();
  EXPECT_EQ(f->name, fmt::format("probed-{}", c));
  ASSERT_EQ(f->hosts.size(), 5u);
  EXPECT_EQ(f->hosts[2].name, "c");
  EXPECT_EQ(f->nics[4].address, "10.9.0.5");
  // Leaves l1, l2 and spines s2, s5, s7 carrying their probe ids.
  for (const auto& [name, id] : std::vector<std::pair<std::string, int>>{{"s2", 2}, {"s5", 5}, {"s7", 7}}) {
    auto sw = f->find_switch(name);
    ASSERT_TRUE(sw) << name;
    EXPECT_EQ(f->switches[static_cast<size_t>(*sw)].id, id);
    EXPECT_EQ(f->switches[static_cast<size_t>(*sw)].tier, topo::kTierSpine);
  }
  const int l1 = f->switch_vertex(*f->find_switch("l1")), l2 = f->switch_vertex(*f->find_switch("l2"));
  EXPECT_EQ(f->nic_switch(*f->find_nic("b")), *f->find_switch("l1"));
  EXPECT_EQ(f->nic_switch(*f->find_nic("e")), *f->find_switch("l2"));
  auto state = [&](const char* spine, int leaf) {
    auto l = f->link_between(f->switch_vertex(*f->find_switch(spine)), leaf);
    EXPECT_TRUE(l);
    return f->links[static_cast<size_t>(*l)].state;
  };
  EXPECT_EQ(state("s2", l1), topo::LinkState::kUp);
  EXPECT_EQ(state("s5", l1), topo::LinkState::kUp);
  EXPECT_EQ(state("s5", l2), topo::LinkState::kDown) << "named dead";
  EXPECT_EQ(state("s7", l1), topo::LinkState::kDown) << "no flow crossed it";
  EXPECT_EQ(state("s7", l2), topo::LinkState::kUp);
  EXPECT_DOUBLE_EQ(f->links[static_cast<size_t>(f->nic_link(0))].gbps, 0.1);
  EXPECT_DOUBLE_EQ(f->links[static_cast<size_t>(*f->link_between(f->switch_vertex(*f->find_switch("s2")), l1))].gbps,
                   0.2);
}

TEST_F(InferredTopologyTest, AnUnfinishedCampaignOrNoneIsAOneLineError) {
  auto none = inferred_topology(*db_, {});
  ASSERT_FALSE(none);
  EXPECT_NE(none.status().message().find("no finished campaign"), std::string::npos) << none.status().to_string();
  const int64_t c = campaign("running");
  InferredTopologyOptions o;
  o.campaign = c;
  auto running = inferred_topology(*db_, o);
  ASSERT_FALSE(running);
  EXPECT_NE(running.status().message().find("not done"), std::string::npos) << running.status().to_string();
}

TEST_F(InferredTopologyTest, RejectsLinkRatesThatAreNotFiniteAndPositive) {
  campaign("done");
  // inf would be written as JSON null: a file weft cannot read back.
  for (double bad : {0.0, -1.0, std::numeric_limits<double>::infinity(), std::numeric_limits<double>::quiet_NaN()}) {
    for (bool fabric : {true, false}) {
      InferredTopologyOptions o;
      (fabric ? o.fabric_gbps : o.access_gbps) = bad;
      auto f = inferred_topology(*db_, o);
      ASSERT_FALSE(f) << bad;
      EXPECT_EQ(f.status().message(), "inferred topology: link rates must be finite and > 0 Gbit/s") << bad;
    }
  }
}

}  // namespace
}  // namespace weft::probe
