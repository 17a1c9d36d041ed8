// A rank with several listen addresses (TcpOptions::listen_address as a comma
// list: one per plane port of its NIC, docs/collectives-setup.md "Several
// addresses, several planes"): each address of the list is checked, the
// address pair of a connection is chosen by the plan, else by subnet, else by
// position (collectives/tcp/address_choice.h), and a plan address that is not
// the rank's fails create() naming the pair. On a real dual-plane fabric:
// tests/integration/planes_netns_test.cc.
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "bootstrap/listen_address.h"
#include "tcp/address_choice.h"
#include "weft/collectives/communicator.h"
#include "weft/routing/plan.h"

namespace weft::coll {
namespace {

using namespace std::chrono_literals;
using internal::ListenOverrides;
using internal::NetInterface;
using tcp::AddressPair;
using tcp::Endpoint;
using tcp::LocalAddress;

// A host with a NIC port on each of two planes, as scripts/netns-fabric.sh
// up-rail numbers them: plane 0 on 10.0.1.0/24, plane 1 on 10.0.3.0/24.
const std::vector<NetInterface> kHost = {{"lo", "127.0.0.1", true, true, 8},
                                         {"eth0p0", "10.0.1.1", true, false, 24},
                                         {"eth0p1", "10.0.3.1", true, false, 24}};
const std::string kHostText = "lo 127.0.0.1, eth0p0 10.0.1.1, eth0p1 10.0.3.1";

ListenOverrides address(const std::string& a) { return {a, "WEFT_LISTEN_ADDR", "", ""}; }

TEST(ListenAddresses, AListOfThisHostsAddressesIsTakenAsGiven) {
  for (const char* list : {"10.0.1.1,10.0.3.1", "10.0.3.1,10.0.1.1", "10.0.1.1,127.0.0.5,10.0.3.1"}) {
    auto r = internal::override_address(address(list), kHost, "10.0.1.1");
    ASSERT_TRUE(r) << r.status().to_string();
    EXPECT_EQ(*r, list);
  }
}

struct BadList {
  std::string list, message;
};
class ListenAddressesBad : public ::testing::TestWithParam<BadList> {};

TEST_P(ListenAddressesBad, IsOneErrorNamingTheAddress) {
  auto r = internal::override_address(address(GetParam().list), kHost, "");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(r.status().message(), GetParam().message);
}

INSTANTIATE_TEST_SUITE_P(
    Lists, ListenAddressesBad,
    ::testing::Values(
        BadList{"10.0.1.1,10.0.4.1", "WEFT_LISTEN_ADDR='10.0.1.1,10.0.4.1': '10.0.4.1' is not an address of this host "
                                     "(its IPv4 addresses: " + kHostText + ")"},
        BadList{"10.0.1.1,", "WEFT_LISTEN_ADDR='10.0.1.1,': '' is not an IPv4 address"},
        BadList{"eth0p0,10.0.3.1", "WEFT_LISTEN_ADDR='eth0p0,10.0.3.1': 'eth0p0' is not an IPv4 address"},
        BadList{"10.0.3.1,0.0.0.0", "WEFT_LISTEN_ADDR='10.0.3.1,0.0.0.0': '0.0.0.0' is no address peers can connect "
                                    "to: name one of this host's (" + kHostText + ")"},
        BadList{"10.0.1.1,10.0.3.1,10.0.1.1", "WEFT_LISTEN_ADDR='10.0.1.1,10.0.3.1,10.0.1.1': '10.0.1.1' is named "
                                              "twice"}));

// Rank 0 of the example owns NIC 0's ports (10.0.1.1 plane 0, 10.0.3.1
// plane 1); the peer NIC 1's of another host (10.0.2.2, 10.0.4.2: other
// rails, so no subnet is shared) or NIC 0's (10.0.1.2, 10.0.3.2).
const std::vector<LocalAddress> kLocals = {{"10.0.1.1", 24}, {"10.0.3.1", 24}};
std::vector<Endpoint> remotes(const std::vector<std::string>& hosts) {
  std::vector<Endpoint> out;
  for (const auto& h : hosts) out.push_back({h, 47001});
  return out;
}

struct Choice {
  std::string name;
  std::vector<LocalAddress> locals;
  std::vector<std::string> remotes;
  std::string src_addr, dst_addr;  // the plan's
  std::string want_local, want_remote;
};
class ChooseAddresses : public ::testing::TestWithParam<Choice> {};

TEST_P(ChooseAddresses, PicksThePairOfOnePlane) {
  const Choice& c = GetParam();
  PeerRoute route;
  route.src_addr = c.src_addr, route.dst_addr = c.dst_addr;
  auto r = tcp::choose_addresses(c.locals, remotes(c.remotes), route, 0, 5);
  ASSERT_TRUE(r) << r.status().to_string();
  EXPECT_EQ(r->local, c.want_local);
  EXPECT_EQ(r->remote.host, c.want_remote);
  EXPECT_EQ(r->remote.port, 47001);
}

INSTANTIATE_TEST_SUITE_P(
    Rules, ChooseAddresses,
    ::testing::Values(
        Choice{"PlanNamesBoth", kLocals, {"10.0.2.2", "10.0.4.2"}, "10.0.3.1", "10.0.4.2", "10.0.3.1", "10.0.4.2"},
        Choice{"PlanNamesSourceSamePosition", kLocals, {"10.0.2.2", "10.0.4.2"}, "10.0.3.1", "", "10.0.3.1", "10.0.4.2"},
        Choice{"PlanNamesDestinationSameSubnet", kLocals, {"10.0.1.2", "10.0.3.2"}, "", "10.0.3.2", "10.0.3.1",
               "10.0.3.2"},
        Choice{"NoPlanSameSubnetFirst", kLocals, {"10.0.3.2", "10.0.1.2"}, "", "", "10.0.3.1", "10.0.3.2"},
        Choice{"NoPlanSamePosition", kLocals, {"10.0.2.2", "10.0.4.2"}, "", "", "10.0.1.1", "10.0.2.2"},
        Choice{"OneAddressEach", {{"10.0.1.1", 24}}, {"10.0.9.9"}, "", "", "10.0.1.1", "10.0.9.9"},
        Choice{"UnknownPrefixIsNoSubnet", {{"10.0.1.1", 32}, {"10.0.3.1", 32}}, {"10.0.3.2", "10.0.1.2"}, "", "",
               "10.0.1.1", "10.0.3.2"}),
    [](const auto& i) { return i.param.name; });

TEST(ChooseAddresses, APlanAddressThatIsNotTheRanksNamesThePairAndBothLists) {
  PeerRoute route;
  route.src_addr = "10.0.2.1";
  auto r = tcp::choose_addresses(kLocals, remotes({"10.0.2.2", "10.0.4.2"}), route, 3, 5);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.status().message(),
            "tcp transport: rank 3 -> rank 5: the plan's src_addr 10.0.2.1 is not an address of rank 3 (rank 3 listens "
            "on 10.0.1.1,10.0.3.1; rank 5 on 10.0.2.2:47001,10.0.4.2:47001)");
  route = {};
  route.dst_addr = "10.0.2.9";
  r = tcp::choose_addresses(kLocals, remotes({"10.0.2.2", "10.0.4.2"}), route, 3, 5);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.status().message(),
            "tcp transport: rank 3 -> rank 5: the plan's dst_addr 10.0.2.9 is not an address of rank 5 (rank 3 listens "
            "on 10.0.1.1,10.0.3.1; rank 5 on 10.0.2.2:47001,10.0.4.2:47001)");
}

