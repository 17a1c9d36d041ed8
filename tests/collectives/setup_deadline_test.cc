// One deadline for a communicator's whole setup: the store reached late
// leaves less time for the peers, and a store that stops answering a set
// is given up at that deadline, not after a fixed minute.
#include <gtest/gtest.h>
#include <sys/socket.h>

#include <chrono>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "bootstrap/store_wire.h"
#include "tcp/socket.h"
#include "weft/collectives/c_api.h"
#include "weft/collectives/communicator.h"
#include "weft/collectives/store.h"

namespace weft::coll {
namespace {

using std::chrono::milliseconds;

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// A free port on 127.0.0.1, closed again: a store is started there later.
uint16_t unused_port() {
  tcp::Endpoint bound;
  auto fd = tcp::listen_on("127.0.0.1", 0, &bound);
  EXPECT_TRUE(fd) << fd.status().to_string();
  return bound.port;
}

// Rank 1 of 2 through the C API, its store served (by a bare TcpStore, as
// rank 0's process would) only `late_ms` after it starts; rank 0 never
// comes. The create must fail within the one timeout, not store wait +
// timeout.
TEST(SetupDeadline, ACApiCreateWhoseStoreComesLateFailsWithinItsOneTimeout) {
  const uint16_t port = unused_port();
  const std::string spec = "tcp://127.0.0.1:" + std::to_string(port);
  constexpr int kTimeoutMs = 2000, kLateMs = 1400;
  weft_comm_config_t c;
  ASSERT_EQ(weft_comm_config_init(&c), WEFT_OK);
  c.rank = 1;
  c.size = 2;
  c.store = spec.c_str();
  c.transport = "tcp";
  c.timeout_ms = kTimeoutMs;
  weft_status_t rc = WEFT_OK;
  double took = 0;
  const auto t0 = Clock::now();
  std::thread rank1([&] {
    weft_comm_t* comm = nullptr;
    rc = weft_comm_create(&c, &comm);
    took = seconds_since(t0);
    if (comm) weft_comm_destroy(comm);
  });
  std::this_thread::sleep_for(milliseconds(kLateMs));
  auto server = TcpStore::open("127.0.0.1", port, true, Clock::now() + std::chrono::seconds(5));
  ASSERT_TRUE(server) << server.status().to_string();
  rank1.join();
  EXPECT_EQ(rc, WEFT_DEADLINE_EXCEEDED) << weft_last_error();
  EXPECT_GE(took, kTimeoutMs / 1000.0 - 0.05);
  // The old setup restarted its timeout once the store answered: 3.4 s.
  EXPECT_LT(took, (kTimeoutMs + kLateMs / 2) / 1000.0) << weft_last_error();
}

// The C++ create with a deadline of its own, shorter than the config's
// timeout (60 s here): the deadline bounds the setup.
TEST(SetupDeadline, CreateHonoursTheDeadlineItIsGivenOverTheConfigTimeout) {
  MemoryStore store;
  CommConfig cfg;
  cfg.rank = 0;
  cfg.size = 2;
  cfg.transport = "tcp";
  cfg.timeout = milliseconds(60000);
  const auto t0 = Clock::now();
  auto comm = Communicator::create(cfg, store, Clock::now() + milliseconds(300));
  const double took = seconds_since(t0);
  ASSERT_FALSE(comm);
  EXPECT_EQ(comm.status().code(), StatusCode::kDeadlineExceeded) << comm.status().to_string();
  EXPECT_NE(comm.status().message().find("host/1"), std::string::npos) << comm.status().to_string();
  EXPECT_GE(took, 0.25);
  EXPECT_LT(took, 5.0);
}

// A store that lets the client in and then answers nothing (its host hung):
// set_by gives up at its deadline; set() without one after its minute.
TEST(SetupDeadline, ASetToAStoreThatStoppedAnsweringEndsAtItsDeadline) {
  tcp::Endpoint bound;
  auto listener = tcp::listen_on("127.0.0.1", 0, &bound);
  ASSERT_TRUE(listener) << listener.status().to_string();
  std::string request;
  std::thread silent([&] {
    // store.h, "Protocol": the challenge after the hello, the server's
    // proof (zeros without a secret) after the client's; then silence.
    const int fd = ::accept(listener->get(), nullptr, nullptr);
    ASSERT_GE(fd, 0);
    tcp::Fd conn(fd);
    const Deadline d = Clock::now() + std::chrono::seconds(10);
    auto reply = [&](size_t payload) {
      std::string r;
      store_wire::put32(r, store_wire::kOk);
      store_wire::put32(r, static_cast<uint32_t>(payload));
      r += std::string(payload, '\0');
      ASSERT_TRUE(tcp::write_all(fd, r.data(), r.size(), d));
    };
    std::string in(store_wire::kHelloBytes, '\0');
    ASSERT_TRUE(tcp::read_all(fd, in.data(), in.size(), d));
    reply(store_wire::kChallengeBytes);
    in.assign(store_wire::kProofBytes, '\0');
    ASSERT_TRUE(tcp::read_all(fd, in.data(), in.size(), d));
    reply(store_wire::kProofBytes);
    request.assign(store_wire::kRequestHeader, '\0');
    ASSERT_TRUE(tcp::read_all(fd, request.data(), request.size(), d));
    char c;
    while (tcp::read_all(fd, &c, 1, d)) {
    }  // the rest of the request, then until the client hangs up
  });
  auto client = TcpStore::open("127.0.0.1", bound.port, false, Clock::now() + std::chrono::seconds(5));
  ASSERT_TRUE(client) << client.status().to_string();
  Store& store = **client;
  const auto t0 = Clock::now();
  const Status s = store.set_by("weft/host/0", "h", Clock::now() + milliseconds(400));
  const double took = seconds_since(t0);
  client->reset();  // the server's read ends
  silent.join();
  EXPECT_EQ(s.code(), StatusCode::kDeadlineExceeded) << s.to_string();
  EXPECT_NE(s.message().find("set 'weft/host/0'"), std::string::npos) << s.to_string();
  EXPECT_GE(took, 0.35);
  EXPECT_LT(took, 5.0);
  ASSERT_EQ(request.size(), store_wire::kRequestHeader);
  EXPECT_EQ(store_wire::get32(request.data()), 1u) << "the request was a set";
}

// A store that records every key set: a create refused before setup wrote none.
class RecordingStore final : public Store {
 public:
  Status set(const std::string& key, const std::string& value) override {
    keys.push_back(key);
    return inner.set(key, value);
  }
  Result<std::string> get(const std::string& key, std::chrono::steady_clock::time_point deadline) override {
    return inner.get(key, deadline);
  }
  std::vector<std::string> keys;
  MemoryStore inner;
};

struct BadOption {
  const char* name;
  std::function<void(CommConfig&)> set;
  const char* says;
};
void PrintTo(const BadOption& b, std::ostream* os) { *os << b.name; }

class SetupBadOption : public ::testing::TestWithParam<BadOption> {};

// Transport options used to be checked only when the transport was made,
// after the host exchange: the rank with the bad value failed there, and
// its peers waited for it until their deadline. Now create() refuses them
// first, at once, naming the value, before the store sees a key.
TEST_P(SetupBadOption, IsRefusedAtOnceNamingItBeforeTheStoreIsWritten) {
  CommConfig cfg;
  cfg.rank = 0;
  cfg.size = 2;
  cfg.timeout = std::chrono::seconds(30);
  GetParam().set(cfg);
  RecordingStore store;
  const auto t0 = Clock::now();
  auto comm = Communicator::create(cfg, store);
  ASSERT_FALSE(comm);
  EXPECT_EQ(comm.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(comm.status().message(), GetParam().says);
  EXPECT_TRUE(store.keys.empty()) << store.keys.front();
  EXPECT_LT(seconds_since(t0), 1.0);
}

INSTANTIATE_TEST_SUITE_P(
    Collectives, SetupBadOption,
    ::testing::Values(
        BadOption{"tcp_connections", [](CommConfig& c) { c.tcp.connections_per_peer = 65; },
                  "communicator: tcp: connections_per_peer must be in 1..64 (got 65)"},
        BadOption{"tcp_buffer", [](CommConfig& c) { c.tcp.socket_buffer_bytes = 4095; },
                  "communicator: tcp: socket_buffer_bytes must be >= 4096 (got 4095)"},
        BadOption{"shm_slots", [](CommConfig& c) { c.shm.slots = 1; },
                  "communicator: shm: slots must be in 2..1024 (got 1)"},
        BadOption{"shm_slot_bytes", [](CommConfig& c) { c.shm.slot_bytes = 4097; },
                  "communicator: shm: slot_bytes must be a multiple of 64, >= 4096 (got 4097)"},
        BadOption{"verbs_depth", [](CommConfig& c) { c.verbs.queue_depth = 3; },
                  "communicator: verbs: queue_depth must be in 4..4096 (got 3)"}),
    [](const ::testing::TestParamInfo<BadOption>& i) { return std::string(i.param.name); });

}  // namespace
}  // namespace weft::coll
