// How the TCP transport's listen address is chosen (TcpOptions::
// listen_address, collectives/bootstrap/listen_address.h): the interface
// list's syntax (NCCL_SOCKET_IFNAME's), overrides checked against this
// host's interfaces, the defaults, the config against the environment, and
// that a wrong override fails create() at once, before the rank writes to
// the store, through the C++ and the C API. Across real hosts:
// tests/integration/multihost_netns_test.cc.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include "bootstrap/listen_address.h"
#include "scoped_env.h"
#include "tcp/socket.h"
#include "weft/collectives/c_api.h"
#include "weft/collectives/communicator.h"

namespace weft::coll::internal {
namespace {

using namespace std::chrono_literals;

struct FilterCase {
  const char* spec;
  const char* ifname;
  bool matches;
};
void PrintTo(const FilterCase& c, std::ostream* os) { *os << "'" << c.spec << "' on " << c.ifname; }

class IfnameFilterMatches : public ::testing::TestWithParam<FilterCase> {};

TEST_P(IfnameFilterMatches, AsNcclSocketIfnameDoes) {
  const FilterCase& c = GetParam();
  auto f = IfnameFilter::parse(c.spec);
  ASSERT_TRUE(f) << f.status().to_string();
  EXPECT_EQ(f->matches(c.ifname), c.matches) << "'" << c.spec << "' on " << c.ifname;
}

INSTANTIATE_TEST_SUITE_P(Prefixes, IfnameFilterMatches,
                         ::testing::Values(FilterCase{"eth", "eth0", true}, FilterCase{"eth", "ens3", false},
                                           FilterCase{"eth1", "eth10", true}, FilterCase{"eth,ib", "ib0", true},
                                           FilterCase{"eth,ib", "lo", false}, FilterCase{"eth,,ib", "ib1", true}));
INSTANTIATE_TEST_SUITE_P(Exact, IfnameFilterMatches,
                         ::testing::Values(FilterCase{"=eth0", "eth0", true}, FilterCase{"=eth0", "eth01", false},
                                           FilterCase{"=eth0,eth1", "eth1", true}));
INSTANTIATE_TEST_SUITE_P(Excluded, IfnameFilterMatches,
                         ::testing::Values(FilterCase{"^docker,lo", "lo", false},
                                           FilterCase{"^docker,lo", "docker0", false},
                                           FilterCase{"^docker,lo", "eth0", true}, FilterCase{"^=eth0", "eth0", false},
                                           FilterCase{"^=eth0", "eth01", true}));

TEST(IfnameFilter, AListThatNamesNoInterfaceIsRejected) {
  for (const char* spec : {"", "^", "=", "^=", ",", "^,,"}) {
    auto f = IfnameFilter::parse(spec);
    ASSERT_FALSE(f) << "'" << spec << "'";
    EXPECT_EQ(f.status().message(), std::string("interface list '") + spec + "' names no interface");
  }
}

// A host as getifaddrs(3) lists it: loopback first, an interface that is down.
const std::vector<NetInterface> kHost = {{"lo", "127.0.0.1", true, true},
                                         {"eth0", "10.0.1.2", true, false},
                                         {"eth1", "10.1.1.2", true, false},
                                         {"eth2", "10.2.1.2", false, false},
                                         {"docker0", "172.17.0.1", true, false}};
const std::string kHostText =
    "lo 127.0.0.1, eth0 10.0.1.2, eth1 10.1.1.2, eth2 10.2.1.2 (down), docker0 172.17.0.1";

ListenOverrides address(const std::string& a) { return {a, "WEFT_LISTEN_ADDR", "", ""}; }
ListenOverrides ifname(const std::string& i) { return {"", "", i, "WEFT_SOCKET_IFNAME"}; }

TEST(OverrideAddress, AnAddressOfThisHostIsTaken) {
  for (const char* a : {"10.1.1.2", "127.0.0.1", "127.0.0.9", "10.2.1.2", "172.17.0.1"}) {
    auto r = override_address(address(a), kHost, "10.0.1.2");
    ASSERT_TRUE(r) << r.status().to_string();
    EXPECT_EQ(*r, a);
  }
}

TEST(OverrideAddress, AnAddressThatIsNotThisHostsIsOneErrorNamingItAndWhereItWasSet) {
  auto r = override_address(address("10.9.9.9"), kHost, "");
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(r.status().message(),
            "WEFT_LISTEN_ADDR='10.9.9.9' is not an address of this host (its IPv4 addresses: " + kHostText + ")");
  // 127.0.0.0/8 is local only while a loopback interface is up.
  r = override_address(address("127.0.0.9"), {kHost[1]}, "");
  EXPECT_EQ(r.status().message(),
            "WEFT_LISTEN_ADDR='127.0.0.9' is not an address of this host (its IPv4 addresses: eth0 10.0.1.2)");
  r = override_address(address("0.0.0.0"), kHost, "");
  EXPECT_EQ(r.status().message(), "WEFT_LISTEN_ADDR='0.0.0.0' is no address peers can connect to: name one of this "
                                  "host's (" + kHostText + ")");
  for (const char* bad : {"eth0", "10.0.1.256", "10.0.1", "10.0.1.2:80"}) {
    r = override_address(address(bad), kHost, "");
    EXPECT_EQ(r.status().message(), std::string("WEFT_LISTEN_ADDR='") + bad + "' is not an IPv4 address");
  }
}

struct ListCase {
  const char* spec;
  const char* route;  // this host's address towards the store
  const char* want;
};
void PrintTo(const ListCase& c, std::ostream* os) { *os << "'" << c.spec << "' route '" << c.route << "'"; }

class InterfaceList : public ::testing::TestWithParam<ListCase> {};

TEST_P(InterfaceList, TakesTheRoutesInterfaceElseTheFirstThatIsNotLoopback) {
  const ListCase& c = GetParam();
  auto r = override_address(ifname(c.spec), kHost, c.route);
  ASSERT_TRUE(r) << r.status().to_string();
  EXPECT_EQ(*r, c.want);
}

INSTANTIATE_TEST_SUITE_P(
    Cases, InterfaceList,
    ::testing::Values(ListCase{"eth", "10.1.1.2", "10.1.1.2"}, ListCase{"eth", "", "10.0.1.2"},
                      ListCase{"eth", "198.51.100.7", "10.0.1.2"}, ListCase{"=eth1", "10.0.1.2", "10.1.1.2"},
                      ListCase{"^eth,docker", "10.0.1.2", "127.0.0.1"}, ListCase{"^docker", "", "10.0.1.2"},
                      ListCase{"lo,eth1", "", "10.1.1.2"}, ListCase{"lo", "10.0.1.2", "127.0.0.1"},
                      ListCase{"eth2,eth1", "", "10.1.1.2"}));

TEST(OverrideAddress, AListThatMatchesNoInterfaceThatIsUpIsOneErrorNamingIt) {
  for (const char* spec : {"eth2", "ib", "^eth,docker,lo"}) {
    auto r = override_address(ifname(spec), kHost, "");
    EXPECT_EQ(r.status().code(), StatusCode::kNotFound) << spec;
    EXPECT_EQ(r.status().message(), std::string("WEFT_SOCKET_IFNAME='") + spec +
                                        "' matches no IPv4 interface that is up (this host's: " + kHostText + ")");
  }
  EXPECT_EQ(override_address(ifname("^"), kHost, "").status().message(),
            "WEFT_SOCKET_IFNAME: interface list '^' names no interface");
}

struct DefaultCase {
  const char* what;
  int host_count;
  const char* route;
  std::vector<NetInterface> ifs;
  const char* want;
};
void PrintTo(const DefaultCase& c, std::ostream* os) { *os << c.what; }

class DefaultAddress : public ::testing::TestWithParam<DefaultCase> {};

TEST_P(DefaultAddress, IsLoopbackOnOneHostElseTheRouteToTheStore) {
  const DefaultCase& c = GetParam();
  EXPECT_EQ(default_listen_address(c.host_count, c.route, c.ifs), c.want);
}

INSTANTIATE_TEST_SUITE_P(
    Cases, DefaultAddress,
    ::testing::Values(
        DefaultCase{"one host: loopback, as before", 1, "10.0.1.2", kHost, "127.0.0.1"},
        DefaultCase{"hosts: the interface towards the store", 3, "10.1.1.2", kHost, "10.1.1.2"},
        DefaultCase{"pretend hosts, store on loopback", 3, "127.0.0.1", kHost, "127.0.0.1"},
        DefaultCase{"file store: the first real interface", 3, "", kHost, "10.0.1.2"},
        DefaultCase{"file store, only loopback and docker", 2, "", {kHost[0], kHost[4]}, "127.0.0.1"},
        DefaultCase{"file store, first interface down", 2, "", {kHost[0], kHost[3], {"ens5", "10.5.0.1", true, false}},
                    "10.5.0.1"}));

using weft::coll::testing::ScopedEnv;

// Sets or clears the two variables for one test, restoring them after.
class ListenEnv {
 public:
  ListenEnv(const char* addr, const char* ifname) : addr_("WEFT_LISTEN_ADDR", addr), ifname_("WEFT_SOCKET_IFNAME", ifname) {}