TEST(ListenAddresses, EndpointListsRoundTripAndABadOneIsRefused) {
  auto e = tcp::parse_endpoints("10.0.1.1:47000,10.0.3.1:47002");
  ASSERT_TRUE(e) << e.status().to_string();
  EXPECT_EQ(tcp::endpoints_to_string(*e), "10.0.1.1:47000,10.0.3.1:47002");
  EXPECT_EQ(tcp::parse_endpoints("10.0.1.1:47000,10.0.3.1").status().message(), "address '10.0.3.1' has no ':port'");
}

// Ranks that are threads on two pretend hosts, each with two loopback
// addresses: every rank listens on both and publishes both; an AllReduce
// runs exact; a plan whose src_addr is not one of the rank's fails
// create() with the pair named.
std::vector<std::string> run_ranks(const std::vector<std::string>& listen, const routing::RoutePlan* plan,
                                   std::vector<std::string>* errors) {
  const int n = static_cast<int>(listen.size());
  MemoryStore store;
  std::vector<std::string> published(listen.size());
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      CommConfig c;
      c.rank = r;
      c.size = n;
      c.transport = "tcp";
      c.host = r == 0 ? "a" : "b";
      c.tcp.listen_address = listen[static_cast<size_t>(r)];
      c.timeout = 5s;
      if (plan) c.plan = *plan;
      auto comm = Communicator::create(c, store);
      if (!comm) {
        (*errors)[static_cast<size_t>(r)] = comm.status().message();
        return;
      }
      published[static_cast<size_t>(r)] = *store.get("weft/tcp/" + std::to_string(r), Clock::now() + 1s);
      int v = r + 1;
      ASSERT_TRUE((*comm)->allreduce(&v, &v, 1, DataType::kI32, ReduceOp::kSum));
      EXPECT_EQ(v, n * (n + 1) / 2);
    });
  }
  for (auto& t : threads) t.join();
  return published;
}

