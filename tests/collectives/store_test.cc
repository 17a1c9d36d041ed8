// The TCP rendezvous store (store.h): waiting gets, size limits (the client
// refuses, the server answers and skips), the store filling up, the shared
// secret both ways, one port served twice in one process, the options from
// the environment and the address the server listens on.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <string>
#include <thread>
#include <utility>

#include <fmt/format.h>

#include "harness.h"
#include "store_raw_client.h"

namespace weft::coll::testing {
namespace {

using namespace std::chrono_literals;

Result<std::unique_ptr<TcpStore>> serve(const TcpStoreOptions& o = {}) {
  return TcpStore::open("127.0.0.1", 0, true, Clock::now() + 10s, o);
}
TEST(TcpStore, GetWaitsForALaterSetFromAnotherClient) {
  auto server = serve();
  ASSERT_TRUE(server) << server.status().to_string();
  auto other = store_client((*server)->port());  // another rank's client
  ASSERT_TRUE(other) << other.status().to_string();
  std::thread late([&] {
    std::this_thread::sleep_for(100ms);
    EXPECT_TRUE((*other)->set("k", std::string("v\0w", 3)));
  });
  auto v = (*server)->get("k", Clock::now() + 10s);
  late.join();
  ASSERT_TRUE(v) << v.status().to_string();
  EXPECT_EQ(*v, std::string("v\0w", 3));
  auto missing = (*other)->get("never", Clock::now() + 100ms);
  EXPECT_EQ(missing.status().code(), StatusCode::kDeadlineExceeded);
  EXPECT_EQ(missing.status().message(), "TCP store: key 'never' was not set in time");
}

struct Sizes {
  size_t key, value;
  std::string message;  // "" = accepted
};
std::ostream& operator<<(std::ostream& o, const Sizes& s) { return o << "key " << s.key << ", value " << s.value; }

class StoreSizes : public ::testing::TestWithParam<Sizes> {};

TEST_P(StoreSizes, OversizeIsRefusedWithAMessageAndTheClientGoesOn) {
  const Sizes& c = GetParam();
  auto server = serve();
  ASSERT_TRUE(server) << server.status().to_string();
  auto cl = store_client((*server)->port());
  ASSERT_TRUE(cl) << cl.status().to_string();
  const std::string key(c.key, 'k'), value(c.value, 'v');
  Status s = (*cl)->set(key, value);
  if (c.message.empty()) {
    ASSERT_TRUE(s) << s.to_string();
    auto got = (*cl)->get(key, Clock::now() + 5s);
    ASSERT_TRUE(got) << got.status().to_string();
    EXPECT_EQ(*got, value);
  } else {
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(s.message(), "TCP store set '" + key.substr(0, 64) + "': " + c.message);
  }
  ASSERT_TRUE((*cl)->set("after", "1"));
  auto after = (*cl)->get("after", Clock::now() + 5s);
  ASSERT_TRUE(after) << after.status().to_string();
  EXPECT_EQ(*after, "1");
}

INSTANTIATE_TEST_SUITE_P(
    Limits, StoreSizes,
    ::testing::Values(
        Sizes{1024, 1 << 20, ""}, Sizes{1, 0, ""}, Sizes{0, 7, ""},
        Sizes{1025, 3, "key of 1025 bytes is over the store's limit of 1024 bytes (TcpStoreLimits::max_key_bytes)"},
        Sizes{13, (1 << 20) + 1,
              "value of 1048577 bytes is over the store's limit of 1048576 bytes (TcpStoreLimits::max_value_bytes)"}));

struct RawOversize {
  uint32_t klen, vlen;
  bool send_body;  // false: the client claims the sizes and sends nothing more
  std::string message;
};
std::ostream& operator<<(std::ostream& o, const RawOversize& r) { return o << r.klen << "/" << r.vlen; }

class StoreRawOversize : public ::testing::TestWithParam<RawOversize> {};

// A client that does not check the limits itself (another implementation,
// or a hostile one) gets the message; the server skips the request's bytes
// without holding them, and serves this connection and others on.
TEST_P(StoreRawOversize, IsAnsweredSkippedAndTheStoreKeepsServing) {
  const RawOversize& c = GetParam();
  auto server = serve();
  ASSERT_TRUE(server) << server.status().to_string();
  ASSERT_TRUE((*server)->set("there", "yes"));
  RawStoreClient raw((*server)->port());
  ASSERT_TRUE(raw.handshake());
  raw.send(store_request(store_wire::kSet, c.klen, c.vlen,
                         c.send_body ? std::string(size_t{c.klen} + c.vlen, 'x') : std::string()));
  auto r = raw.reply();
  EXPECT_EQ(r.first, store_wire::kError);
  EXPECT_EQ(r.second, c.message);
  if (c.send_body) {  // still in step: the next request is read as one
    raw.send(store_request(store_wire::kGet, 5, 0, "there"));
    r = raw.reply();
    EXPECT_EQ(r.first, store_wire::kOk);
    EXPECT_EQ(r.second, "yes");
  }
  auto other = store_client((*server)->port());
  ASSERT_TRUE(other) << other.status().to_string();
  auto v = (*other)->get("there", Clock::now() + 5s);
  ASSERT_TRUE(v) << v.status().to_string();
  EXPECT_EQ(*v, "yes");
  EXPECT_EQ((*server)->counters().oversize, 1u);
  EXPECT_EQ((*server)->counters().garbage, 0u);
}

INSTANTIATE_TEST_SUITE_P(
    Limits, StoreRawOversize,
    ::testing::Values(
        RawOversize{1025, 0, true, "key of 1025 bytes is over the store's limit of 1024 bytes (TcpStoreLimits::max_key_bytes)"},
        RawOversize{3, (1 << 20) + 1, true,
                    "value of 1048577 bytes is over the store's limit of 1048576 bytes (TcpStoreLimits::max_value_bytes)"},
        RawOversize{0xffffffffu, 0xffffffffu, false,
                    "key of 4294967295 bytes is over the store's limit of 1024 bytes (TcpStoreLimits::max_key_bytes)"},
        RawOversize{7, 0x40000000u, false,
                    "value of 1073741824 bytes is over the store's limit of 1048576 bytes (TcpStoreLimits::max_value_bytes)"}));

TEST(TcpStore, AFullStoreRefusesSetsWithAMessageAndKeepsServing) {
  TcpStoreOptions o;
  o.limits.max_total_bytes = 3 * (64 + 2 + 10);  // three keys "kN" with 10-byte values
  auto server = serve(o);
  ASSERT_TRUE(server) << server.status().to_string();
  for (int i = 0; i < 3; ++i) ASSERT_TRUE((*server)->set("k" + std::to_string(i), std::string(10, 'v')));
  Status s = (*server)->set("k3", std::string(10, 'v'));
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(s.message(), "TCP store set 'k3': the store is full: 228 bytes held, a set of 76 more would pass the "
                         "limit of 228 (TcpStoreLimits::max_total_bytes)");
  // Replacing a value with one of the same size fits.
  EXPECT_TRUE((*server)->set("k1", std::string(10, 'w')));
  auto v = (*server)->get("k1", Clock::now() + 5s);
  ASSERT_TRUE(v) << v.status().to_string();
  EXPECT_EQ(*v, std::string(10, 'w'));
  EXPECT_EQ((*server)->counters().full, 1u);
}

struct SecretCase {
  std::string server, client;
  std::string message;  // the client's, after "TCP store at 127.0.0.1:<port>: "
};
std::ostream& operator<<(std::ostream& o, const SecretCase& c) {
  return o << "server '" << c.server << "', client '" << c.client << "'";
}

class StoreSecret : public ::testing::TestWithParam<SecretCase> {};

TEST_P(StoreSecret, AClientWithoutTheRightSecretIsRefusedAndCounted) {
  const SecretCase& c = GetParam();
  TcpStoreOptions so, co;
  so.secret = c.server;
  co.secret = c.client;
  auto server = serve(so);
  ASSERT_TRUE(server) << server.status().to_string();
  ASSERT_TRUE((*server)->set("addr", "10.0.0.1:1234"));
  auto cl = store_client((*server)->port(), co);
  ASSERT_FALSE(cl);
  EXPECT_EQ(cl.status().code(), StatusCode::kPermissionDenied);
  EXPECT_EQ(cl.status().message(), fmt::format("TCP store at 127.0.0.1:{}: {}", (*server)->port(), c.message));
  EXPECT_EQ((*server)->counters().refused, 1u);
  // One with the server's secret is let in and reads what was set.
  auto good = store_client((*server)->port(), so);
  ASSERT_TRUE(good) << good.status().to_string();
  auto v = (*good)->get("addr", Clock::now() + 5s);
  ASSERT_TRUE(v) << v.status().to_string();
  EXPECT_EQ(*v, "10.0.0.1:1234");
  EXPECT_EQ((*server)->counters().refused, 1u);
}

INSTANTIATE_TEST_SUITE_P(
    Secrets, StoreSecret,
    ::testing::Values(
        SecretCase{"correct horse battery", "correct horse battery staple",
                   "refused: wrong store secret (WEFT_STORE_SECRET or WEFT_STORE_SECRET_FILE differs from rank 0's)"},
        SecretCase{"correct horse battery", "",
                   "refused: this store requires a shared secret (WEFT_STORE_SECRET or WEFT_STORE_SECRET_FILE) and "
                   "this process has none"},
        SecretCase{"", "correct horse battery",
                   "refused: this process has a store secret but the store was started without one (give rank 0 "
                   "the same WEFT_STORE_SECRET or WEFT_STORE_SECRET_FILE)"}));

// Rank 0 of two communicators alive at once on one store opens it twice:
// the second shares the server the first started (binding the port again
// would fail), the server lives while either store does, and the port is
// free once both are gone.
TEST(TcpStore, TwoStoresServingOnePortInOneProcessShareOneServer) {
  auto first = serve();
  ASSERT_TRUE(first) << first.status().to_string();
  const uint16_t port = (*first)->port();
  auto second = TcpStore::open("127.0.0.1", port, true, Clock::now() + 10s);
  ASSERT_TRUE(second) << second.status().to_string();
  EXPECT_EQ((*second)->port(), port);
  ASSERT_TRUE((*first)->set("k", "one"));
  auto v = (*second)->get("k", Clock::now() + 5s);
  ASSERT_TRUE(v) << v.status().to_string();
  EXPECT_EQ(*v, "one");
  EXPECT_EQ((*second)->counters().accepted, 2u);  // both clients, one server
  first->reset();
  ASSERT_TRUE((*second)->set("k", "two"));
  auto other = store_client(port);
  ASSERT_TRUE(other) << other.status().to_string();
  v = (*other)->get("k", Clock::now() + 5s);
  ASSERT_TRUE(v) << v.status().to_string();
  EXPECT_EQ(*v, "two");
  other->reset();
  second->reset();
  // A new server on the port: nothing of the old one's keys.
  auto again = TcpStore::open("127.0.0.1", port, true, Clock::now() + 10s);
  ASSERT_TRUE(again) << again.status().to_string();
  EXPECT_EQ((*again)->counters().accepted, 1u);
  EXPECT_EQ((*again)->get("k", Clock::now() + 100ms).status().code(), StatusCode::kDeadlineExceeded);
}

TEST(TcpStore, ServingAPortThisProcessServesWithAnotherSecretIsRefused) {
  TcpStoreOptions secret;
  secret.secret = "correct horse battery";
  auto first = serve(secret);
  ASSERT_TRUE(first) << first.status().to_string();
  const uint16_t port = (*first)->port();
  auto bare = TcpStore::open("127.0.0.1", port, true, Clock::now() + 10s);
  ASSERT_FALSE(bare);
  EXPECT_EQ(bare.status().message(),
            fmt::format("serving the TCP store on 127.0.0.1:{}: this process serves it already, with a secret", port));
  TcpStoreOptions other;
  other.secret = "another horse battery";
  auto wrong = TcpStore::open("127.0.0.1", port, true, Clock::now() + 10s, other);
  ASSERT_FALSE(wrong);
  EXPECT_EQ(wrong.status().message(),
            fmt::format("serving the TCP store on 127.0.0.1:{}: this process serves it already, with another secret",
                        port));
  auto same = TcpStore::open("127.0.0.1", port, true, Clock::now() + 10s, secret);
  ASSERT_TRUE(same) << same.status().to_string();
}

TEST(TcpStore, ASecretShorterThan16BytesIsRejected) {
  TcpStoreOptions o;
  o.secret = "fifteen bytes!!";
  auto s = serve(o);
  ASSERT_FALSE(s);
  EXPECT_EQ(s.status().message(), "TCP store: a secret of 15 bytes is too short (16 at least)");
}

// Environment variables of this test, removed again whatever happens.
struct Env {
  explicit Env(std::initializer_list<std::pair<const char*, std::string>> vars) {
    for (const auto& [k, v] : vars) {
      ::setenv(k, v.c_str(), 1);
      names.push_back(k);
    }
  }
  ~Env() {
    for (const char* k : names) ::unsetenv(k);
  }
  std::vector<const char*> names;
};

std::string secret_file(const std::string& text, mode_t mode) {
  char path[] = "/tmp/weft-store-secret-XXXXXX";
  const int fd = ::mkstemp(path);
  EXPECT_GE(fd, 0);
  EXPECT_EQ(::write(fd, text.data(), text.size()), static_cast<ssize_t>(text.size()));
  ::fchmod(fd, mode);
  ::close(fd);
  return path;
}

TEST(TcpStoreEnv, SecretAndBindAddressComeFromTheEnvironment) {
  {
    Env e{{"WEFT_STORE_SECRET", "sixteen bytes ok"}, {"WEFT_STORE_BIND", "0.0.0.0"}};
    auto o = tcp_store_options_from_env();
    ASSERT_TRUE(o) << o.status().to_string();
    EXPECT_EQ(o->secret, "sixteen bytes ok");
    EXPECT_EQ(o->bind_address, "0.0.0.0");
  }
  const std::string good = secret_file("from a file, 16+ bytes\n", 0600);
  const std::string loose = secret_file("from a file, 16+ bytes\n", 0640);
  {
    Env e{{"WEFT_STORE_SECRET_FILE", good}};
    auto o = tcp_store_options_from_env();
    ASSERT_TRUE(o) << o.status().to_string();
    EXPECT_EQ(o->secret, "from a file, 16+ bytes");
    EXPECT_EQ(o->bind_address, "");
  }
  {
    Env e{{"WEFT_STORE_SECRET_FILE", loose}};
    EXPECT_EQ(tcp_store_options_from_env().status().message(),
              "WEFT_STORE_SECRET_FILE: secret file " + loose + " is readable by others (chmod 600 it)");
  }
  {
    Env e{{"WEFT_STORE_SECRET", "short"}};
    EXPECT_EQ(tcp_store_options_from_env().status().message(), "environment: WEFT_STORE_SECRET is shorter than 16 bytes");
  }
  {
    Env e{{"WEFT_STORE_SECRET", "sixteen bytes ok"}, {"WEFT_STORE_SECRET_FILE", good}};
    EXPECT_EQ(tcp_store_options_from_env().status().message(),
              "environment: set WEFT_STORE_SECRET or WEFT_STORE_SECRET_FILE, not both");
  }
  ::unlink(good.c_str());
  ::unlink(loose.c_str());
}

// Whether a TCP connection to address:port is accepted (connect_to retries
// a refused one until its deadline).
bool accepts(const std::string& address, uint16_t port) {
  return tcp::connect_to(tcp::Endpoint{address, port}, "0.0.0.0", 0, 1 << 16, Clock::now() + 300ms).is_ok();
}

// A socket bound to the very address and port it connects to meets its
// own SYN (a TCP simultaneous open) and is connected to itself; the library
// treats that as the refusal it is, not as the peer that was asked for.
TEST(TcpConnect, AConnectionToItselfIsARefusalNotAPeer) {
  tcp::Fd probe(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  ASSERT_TRUE(probe);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  ASSERT_EQ(::bind(probe.get(), reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  ASSERT_EQ(::getsockname(probe.get(), reinterpret_cast<sockaddr*>(&a), &len), 0);
  const uint16_t port = ntohs(a.sin_port);
  probe = tcp::Fd();  // free to be bound again, with nobody listening on it
  auto self = tcp::connect_to(tcp::Endpoint{"127.0.0.1", port}, "127.0.0.1", port, 1 << 16, Clock::now() + 2s,
                              /*retry_refused=*/false);
  ASSERT_FALSE(self);
  EXPECT_EQ(self.status().message(),
            fmt::format("connect to 127.0.0.1:{} from port {}: Connection refused", port, port));
}

// The ports port 0 and connect(2) may hand out (ip(7),
// ip_local_port_range). Other tests running alongside get theirs from here,
// so one of them may listen on 127.0.0.1 at the very port a store took on
// 127.0.0.2; a port outside this range is taken by nobody who did not ask
// for it.
std::pair<int, int> ephemeral_ports() {
  std::ifstream f("/proc/sys/net/ipv4/ip_local_port_range");
  int lo = 32768, hi = 60999;
  f >> lo >> hi;
  return {lo, hi};
}

// Opens a store at `address` on a port outside the ephemeral range.
Result<std::unique_ptr<TcpStore>> serve_on_a_quiet_port(const std::string& address, const TcpStoreOptions& o = {}) {
  const auto [lo, hi] = ephemeral_ports();
  const bool above = 65535 - hi >= lo - 1024;
  const int first = above ? hi + 1 : 1024, count = above ? 65535 - hi : lo - 1024;
  Status last = ok_status();
  for (int i = 0; i < 64 && count > 0; ++i) {
    const auto port = static_cast<uint16_t>(first + (::getpid() * 131 + i * 977) % count);
    auto s = TcpStore::open(address, port, true, Clock::now() + 10s, o);
    if (s || s.status().message().find(": bind ") == std::string::npos) return s;  // only a taken port is retried
    last = s.status();
  }
  return last.is_ok() ? unavailable("no port outside the ephemeral range") : last;
}

TEST(TcpStoreBind, TheServerListensOnTheAddressItIsOpenedAtUnlessOverridden) {
  // Every 127/8 address is this host's (loopback), so two of them stand for
  // two interfaces.
  auto at2 = serve_on_a_quiet_port("127.0.0.2");
  ASSERT_TRUE(at2) << at2.status().to_string();
  EXPECT_TRUE(accepts("127.0.0.2", (*at2)->port()));
  EXPECT_FALSE(accepts("127.0.0.1", (*at2)->port()));
  TcpStoreOptions any;
  any.bind_address = "0.0.0.0";
  auto everywhere = serve_on_a_quiet_port("127.0.0.2", any);
  ASSERT_TRUE(everywhere) << everywhere.status().to_string();
  EXPECT_TRUE(accepts("127.0.0.2", (*everywhere)->port()));
  EXPECT_TRUE(accepts("127.0.0.1", (*everywhere)->port()));
}

TEST(TcpStoreBind, AnAddressThatIsNotThisHostsSaysWhatToSet) {
  // 192.0.2.1 (TEST-NET-1, RFC 5737) is no address of this host: bind(2)
  // fails before anything is sent.
  auto s = TcpStore::open("192.0.2.1", 0, true, Clock::now() + 1s);
  ASSERT_FALSE(s);
  EXPECT_EQ(s.status().message(),
            "serving the TCP store: bind 192.0.2.1:0: Cannot assign requested address (the store listens on "
            "MASTER_ADDR or WEFT_STORE_BIND, which must be an address of rank 0's host; WEFT_STORE_BIND=0.0.0.0 "
            "listens on every address)");
  TcpStoreOptions elsewhere;
  elsewhere.bind_address = "192.0.2.1";
  auto bound = TcpStore::open("127.0.0.1", 0, true, Clock::now() + 1s, elsewhere);
  ASSERT_FALSE(bound);
  EXPECT_EQ(bound.status().message(),
            "WEFT_STORE_BIND: serving the TCP store: bind 192.0.2.1:0: Cannot assign requested address (the store "
            "listens on MASTER_ADDR or WEFT_STORE_BIND, which must be an address of rank 0's host; "
            "WEFT_STORE_BIND=0.0.0.0 listens on every address)");
}

// The store speaks IPv4: an IPv6 address, bare or in a URL's brackets, is
// refused at once, not asked again until the deadline.
class StoreIpv6 : public ::testing::TestWithParam<std::string> {};

TEST_P(StoreIpv6, AnIpv6HostIsRefusedAtOnceNamingIt) {
  for (const bool serve : {false, true}) {
    const auto t0 = Clock::now();
    auto s = TcpStore::open(GetParam(), 29500, serve, Clock::now() + 10s);
    ASSERT_FALSE(s);
    EXPECT_EQ(s.status().code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(s.status().message(),
              fmt::format("TCP store host '{}' is an IPv6 address: the store speaks IPv4 only (give rank 0's IPv4 "
                          "address, or a name that resolves to one)",
                          GetParam()));
    EXPECT_LT(Clock::now() - t0, 1s);
  }
}

INSTANTIATE_TEST_SUITE_P(Hosts, StoreIpv6, ::testing::Values("::1", "[::1]", "fd00::1", "[fd00::1]", "::ffff:10.0.0.1"),
                         [](const auto& p) { return fmt::format("host{}", p.index); });

// A port another process listens on (a listening socket of this test, which
// the store's server does not know): the usual cause is a second process
// that took rank 0, which the message names with the variables to check.
TEST(TcpStoreBind, APortAnotherProcessServesNamesASecondRankZero) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  ASSERT_EQ(::listen(fd, 1), 0);
  ASSERT_EQ(::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len), 0);
  const uint16_t port = ntohs(a.sin_port);
  auto s = TcpStore::open("127.0.0.1", port, true, Clock::now() + 1s);
  ::close(fd);
  ASSERT_FALSE(s);
  EXPECT_EQ(s.status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(s.status().message(),
            fmt::format("serving the TCP store: bind 127.0.0.1:{}: Address already in use (another process serves "
                        "this port: another job's store, so pick another port, or a second process that also took "
                        "rank 0: each process needs its own RANK, OMPI_COMM_WORLD_RANK or SLURM_PROCID, as torchrun, "
                        "mpirun and srun give them)",
                        port));
}

// WEFT_STORE_BIND naming another address of rank 0's host than the store's
// (its name maps to 127.0.1.1 there, while the other hosts resolve it to its
// network address, which the store is bound to): rank 0's own client
// connects where the server listens.
TEST(TcpStoreBind, RankZeroReachesAStoreBoundToAnotherOfItsAddresses) {
  TcpStoreOptions o;
  o.bind_address = "127.0.0.2";
  const auto start = Clock::now();
  auto rank0 = serve_on_a_quiet_port("127.0.0.1", o);
  ASSERT_TRUE(rank0) << rank0.status().to_string();
  EXPECT_LT(Clock::now() - start, 5s);
  const uint16_t port = (*rank0)->port();
  EXPECT_FALSE(accepts("127.0.0.1", port));
  auto other = TcpStore::open("127.0.0.2", port, false, Clock::now() + 10s);
  ASSERT_TRUE(other) << other.status().to_string();
  ASSERT_TRUE((*rank0)->set("k", "v"));
  auto v = (*other)->get("k", Clock::now() + 10s);
  ASSERT_TRUE(v) << v.status().to_string();
  EXPECT_EQ(*v, "v");
}

// torchrun users often give MASTER_ADDR as a host name: every rank
// resolves it (getaddrinfo(3)) and rank 0 listens on what it resolves to.
TEST(TcpStoreBind, AHostNameIsResolvedToItsIpv4Address) {
  auto named = TcpStore::open("localhost", 0, true, Clock::now() + 10s);
  ASSERT_TRUE(named) << named.status().to_string();
  EXPECT_TRUE(accepts("127.0.0.1", (*named)->port()));
  EXPECT_FALSE(accepts("127.0.0.2", (*named)->port())) << "localhost means this host only";
  auto other = TcpStore::open("localhost", (*named)->port(), false, Clock::now() + 10s);
  ASSERT_TRUE(other) << other.status().to_string();
  ASSERT_TRUE((*other)->set("k", "v"));
  auto v = (*named)->get("k", Clock::now() + 10s);
  ASSERT_TRUE(v);
  EXPECT_EQ(*v, "v");
}

// A name that does not resolve (yet: DNS may learn it after the ranks
// start) is asked again until the deadline, then named. .invalid never
// resolves (RFC 2606).
TEST(TcpStoreBind, ANameThatDoesNotResolveIsAskedAgainUntilTheDeadline) {
  const auto t0 = Clock::now();
  auto bad = TcpStore::open("no-such-host.invalid", 29999, false, Clock::now() + 400ms);
  const auto took = Clock::now() - t0;
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.status().code(), StatusCode::kDeadlineExceeded) << bad.status().to_string();
  EXPECT_NE(bad.status().message().find("TCP store host 'no-such-host.invalid' is neither an IPv4 address nor a name "
                                        "that resolves to one ("),
            std::string::npos)
      << bad.status().message();
  EXPECT_NE(bad.status().message().find("; asked until the deadline)"), std::string::npos) << bad.status().message();
  EXPECT_GE(took, 390ms);
}

// Debian and Ubuntu map a host's own name to 127.0.1.1 in /etc/hosts, while
// the other hosts of a job resolve it to the host's address on the network:
// served on loopback, the store would be unreachable from every other host.
// This host's name and the first IPv4 address it resolves to here, host
// order (0: it does not resolve).
std::pair<std::string, uint32_t> this_hosts_name() {
  char name[256] = {};
  if (::gethostname(name, sizeof name - 1) != 0) return {"", 0};
  addrinfo hints{};
  hints.ai_family = AF_INET;
  addrinfo* res = nullptr;
  if (::getaddrinfo(name, nullptr, &hints, &res) != 0 || !res) return {name, 0};
  const uint32_t first = ntohl(reinterpret_cast<const sockaddr_in*>(res->ai_addr)->sin_addr.s_addr);
  ::freeaddrinfo(res);
  return {name, first};
}

TEST(TcpStoreBind, AHostNameThisHostMapsToLoopbackIsServedOnEveryAddress) {
  const auto [name, first] = this_hosts_name();
  if (first == 0) GTEST_SKIP() << "this host's name '" << name << "' does not resolve";
  if (first >> 24 != 127) GTEST_SKIP() << "this host's name '" << name << "' resolves to an address on the network";
  auto s = serve_on_a_quiet_port(name);
  ASSERT_TRUE(s) << s.status().to_string();
  // 127.0.0.3 stands for the address the other hosts know this one by.
  EXPECT_TRUE(accepts("127.0.0.3", (*s)->port()));
  auto client = TcpStore::open(name, (*s)->port(), false, Clock::now() + 10s);
  ASSERT_TRUE(client) << client.status().to_string();
  ASSERT_TRUE((*client)->set("k", "v"));
  auto v = (*s)->get("k", Clock::now() + 10s);
  ASSERT_TRUE(v) << v.status().to_string();
  EXPECT_EQ(*v, "v");
}

// The same name with WEFT_STORE_BIND set (every rank reads it): rank 0
// listens there only, and the other ranks of its host, where the name maps
// to loopback too, connect there instead of to a loopback nobody serves.
TEST(TcpStoreBind, RanksOnRankZerosHostReachAStoreBoundAwayFromTheLoopbackTheNameMapsTo) {
  const auto [name, first] = this_hosts_name();
  if (first != 0x7f000001 && first != 0x7f000101) {
    GTEST_SKIP() << "this host's name '" << name << "' does not resolve to 127.0.0.1 or 127.0.1.1";
  }
  TcpStoreOptions o;
  o.bind_address = "127.0.0.2";  // stands for the address the other hosts know this one by
  auto rank0 = serve_on_a_quiet_port(name, o);
  ASSERT_TRUE(rank0) << rank0.status().to_string();
  const uint16_t port = (*rank0)->port();
  EXPECT_FALSE(accepts(first == 0x7f000001 ? "127.0.0.1" : "127.0.1.1", port));
  const auto t0 = Clock::now();
  auto local = TcpStore::open(name, port, false, Clock::now() + 3s, o);
  ASSERT_TRUE(local) << local.status().to_string();
  EXPECT_LT(Clock::now() - t0, 1s);
  ASSERT_TRUE((*local)->set("k", "v"));
  auto v = (*rank0)->get("k", Clock::now() + 10s);
  ASSERT_TRUE(v) << v.status().to_string();
  EXPECT_EQ(*v, "v");
}

}  // namespace
}  // namespace weft::coll::testing