 private:
  ScopedEnv addr_, ifname_;
};

TEST(ListenOverridesTest, TheConfigWinsOverTheEnvironmentAndOneSourceSetsOneOfTheTwo) {
  ListenEnv env("10.0.1.2", nullptr);
  TcpOptions tcp;
  auto o = listen_overrides(tcp);
  ASSERT_TRUE(o) << o.status().to_string();
  EXPECT_EQ(o->address, "10.0.1.2");
  EXPECT_EQ(o->address_from, "WEFT_LISTEN_ADDR");
  tcp.socket_ifname = "eth1";
  o = listen_overrides(tcp);
  ASSERT_TRUE(o) << o.status().to_string();
  EXPECT_EQ(o->address, "");
  EXPECT_EQ(o->ifname, "eth1");
  EXPECT_EQ(o->ifname_from, "socket_ifname");
  tcp.listen_address = "10.1.1.2";
  EXPECT_EQ(listen_overrides(tcp).status().message(),
            "listen_address='10.1.1.2' and socket_ifname='eth1' both choose the listen address: set one");
  ListenEnv both("10.0.1.2", "eth");
  EXPECT_EQ(listen_overrides(TcpOptions{}).status().message(),
            "WEFT_LISTEN_ADDR='10.0.1.2' and WEFT_SOCKET_IFNAME='eth' both choose the listen address: set one");
}

// A store that counts what the ranks wrote.
class CountingStore final : public Store {
 public:
  Status set(const std::string& key, const std::string& value) override {
    ++sets;
    return inner.set(key, value);
  }
  Result<std::string> get(const std::string& key, std::chrono::steady_clock::time_point d) override {
    return inner.get(key, d);
  }
  MemoryStore inner;
  std::atomic<int> sets{0};
};

// Runs body(rank) on `ranks` threads and joins them.
void on_threads(int ranks, const std::function<void(int)>& body) {
  std::vector<std::thread> threads;
  for (int r = 0; r < ranks; ++r) threads.emplace_back(body, r);
  for (auto& t : threads) t.join();
}

// 198.51.100.7 (TEST-NET-2, RFC 5737) is no address of any host.
TEST(ListenAddress, AWrongOverrideFailsCreateAtOnceOnEveryRankBeforeTheStoreIsWritten) {
  for (const char* transport : {"tcp", "auto", "shm"}) {
    for (int source = 0; source < 2; ++source) {
      ListenEnv env(source == 1 ? "198.51.100.7" : nullptr, nullptr);
      CountingStore store;
      std::vector<std::string> errors(3);
      const auto t0 = std::chrono::steady_clock::now();
      on_threads(3, [&](int r) {
        CommConfig c;
        c.rank = r;
        c.size = 3;
        c.transport = transport;
        c.host = r == 0 ? "a" : "b";
        if (source == 0) c.tcp.listen_address = "198.51.100.7";
        auto comm = Communicator::create(c, store);
        errors[static_cast<size_t>(r)] = comm ? "created" : comm.status().message();
      });
      EXPECT_LT(std::chrono::steady_clock::now() - t0, 10s) << "a rank waited for its peers";
      EXPECT_EQ(store.sets.load(), 0) << "a rank wrote to the store before failing";
      for (int r = 0; r < 3; ++r) {
        const std::string& e = errors[static_cast<size_t>(r)];
        EXPECT_EQ(e.rfind("rank " + std::to_string(r) + ": creating the communicator: " +
                              (source == 0 ? "listen_address" : "WEFT_LISTEN_ADDR") +
                              "='198.51.100.7' is not an address of this host (its IPv4 addresses: ",
                          0),
                  0u)
            << e;
      }
    }
  }
}

TEST(ListenAddress, RanksThatAreThreadsOfOneProcessListenOnLoopbackUnlessOverridden) {
  for (const char* listen : {"", "127.0.0.2"}) {
    ListenEnv env(*listen ? listen : nullptr, nullptr);
    MemoryStore store;
    std::vector<std::string> published(2);
    on_threads(2, [&](int r) {
      CommConfig c;
      c.rank = r;
      c.size = 2;
      c.host = r == 0 ? "a" : "b";  // two pretend hosts: TCP between them
      auto comm = Communicator::create(c, store);
      ASSERT_TRUE(comm) << comm.status().to_string();
      auto addr = store.get("weft/tcp/" + std::to_string(r), std::chrono::steady_clock::now() + 1s);
      ASSERT_TRUE(addr) << addr.status().to_string();
      published[static_cast<size_t>(r)] = addr->substr(0, addr->rfind(':'));
      int v = r + 1;
      ASSERT_TRUE((*comm)->allreduce(&v, &v, 1, DataType::kI32, ReduceOp::kSum));
      EXPECT_EQ(v, 3);
    });
    for (const std::string& p : published) EXPECT_EQ(p, *listen ? listen : "127.0.0.1");
  }
}

TEST(ListenAddress, TheLaunchEnvironmentRejectsAWrongOverrideBeforeAnyStoreIsOpened) {
  ListenEnv env(nullptr, "=nosuch0");
  ::setenv("RANK", "0", 1);
  ::setenv("WORLD_SIZE", "2", 1);
  ::setenv("MASTER_ADDR", "127.0.0.1", 1);
  ::setenv("MASTER_PORT", "29500", 1);
  auto info = launch_info_from_env();
  EXPECT_EQ(info.status().code(), StatusCode::kNotFound);
  EXPECT_EQ(info.status().message().rfind("environment: WEFT_SOCKET_IFNAME='=nosuch0' matches no IPv4 interface "
                                          "that is up (this host's: lo 127.0.0.1",
                                          0),
            0u)
      << info.status().message();
  {
    ListenEnv fine(nullptr, "lo");
    EXPECT_TRUE(launch_info_from_env()) << "an interface of this host was refused";
  }
  for (const char* v : {"RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"}) ::unsetenv(v);
}

TEST(CApi, ConfigInitLeavesTheListenFieldsUnsetAndAWrongOverrideIsOneError) {
  weft_comm_config_t c;
  std::memset(&c, 0xab, sizeof c);
  weft_comm_config_init(&c);
  EXPECT_EQ(c.listen_address, nullptr);
  EXPECT_EQ(c.socket_ifname, nullptr);
  const std::string dir = ::testing::TempDir() + "weft-listen-c-" + std::to_string(::getpid());
  std::filesystem::create_directories(dir);
  const std::string store = "file:" + dir;
  c.store = store.c_str();
  c.transport = "tcp";
  c.listen_address = "198.51.100.7";
  weft_comm_t* comm = nullptr;
  EXPECT_EQ(weft_comm_create(&c, &comm), WEFT_INVALID_ARGUMENT);
  EXPECT_EQ(std::string(weft_last_error()).rfind("rank 0: listen_address='198.51.100.7' "
                                                 "is not an address of this host",
                                                 0),
            0u)
      << weft_last_error();
  c.listen_address = nullptr;
  c.socket_ifname = "=nosuch0";
  EXPECT_EQ(weft_comm_create(&c, &comm), WEFT_NOT_FOUND);
  EXPECT_EQ(std::string(weft_last_error()).rfind("rank 0: socket_ifname='=nosuch0' "
                                                 "matches no IPv4 interface that is up",
                                                 0),
            0u)
      << weft_last_error();
  EXPECT_TRUE(std::filesystem::is_empty(dir)) << "a failed create wrote to the store";
  c.socket_ifname = "lo";
  ASSERT_EQ(weft_comm_create(&c, &comm), WEFT_OK) << weft_last_error();
  weft_comm_destroy(comm);
  std::filesystem::remove_all(dir);
}

// The address a connected socket's end `local` (getsockname) or `peer`
// (getpeername) has.
std::string address_of(int fd, bool local) {
  sockaddr_in a{};
  socklen_t len = sizeof a;
  const int rc = local ? ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len)
                       : ::getpeername(fd, reinterpret_cast<sockaddr*>(&a), &len);
  if (rc != 0) return "?";
  char text[INET_ADDRSTRLEN] = {};
  ::inet_ntop(AF_INET, &a.sin_addr, text, sizeof text);
  return text;
}

struct SourceCase {
  const char* local_address;  // connect_to's
  bool planned_port;
  const char* leaves_from;    // the source address the listener sees
};
void PrintTo(const SourceCase& c, std::ostream* os) {
  *os << "'" << c.local_address << "' " << (c.planned_port ? "planned port" : "ephemeral port");
}

class ConnectionSource : public ::testing::TestWithParam<SourceCase> {};

// A rank's connections leave from its listen address with a planned port
// and with an ephemeral one alike: on a host with a NIC per rank the
// kernel's own choice would be the main table's NIC, another rank's. All of
// 127/8 is this host's (loopback), so 127.0.0.2 stands in for a second NIC.
TEST_P(ConnectionSource, LeavesFromTheRanksAddressWhateverItsPort) {
  const SourceCase& c = GetParam();
  tcp::Endpoint at;
  auto listener = tcp::listen_on("127.0.0.1", 0, &at);
  ASSERT_TRUE(listener.is_ok()) << listener.status().to_string();
  uint16_t sport = 0;
  if (c.planned_port) {
    tcp::Endpoint spare;
    auto probe = tcp::listen_on("127.0.0.1", 0, &spare);  // a port free a moment ago
    ASSERT_TRUE(probe.is_ok());
    sport = spare.port;
  }
  auto fd = tcp::connect_to(at, c.local_address, sport, 1 << 16, std::chrono::steady_clock::now() + 2s);
  ASSERT_TRUE(fd.is_ok()) << fd.status().to_string();
  const int accepted = ::accept(listener->get(), nullptr, nullptr);
  ASSERT_GE(accepted, 0);
  tcp::Fd hold(accepted);
  EXPECT_EQ(address_of(fd->get(), true), c.leaves_from);
  EXPECT_EQ(address_of(accepted, false), c.leaves_from);
  if (c.planned_port) {
    EXPECT_EQ(tcp::local_port(fd->get()), sport);
  }
}

INSTANTIATE_TEST_SUITE_P(Sources, ConnectionSource,
                         ::testing::Values(SourceCase{"127.0.0.2", false, "127.0.0.2"},
                                           SourceCase{"127.0.0.3", true, "127.0.0.3"},
                                           SourceCase{"0.0.0.0", false, "127.0.0.1"},
                                           SourceCase{"", false, "127.0.0.1"}));

}  // namespace
}  // namespace weft::coll::internal
