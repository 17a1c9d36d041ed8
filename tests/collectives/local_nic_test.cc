// Which NIC a rank opens. The communicator tells each transport the rank's
// index among the ranks of its host (TransportConfig::local_index), and
// VerbsOptions::device_for picks devices[local index % NICs]: ranks of one
// host spread over its NICs whatever order a rank file put them in.
#include <gtest/gtest.h>

#include <cstdlib>
#include <mutex>
#include <string>
#include <vector>

#include "harness.h"
#include "scoped_env.h"
#include "weft/collectives/transport.h"

namespace weft::coll::testing {
namespace {

struct Seen {
  int local_index = -2;
  std::string device;
};

std::mutex g_seen_mu;
std::vector<Seen> g_seen;  // by rank

// Loopback underneath; records what the communicator told the transport.
const bool kNicRecorder = register_transport(
    "nic-recorder", [](const TransportConfig& c, Store& store, Deadline d) -> Result<std::unique_ptr<Transport>> {
      {
        std::lock_guard<std::mutex> l(g_seen_mu);
        g_seen.at(static_cast<size_t>(c.rank)) = Seen{c.local_index, c.verbs.device_for(c.local_index)};
      }
      TransportConfig inner = c;
      inner.name = "loopback";
      return make_transport(inner, store, d);
    });

// Creates one communicator per host name (rank r on hosts[r]) and returns
// what each rank's transport saw.
std::vector<Seen> run_on_hosts(const std::vector<std::string>& hosts, const std::function<void(CommConfig&)>& tweak) {
  EXPECT_TRUE(kNicRecorder);
  g_seen.assign(hosts.size(), Seen{});
  run_ranks(static_cast<int>(hosts.size()), [](Communicator&) {}, [&](CommConfig& c) {
    c.transport = "nic-recorder";
    c.host = hosts[static_cast<size_t>(c.rank)];
    c.timeout = std::chrono::seconds(30);
    tweak(c);
  });
  return g_seen;
}

struct NicCase {
  std::string name;
  std::vector<std::string> hosts;  // rank r runs on hosts[r]
  std::vector<std::string> nics;   // VerbsOptions::devices
  std::string device;              // VerbsOptions::device
  std::vector<int> local_index;
  std::vector<std::string> opened;
};

class RankNic : public ::testing::TestWithParam<NicCase> {};

TEST_P(RankNic, EachRankOpensTheNicOfItsIndexAmongTheRanksOfItsHost) {
  const NicCase& k = GetParam();
  ScopedEnv no_list("WEFT_VERBS_DEVICES", nullptr);
  const std::vector<Seen> seen = run_on_hosts(k.hosts, [&](CommConfig& c) {
    c.verbs.devices = k.nics;
    c.verbs.device = k.device;
  });
  ASSERT_EQ(seen.size(), k.local_index.size());
  for (size_t r = 0; r < seen.size(); ++r) {
    EXPECT_EQ(seen[r].local_index, k.local_index[r]) << "rank " << r;
    EXPECT_EQ(seen[r].device, k.opened[r]) << "rank " << r;
  }
}

INSTANTIATE_TEST_SUITE_P(
    Placements, RankNic,
    ::testing::Values(
        // Round-robin placement: rank % 2 would put both ranks of a host on n0
        // (host a) or both on n1 (host b).
        NicCase{"TwoHostsInterleaved", {"a", "b", "a", "b"}, {"n0", "n1"}, "", {0, 0, 1, 1}, {"n0", "n0", "n1", "n1"}},
        // A rank file's order: host b holds ranks 0, 2, 3; host a 1, 4.
        NicCase{"RankFileOrderThreeNics", {"b", "a", "b", "b", "a"}, {"n0", "n1", "n2"}, "", {0, 0, 1, 2, 1},
                {"n0", "n0", "n1", "n2", "n1"}},
        // More ranks than NICs on a host: they wrap.
        NicCase{"ThreeRanksPerHostTwoNics", {"a", "a", "a", "b", "b", "b"}, {"n0", "n1"}, "", {0, 1, 2, 0, 1, 2},
                {"n0", "n1", "n0", "n0", "n1", "n0"}},
        NicCase{"OneHostIsRankOrder", {"a", "a", "a"}, {"n0", "n1"}, "", {0, 1, 2}, {"n0", "n1", "n0"}},
        // A named device wins over the list; neither: the first active one ("").
        NicCase{"NamedDeviceWins", {"a", "b", "a"}, {"n0", "n1"}, "d", {0, 0, 1}, {"d", "d", "d"}},
        NicCase{"NoNicsNamed", {"a", "a", "b"}, {}, "", {0, 1, 0}, {"", "", ""}}),
    [](const ::testing::TestParamInfo<NicCase>& p) { return p.param.name; });

TEST(RankNicFromEnvironment, WeftVerbsDevicesListsTheNicsWhenTheConfigNamesNone) {
  ScopedEnv env("WEFT_VERBS_DEVICES", "mlx5_0,mlx5_1");
  const std::vector<Seen> seen = run_on_hosts({"a", "b", "a", "b"}, [](CommConfig&) {});
  ASSERT_EQ(seen.size(), 4u);
  EXPECT_EQ(seen[0].device, "mlx5_0");
  EXPECT_EQ(seen[1].device, "mlx5_0");
  EXPECT_EQ(seen[2].device, "mlx5_1");
  EXPECT_EQ(seen[3].device, "mlx5_1");
}

TEST(RankNicFromEnvironment, TheConfigsListWinsOverWeftVerbsDevices) {
  ScopedEnv env("WEFT_VERBS_DEVICES", "mlx5_0,mlx5_1");
  const std::vector<Seen> seen = run_on_hosts({"a", "a"}, [](CommConfig& c) { c.verbs.devices = {"rxe9"}; });
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_EQ(seen[0].device, "rxe9");
  EXPECT_EQ(seen[1].device, "rxe9");
}

class BadVerbsDevices : public ::testing::TestWithParam<const char*> {};

TEST_P(BadVerbsDevices, AListWithAnEmptyNameIsRefusedNamingTheVariable) {
  ScopedEnv env("WEFT_VERBS_DEVICES", GetParam());
  MemoryStore store;
  CommConfig c;
  c.transport = "nic-recorder";
  auto comm = Communicator::create(c, store);
  ASSERT_FALSE(comm.is_ok());
  EXPECT_EQ(comm.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(comm.status().message().find(std::string("WEFT_VERBS_DEVICES must be comma-separated device names, none "
                                                     "empty (got '") + GetParam() + "')"),
            std::string::npos)
      << comm.status().message();
}

INSTANTIATE_TEST_SUITE_P(Lists, BadVerbsDevices, ::testing::Values(",", "a,", ",a", "a,,b"));

TEST(TransportConfigLocalIndex, OutOfRangeIsRefused) {
  TransportConfig c;
  c.size = 3;
  c.local_index = 3;
  EXPECT_EQ(c.validate().message(), "transport: local_index must be -1 (unknown) or in 0..2 (got 3)");
  c.local_index = -2;
  EXPECT_EQ(c.validate().message(), "transport: local_index must be -1 (unknown) or in 0..2 (got -2)");
  c.local_index = 2;
  EXPECT_TRUE(c.validate().is_ok());
}

}  // namespace
}  // namespace weft::coll::testing
