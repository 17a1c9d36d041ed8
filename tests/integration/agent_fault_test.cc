// 10,000 forged, malformed, truncated, replayed and wrong-key packets at a
// reflector, and 10,000 bad messages at the control plane, while a campaign
// runs: the agent stays up, every rejection is counted by reason (and the
// reflector's reach the campaign's rejections table), and the database holds
// exactly the campaign's genuine observations.
#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sched.h>
#include <sys/socket.h>

#include <chrono>
#include <fstream>
#include <sstream>
#include <thread>

#include <fmt/format.h>

#include "agent_fleet.h"
#include "loopback.h"
#include "weft/agent/control.h"
#include "weft/probe/wire.h"

namespace weft::test {
namespace {

using nlohmann::json;

// The test's view of the agent: a blocking client that speaks the sealed
// channel once authenticated (tests/agent/loopback.h).
using agent::testing::Client;

void enter_netns(const std::string& ns) {
  const int fd = ::open(("/run/netns/" + ns).c_str(), O_RDONLY | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::setns(fd, CLONE_NEWNET), 0);
  ::close(fd);
}

bool count_positive(db::Database& db) {
  auto n = db.query_int("SELECT COUNT(*) FROM observations");
  return n && *n > 0;
}

std::string slurp(const std::string& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

TEST(AgentFaultTest, FloodsOfBadPacketsAndMessagesAreCountedByReasonAndNeverStored) {
  WEFT_SKIP_UNLESS_NETNS();
  auto fabric = NetnsFabric::create(FabricOptions::clos(2, 2, 2));
  ASSERT_TRUE(fabric) << fabric.status().to_string();
  NetnsFabric& f = **fabric;
  const std::string dir = fmt::format("/tmp/weft-fault-test-{}", ::getpid());
  auto fleet = AgentFleet::start(f, dir);
  ASSERT_TRUE(fleet) << fleet.status().to_string();
  auto secret = agent::load_secret((*fleet)->secret_path());
  ASSERT_TRUE(secret);

  // A campaign of ~6 s (192 probes per host at 30/s, reported every 16 ports)
  // runs while we attack h2-1.
  const pid_t ctl = (*fleet)->probe_async("--ports 64 --rate 30 --port-window 16");
  ASSERT_GT(ctl, 0);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  for (;;) {
    db::OpenOptions ro;
    ro.read_only = true;
    auto db = db::Database::open((*fleet)->db_path(), ro);
    if (db && count_positive(*db)) break;
    ASSERT_LT(std::chrono::steady_clock::now(), deadline) << "campaign never started: " << slurp(dir + "/probe.err");
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }

  json status;
  std::thread attacker([&] {
    enter_netns(f.host("h1-2").ns);
    Client admin("10.0.2.1", 7400);
    ASSERT_TRUE(admin.connected());
    ASSERT_TRUE(admin.authenticate(*secret, {0x0a000101, 0x0a000102, 0x0a000201, 0x0a000202}));
    // Our own campaign key lets us forge packets that pass every check but one.
    const uint32_t run = 0xabcd0001;
    const std::string nonce = probe::to_hex(probe::random_bytes(16));
    admin.send({{"type", "announce"}, {"run", run}, {"nonce", nonce}});
    ASSERT_EQ(admin.read().value("type", ""), "ok");
    const probe::MacKey key = agent::campaign_key(*secret, run, nonce);

    const int s = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    sockaddr_in me{}, to{};
    me.sin_family = to.sin_family = AF_INET;
    me.sin_port = htons(40000);
    ::inet_pton(AF_INET, "10.0.1.2", &me.sin_addr);
    ASSERT_EQ(::bind(s, reinterpret_cast<sockaddr*>(&me), sizeof me), 0);
    to.sin_port = htons(4791);
    ::inet_pton(AF_INET, "10.0.2.1", &to.sin_addr);
    auto send = [&](const uint8_t* p, size_t n) {
      ::sendto(s, p, n, 0, reinterpret_cast<sockaddr*>(&to), sizeof to);
      std::this_thread::sleep_for(std::chrono::microseconds(30));  // stay under the socket buffers
    };
    probe::ProbeHeader h;
    h.campaign = run;
    h.sport = 40000;
    h.dport = 4791;
    h.tuple = {.src_ip = 0x0a000102, .dst_ip = 0x0a000201, .proto = 17, .sport = 40000, .dport = 4791};
    std::array<uint8_t, probe::kProbeSize> b;
    uint32_t seq = 1;
    for (int i = 0; i < 2000; ++i) {  // forged: a random MAC
      h.sequence = seq++;
      h.send_time_ns = probe::realtime_ns();
      probe::encode_probe(h, key, b);
      auto r = probe::random_bytes(16);
      std::copy(r.begin(), r.end(), b.begin() + probe::kMacOffset);
      send(b.data(), b.size());
    }
    const probe::MacKey wrong = probe::MacKey::from_string("not the campaign key");
    for (int i = 0; i < 2000; ++i) {  // wrong key
      h.sequence = seq++;
      h.send_time_ns = probe::realtime_ns();
      probe::encode_probe(h, wrong, b);
      send(b.data(), b.size());
    }
    for (int i = 0; i < 2000; ++i) {  // malformed: bad magic, bad version
      h.sequence = seq++;
      h.send_time_ns = probe::realtime_ns();
      probe::encode_probe(h, key, b);
      if (i % 2) b[0] ^= 0xff;
      else b[4] = 7;
      send(b.data(), b.size());
    }
    for (int i = 0; i < 2000; ++i) {  // truncated
      h.sequence = seq++;
      probe::encode_probe(h, key, b);
      send(b.data(), static_cast<size_t>(i % 48));
    }
    h.sequence = seq++;  // one genuine request, then 2000 replays of it
    h.send_time_ns = probe::realtime_ns();
    probe::encode_probe(h, key, b);
    for (int i = 0; i <= 2000; ++i) send(b.data(), b.size());
    ::close(s);

    // Control plane: 500 garbage and 500 wrong-MAC handshakes, then 9000 bad
    // frames on an authenticated session.
    for (int i = 0; i < 1000; ++i) {
      Client c("10.0.2.1", 7400);
      ASSERT_TRUE(c.connected());
      ASSERT_TRUE(c.read().is_object());  // hello
      if (i % 2) c.send_text("{not json at all");
      else c.send({{"type", "auth"}, {"version", agent::kControlVersion}, {"nonce", std::string(32, 'a')},
                   {"mac", std::string(64, 'b')}});
      EXPECT_TRUE(c.closed_by_peer()) << "a failed handshake must end the connection";
    }
    for (int i = 0; i < 9000; ++i) {
      if (i % 2) admin.send_text(std::string("\x7f\x00garbage ") + std::to_string(i));
      else admin.send({{"type", "campaign"}, {"run", "seven"}});
      ASSERT_EQ(admin.read().value("type", ""), "error") << i;
    }
    admin.send({{"type", "status"}});
    status = admin.read();
  });
  attacker.join();
  ASSERT_TRUE(status.is_object()) << "the agent must still answer after the floods";
  const json& cr = status["control_rejected"];
  EXPECT_EQ(cr.value("bad_json", 0), 500 + 4500);
  EXPECT_EQ(cr.value("bad_auth", 0), 500);
  EXPECT_EQ(cr.value("bad_message", 0), 4500);
  const json& rr = status["reflector"]["rejected"];
  EXPECT_EQ(rr.value("bad_mac", 0), 4000);
  EXPECT_EQ(rr.value("bad_magic", 0), 1000);
  EXPECT_EQ(rr.value("bad_version", 0), 1000);
  EXPECT_EQ(rr.value("truncated", 0), 2000);
  EXPECT_EQ(rr.value("replayed", 0), 2000);

  const int st = f.wait_child(ctl, 60000);
  ASSERT_TRUE(st >= 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0) << slurp(dir + "/probe.err");
  auto db = db::Database::open((*fleet)->db_path());
  ASSERT_TRUE(db);
  EXPECT_EQ(*db->query_int("SELECT COUNT(*) FROM observations"), 4 * 3 * 64)
      << "only the campaign's own 5-tuples are stored";
  auto rej = db::load_rejections(*db, 1);
  ASSERT_TRUE(rej);
  EXPECT_EQ((*rej)["bad_mac"], 4000);
  EXPECT_EQ((*rej)["bad_magic"], 1000);
  EXPECT_EQ((*rej)["bad_version"], 1000);
  EXPECT_EQ((*rej)["truncated"], 2000);
  EXPECT_EQ((*rej)["replayed"], 2000);
  auto rows = load_paths((*fleet)->db_path(), 1);
  ASSERT_TRUE(rows);
  std::vector<FiveTuple> t;
  for (const auto& r : *rows) t.push_back({r.src_ip, r.dst_ip, 17, r.sport, r.dport});
  auto truth = f.ground_truth(t);
  ASSERT_TRUE(truth);
  for (size_t i = 0; i < rows->size(); ++i) EXPECT_EQ((*rows)[i].spine, (*truth)[i]);
}

}  // namespace
}  // namespace weft::test
