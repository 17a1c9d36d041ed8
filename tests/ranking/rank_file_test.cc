// Rank files: golden files for every format, round trips, and the errors a
// launcher user sees.
#include <gtest/gtest.h>

#include <tuple>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "weft/common/file_util.h"
#include "weft/ranking/rank_file.h"
#include "weft/topology/builders.h"

namespace weft::ranking {
namespace {

// 2 spines x 2 leaves x 2 hosts x 2 NICs, addresses on leaf 1 only, and the
// clos order of a partial allocation given in a scrambled order: leaf 2
// (4 NICs) comes before leaf 1 (2 NICs).
struct Golden {
  topo::Fabric fabric;
  RankOrder order;
};

Golden golden_case() {
  auto f = topo::build_clos2({.spines = 2, .leaves = 2, .hosts_per_leaf = 2, .nics_per_host = 2});
  EXPECT_TRUE(f);
  f->nics[0].address = "10.0.1.1";
  f->nics[1].address = "10.0.1.2";
  auto alloc = allocation_from_names(*f, {"h2-2", "h1-1", "h2-1"});
  EXPECT_TRUE(alloc);
  auto order = rank(*f, *alloc, RankAlgo::kClos);
  EXPECT_TRUE(order);
  return {std::move(*f), std::move(*order)};
}

class RankFileGolden : public ::testing::TestWithParam<RankFormat> {};

TEST_P(RankFileGolden, MatchesTheGoldenFileAndReadsBack) {
  const auto g = golden_case();
  const std::string name = std::string(rank_format_name(GetParam()));
  auto text = format_rank_file(g.fabric, g.order, GetParam());
  ASSERT_TRUE(text) << text.status().message();
  auto golden = read_file(std::string(WEFT_SOURCE_DIR) + "/tests/golden/rankfiles/" + name + ".txt");
  ASSERT_TRUE(golden) << golden.status().message();
  EXPECT_EQ(*text, *golden) << "regenerate with: weft rank --format " << name;
  EXPECT_EQ(detect_rank_format(*text), GetParam());
  auto back = parse_rank_file(g.fabric, *text);
  ASSERT_TRUE(back) << back.status().message();
  EXPECT_EQ(*back, g.order);
}

INSTANTIATE_TEST_SUITE_P(AllFormats, RankFileGolden,
                         ::testing::Values(RankFormat::kOpenMpi, RankFormat::kMpich, RankFormat::kSlurm,
                                           RankFormat::kHccl, RankFormat::kTorchrun, RankFormat::kCsv),
                         [](const auto& p) { return std::string(rank_format_name(p.param)); });

TEST(RankFile, TorchrunRefusesAnOrderItCannotExpress) {
  auto f = topo::build_clos2({.spines = 2, .leaves = 1, .hosts_per_leaf = 2, .nics_per_host = 2});
  ASSERT_TRUE(f);
  RankOrder split{{0, 2, 1, 3}};  // h1-1, h1-2, h1-1, h1-2
  auto text = format_rank_file(*f, split, RankFormat::kTorchrun);
  ASSERT_FALSE(text);
  EXPECT_EQ(text.status().message(),
            "torchrun cannot express this order: host 'h1-1' gets two separate blocks of ranks (again at rank 2)");
}

// Blocks of different sizes: the message suggests slurm only where slurm
// can write the order (each host's ranks on its NICs in their order).
struct TorchrunUneven {
  const char* name;
  std::vector<int> order;  // NICs of 2 hosts x 2 NICs: 0, 1 on h1-1; 2, 3 on h1-2
  const char* then;
};
std::ostream& operator<<(std::ostream& o, const TorchrunUneven& c) { return o << c.name; }
class TorchrunUnevenBlocks : public ::testing::TestWithParam<TorchrunUneven> {};

TEST_P(TorchrunUnevenBlocks, AreRefusedSuggestingOnlyFormatsThatCanWriteTheOrder) {
  auto f = topo::build_clos2({.spines = 2, .leaves = 1, .hosts_per_leaf = 2, .nics_per_host = 2});
  ASSERT_TRUE(f);
  auto text = format_rank_file(*f, RankOrder{GetParam().order}, RankFormat::kTorchrun);
  ASSERT_FALSE(text);
  EXPECT_EQ(text.status().message(),
            std::string("torchrun cannot express this order: host 'h1-2' gets 2 consecutive ranks from rank 1, but "
                        "torchrun runs the same --nproc_per_node (1) on every node; use --format ") +
                GetParam().then);
  EXPECT_EQ(format_rank_file(*f, RankOrder{GetParam().order}, RankFormat::kSlurm).is_ok(),
            std::string(GetParam().then) == "openmpi or slurm");
}

INSTANTIATE_TEST_SUITE_P(Orders, TorchrunUnevenBlocks,
                         ::testing::Values(TorchrunUneven{"NicsInOrder", {0, 2, 3}, "openmpi or slurm"},
                                           TorchrunUneven{"NicsSwapped", {0, 3, 2}, "hccl or csv"}),
                         [](const auto& p) { return std::string(p.param.name); });

// Hydra starts each block of a hostfile as a node of its own (the first
// process of each is local rank 0): an order that returns to a host is
// refused for mpich, naming the formats that can write it.
struct MpichSplit {
  const char* name;
  std::vector<int> order;  // NICs of 2 hosts x 2 NICs: 0, 1 on h1-1; 2, 3 on h1-2
  const char* then;
};
std::ostream& operator<<(std::ostream& o, const MpichSplit& c) { return o << c.name; }
class MpichSplitHosts : public ::testing::TestWithParam<MpichSplit> {};

TEST_P(MpichSplitHosts, AreRefusedSuggestingOnlyFormatsThatCanWriteTheOrder) {
  auto f = topo::build_clos2({.spines = 2, .leaves = 1, .hosts_per_leaf = 2, .nics_per_host = 2});
  ASSERT_TRUE(f);
  auto text = format_rank_file(*f, RankOrder{GetParam().order}, RankFormat::kMpich);
  ASSERT_FALSE(text);
  EXPECT_EQ(text.status().message(),
            std::string("mpich cannot express this order: host 'h1-1' gets two separate blocks of ranks (again at "
                        "rank 2), and Hydra starts each block as a node of its own whose first rank is local rank 0; "
                        "use --format ") +
                GetParam().then);
  EXPECT_EQ(format_rank_file(*f, RankOrder{GetParam().order}, RankFormat::kSlurm).is_ok(),
            std::string(GetParam().then) == "slurm, hccl or csv");
}

INSTANTIATE_TEST_SUITE_P(Orders, MpichSplitHosts,
                         ::testing::Values(MpichSplit{"NicsInOrder", {0, 2, 1, 3}, "slurm, hccl or csv"},
                                           MpichSplit{"NicsSwapped", {0, 3, 1, 2}, "hccl or csv"}),
                         [](const auto& p) { return std::string(p.param.name); });

// Host-only formats give a host's k-th rank its k-th NIC: an order that
// does not (a host given in part, its NICs out of order) is refused.
struct HostOnlyCase {
  const char* name;
  std::vector<int> order;  // NICs of 2 hosts x 2 NICs: 0, 1 on h1-1; 2, 3 on h1-2
  int rank;                // the first rank that would move
  const char* reads_as;
  const char* ranked;
};

class HostOnlyFormats : public ::testing::TestWithParam<std::tuple<RankFormat, HostOnlyCase>> {};

TEST_P(HostOnlyFormats, RefuseAnOrderThatWouldReadBackOnOtherNics) {
  const auto& [format, c] = GetParam();
  auto f = topo::build_clos2({.spines = 2, .leaves = 1, .hosts_per_leaf = 2, .nics_per_host = 2});
  ASSERT_TRUE(f);
  auto text = format_rank_file(*f, RankOrder{c.order}, format);
  ASSERT_FALSE(text);
  EXPECT_EQ(text.status().message(),
            fmt::format("{} cannot express this order: it names hosts only, and a host's k-th rank runs on its k-th "
                        "NIC, so rank {} would run on {} where the order puts {}; use --format csv or hccl, which "
                        "name each rank's NIC",
                        rank_format_name(format), c.rank, c.reads_as, c.ranked));
  for (auto carries : {RankFormat::kCsv, RankFormat::kOpenMpi, RankFormat::kHccl}) {
    auto ok = format_rank_file(*f, RankOrder{c.order}, carries);
    ASSERT_TRUE(ok) << ok.status().message();
    auto back = parse_rank_file(*f, *ok, carries);
    ASSERT_TRUE(back);
    EXPECT_EQ(back->nics, c.order);
  }
}

INSTANTIATE_TEST_SUITE_P(
    Orders, HostOnlyFormats,
    ::testing::Combine(::testing::Values(RankFormat::kMpich, RankFormat::kSlurm, RankFormat::kTorchrun),
                       ::testing::Values(HostOnlyCase{"SecondNicOnly", {1, 3}, 0, "h1-1:eth0", "h1-1:eth1"},
                                         HostOnlyCase{"NicsSwapped", {0, 1, 3, 2}, 2, "h1-2:eth0", "h1-2:eth1"})),
    [](const auto& p) {
      return std::string(rank_format_name(std::get<0>(p.param))) + "_" + std::get<1>(p.param).name;
    });

// HCCL's device_id is the device a NIC serves (its one GPU in the topology);
// a NIC that serves several, or two ranks on one device, is refused.
TEST(RankFile, HcclDeviceIdsAreTheNicsGpus) {
  auto f = topo::build_clos2({.spines = 2, .leaves = 1, .hosts_per_leaf = 1, .nics_per_host = 3});
  ASSERT_TRUE(f);
  f->nics[0].gpus = {6};
  f->nics[1].gpus = {};
  f->nics[2].gpus = {3};
  auto text = format_rank_file(*f, RankOrder{{0, 1, 2}}, RankFormat::kHccl);
  ASSERT_TRUE(text) << text.status().message();
  auto j = nlohmann::json::parse(*text);
  std::vector<std::string> ids;
  for (const auto& d : j["server_list"][0]["device"]) ids.push_back(d["device_id"]);
  EXPECT_EQ(ids, (std::vector<std::string>{"6", "1", "3"}));
  // Read back by device, not by NIC index: "6" is eth0, not a 7th NIC.
  auto back = parse_rank_file(*f, *text, RankFormat::kHccl);
  ASSERT_TRUE(back) << back.status().message();
  EXPECT_EQ(back->nics, (std::vector<int>{0, 1, 2}));
  f->nics[1].gpus = {6};
  text = format_rank_file(*f, RankOrder{{0, 1, 2}}, RankFormat::kHccl);
  ASSERT_FALSE(text);
  EXPECT_EQ(text.status().message(),
            "hccl cannot express this order: ranks 0 and 1 are both on device 6 of host 'h1-1' (HCCL runs one rank "
            "per device; the ports of one NIC on several planes serve one device): rank one port per device, or use "
            "--format csv or openmpi");
  f->nics[1].gpus = {1, 2};
  text = format_rank_file(*f, RankOrder{{0, 1, 2}}, RankFormat::kHccl);
  ASSERT_FALSE(text);
  EXPECT_EQ(text.status().message(),
            "hccl cannot express this order: h1-1:eth1 serves 2 GPUs, and an HCCL rank is one device; list one GPU "
            "per NIC in the topology");
}

// GPUs in the other order than the NICs: each rank reads back on its NIC.
TEST(RankFile, HcclReadsEachDeviceBackOnTheNicServingIt) {
  auto f = topo::build_clos2({.spines = 2, .leaves = 2, .hosts_per_leaf = 1, .nics_per_host = 2});
  ASSERT_TRUE(f);
  for (int n : {0, 2}) f->nics[static_cast<size_t>(n)].gpus = {1};
  for (int n : {1, 3}) f->nics[static_cast<size_t>(n)].gpus = {0};
  for (const RankOrder& o : {RankOrder{{0, 1, 2, 3}}, RankOrder{{3, 0, 1}}, RankOrder{{1, 3}}}) {
    auto text = format_rank_file(*f, o, RankFormat::kHccl);
    ASSERT_TRUE(text) << text.status().message();
    auto back = parse_rank_file(*f, *text, RankFormat::kHccl);
    ASSERT_TRUE(back) << back.status().message();
    EXPECT_EQ(*back, o);
  }
  // A NIC the table does not name may serve several GPUs.
  auto text = format_rank_file(*f, RankOrder{{1, 3}}, RankFormat::kHccl);
  ASSERT_TRUE(text) << text.status().message();
  f->nics[0].gpus = {1, 2};
  auto back = parse_rank_file(*f, *text, RankFormat::kHccl);
  ASSERT_TRUE(back) << back.status().message();
  EXPECT_EQ(*back, (RankOrder{{1, 3}}));
}

// The two ports of a NIC on two planes serve one device: its device_ip says
// which port a rank is on, and without addresses the table is refused on
// reading (a guess would plan the job on the other plane).
TEST(RankFile, HcclTellsPortsOfOneDeviceApartByTheirAddressOrRefuses) {
  auto f = topo::build_clos2({.spines = 2, .leaves = 1, .hosts_per_leaf = 2, .nics_per_host = 1, .planes = 2});
  ASSERT_TRUE(f);
  const RankOrder second_plane{{*f->find_nic("h1-1:eth0p1"), *f->find_nic("h1-2:eth0p1")}};
  auto text = format_rank_file(*f, second_plane, RankFormat::kHccl);
  ASSERT_TRUE(text) << text.status().message();
  auto back = parse_rank_file(*f, *text, RankFormat::kHccl);
  ASSERT_FALSE(back);
  EXPECT_EQ(back.status().message(),
            "hccl rank file: /server_list/0/device/0: device 0 of host 'h1-1' is served by NICs eth0p0, eth0p1 (one "
            "NIC's ports on several planes), and device_ip '0.0.0.0' is the address of none of them in the topology; "
            "give the NICs their addresses, or use --format csv");
  for (size_t n = 0; n < f->nics.size(); ++n) f->nics[n].address = fmt::format("10.0.{}.{}", n % 2 + 1, n + 1);
  text = format_rank_file(*f, second_plane, RankFormat::kHccl);
  ASSERT_TRUE(text) << text.status().message();
  back = parse_rank_file(*f, *text, RankFormat::kHccl);
  ASSERT_TRUE(back) << back.status().message();
  EXPECT_EQ(*back, second_plane);
}

struct BadRankFile {
  const char* text;
  const char* error;
};

class RankFileErrors : public ::testing::TestWithParam<BadRankFile> {};

TEST_P(RankFileErrors, NameTheLine) {
  auto f = topo::build_clos2({.spines = 2, .leaves = 2, .hosts_per_leaf = 2});
  ASSERT_TRUE(f);
  auto o = parse_rank_file(*f, GetParam().text);
  ASSERT_FALSE(o);
  EXPECT_EQ(o.status().message(), GetParam().error);
}

INSTANTIATE_TEST_SUITE_P(
    Cases, RankFileErrors,
    ::testing::Values(
        BadRankFile{"rank 0=h1-1 slot=0\nrank 2=h1-2 slot=0\n", "openmpi rank file: rank 1 is missing"},
        BadRankFile{"rank 0=h1-1 slot=3\n", "openmpi rank file: line 1: host 'h1-1' has no NIC 3"},
        BadRankFile{"h1-1\nh7-7\n", "slurm rank file: line 2: host 'h7-7' is not in the topology"},
        BadRankFile{"h1-1\nh1-1\n", "slurm rank file: line 2: host 'h1-1' has 1 NIC(s) but gets more ranks"},
        BadRankFile{"rank,host,nic,switch\n0,h1-1,eth0,l2\n",
                    "csv rank file: line 2: h1-1:eth0 attaches to 'l1', not 'l2'"},
        BadRankFile{"h1-1:x\n", "mpich rank file: line 1: expected 'host:count'"},
        BadRankFile{"h1-1:1\n# a comment\nh1-2:1\nh1-1:1\n",
                    "mpich rank file: line 4: host 'h1-1' again after other hosts: Hydra starts it as another node, "
                    "whose first rank is local rank 0 again"}));

}  // namespace
}  // namespace weft::ranking