TEST(ListenAddresses, ARankListensOnEveryAddressAndPublishesThemAll) {
  std::vector<std::string> errors(2);
  const auto published = run_ranks({"127.0.0.1,127.0.0.2", "127.0.0.3,127.0.0.4"}, nullptr, &errors);
  EXPECT_EQ(errors, std::vector<std::string>(2));
  for (int r = 0; r < 2; ++r) {
    auto e = tcp::parse_endpoints(published[static_cast<size_t>(r)]);
    ASSERT_TRUE(e) << published[static_cast<size_t>(r)];
    ASSERT_EQ(e->size(), 2u);
    EXPECT_EQ((*e)[0].host, r == 0 ? "127.0.0.1" : "127.0.0.3");
    EXPECT_EQ((*e)[1].host, r == 0 ? "127.0.0.2" : "127.0.0.4");
  }
}

TEST(ListenAddresses, APlanAddressThatIsNotTheRanksFailsCreateNamingThePair) {
  routing::RoutePlan plan;
  plan.collective = "allreduce-ring";
  plan.topology = "test";
  plan.ranks = 2;
  for (int s = 0; s < 2; ++s) {
    routing::PlanFlow f;
    f.src_rank = s, f.dst_rank = 1 - s;
    f.src_host = s == 0 ? "a" : "b", f.dst_host = s == 0 ? "b" : "a";
    f.protocol = "tcp";
    f.src_addr = s == 0 ? "127.0.0.9" : "127.0.0.8";  // neither rank's: both fail at once
    f.dst_addr = s == 0 ? "127.0.0.3" : "127.0.0.1";
    plan.flows.push_back(f);
  }
  std::vector<std::string> errors(2);
  run_ranks({"127.0.0.1,127.0.0.2", "127.0.0.3,127.0.0.4"}, &plan, &errors);
  EXPECT_NE(errors[0].find("tcp transport: rank 0 -> rank 1: the plan's src_addr 127.0.0.9 is not an address of rank 0 "
                           "(rank 0 listens on 127.0.0.1,127.0.0.2; rank 1 on 127.0.0.3:"),
            std::string::npos)
      << errors[0];
  EXPECT_NE(errors[1].find("rank 1 -> rank 0: the plan's src_addr 127.0.0.8"), std::string::npos) << errors[1];
}

}  // namespace
}  // namespace weft::coll
