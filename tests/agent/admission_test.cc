// Who gets in and what they may ask: pre-authentication limits, stranger
// budgets, the host list, the rate cap and the protocol version.
#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <optional>
#include <thread>

#include <fmt/format.h>

#include "loopback.h"
#include "weft/db/stores.h"

namespace weft::agent::testing {
namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

const uint32_t kA = own_ip_u32(1), kB = own_ip_u32(2);

// Waits up to 3 s for pred().
template <typename F>
bool eventually(F pred) {
  const auto end = Clock::now() + std::chrono::seconds(3);
  while (!pred()) {
    if (Clock::now() > end) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return true;
}

std::string header(uint32_t n) {
  return {static_cast<char>(n >> 24), static_cast<char>(n >> 16 & 0xff), static_cast<char>(n >> 8 & 0xff),
          static_cast<char>(n & 0xff)};
}

class AdmissionTest : public ::testing::Test {
 protected:
  void start(const std::function<void(AgentConfig&)>& tweak = {}) {
    udp_ = free_udp_port();
    a_ = LoopbackAgent::start(own_ip(1), udp_, tweak);
    b_ = LoopbackAgent::start(own_ip(2), udp_);
    ASSERT_TRUE(a_ && b_);
  }
  AgentCounters counters() const { return a_->agent().counters(); }
  std::unique_ptr<LoopbackAgent> a_, b_;
  uint16_t udp_ = 0;  // both reflectors' UDP port
};

TEST_F(AdmissionTest, APreAuthFrameOverOneKibIsRefusedUnread) {
  start();
  Client c(own_ip(1), a_->port());
  ASSERT_TRUE(c.read().is_object());  // hello
  ASSERT_TRUE(c.send_raw(header(kMaxPreAuthFrame + 1)));
  EXPECT_TRUE(c.closed_by_peer());
  EXPECT_EQ(a_->rejected(ControlReject::kOversize), 1u);
}

TEST_F(AdmissionTest, AMaximalPreAuthFrameIsReadAndJudged) {
  start();
  Client c(own_ip(1), a_->port());
  ASSERT_TRUE(c.read().is_object());
  ASSERT_TRUE(c.send_raw(header(kMaxPreAuthFrame) + std::string(kMaxPreAuthFrame, '{')));
  EXPECT_TRUE(c.closed_by_peer());
  EXPECT_EQ(a_->rejected(ControlReject::kBadJson), 1u);
  EXPECT_EQ(a_->rejected(ControlReject::kOversize), 0u);
}

TEST_F(AdmissionTest, AFailedHandshakeFreesItsSlotAtOnce) {
  start([](AgentConfig& c) { c.max_strangers_per_source = 2; });
  for (int i = 0; i < 7; ++i) {
    Client c(own_ip(1), a_->port());
    ASSERT_TRUE(c.read().is_object());
    c.send_plain({{"type", "auth"}, {"version", kControlVersion}, {"nonce", std::string(32, 'a')},
                  {"mac", std::string(64, 'b')}});
    EXPECT_TRUE(c.closed_by_peer());
    EXPECT_TRUE(eventually([&] { return counters().strangers == 0; })) << i;
  }
  EXPECT_EQ(a_->rejected(ControlReject::kBadAuth), 7u);
  EXPECT_EQ(a_->rejected(ControlReject::kEvicted), 0u) << "a failed handshake kept its slot";
}

// An address that opens more than its share of strangers loses its own oldest
// ones; a stranger from another address keeps its slot and can authenticate.
TEST_F(AdmissionTest, StrangersFromOneAddressEvictOnlyTheirOwnOldest) {
  start([](AgentConfig& c) {
    c.max_strangers_per_source = 4;
    c.max_strangers = 100;
  });
  Client other(own_ip(1), a_->port(), own_ip(3));
  ASSERT_TRUE(other.connected());
  std::vector<std::unique_ptr<Client>> idle;
  for (int i = 0; i < 13; ++i) idle.push_back(std::make_unique<Client>(own_ip(1), a_->port(), own_ip(4)));
  ASSERT_TRUE(eventually([&] { return counters().sessions == 14; }));
  EXPECT_EQ(a_->rejected(ControlReject::kEvicted), 9u);
  EXPECT_EQ(counters().strangers, 5);
  EXPECT_TRUE(other.authenticate(test_secret(), {kA, kB}));
  for (int i = 0; i < 13; ++i) {
    ASSERT_TRUE(idle[static_cast<size_t>(i)]->hello().is_object()) << i;  // every one got its hello
    EXPECT_EQ(idle[static_cast<size_t>(i)]->closed_within(i < 9 ? 1000 : 20), i < 9) << i;
  }
}

TEST_F(AdmissionTest, TheOldestStrangerMakesRoomWhenAllSlotsAreTaken) {
  start([](AgentConfig& c) {
    c.max_strangers_per_source = 3;
    c.max_strangers = 3;
  });
  std::vector<std::unique_ptr<Client>> idle;
  for (const std::string& src : {own_ip(5), own_ip(6), own_ip(7), own_ip(8)}) {
    idle.push_back(std::make_unique<Client>(own_ip(1), a_->port(), src));
    ASSERT_TRUE(idle.back()->hello().is_object());
  }
  EXPECT_TRUE(idle[0]->closed_within(1000));
  for (size_t i = 1; i < idle.size(); ++i) EXPECT_FALSE(idle[i]->closed_within(20)) << i;
  EXPECT_EQ(a_->rejected(ControlReject::kEvicted), 1u);
  EXPECT_TRUE(idle[1]->authenticate(test_secret(), {kA}));
  EXPECT_TRUE(eventually([&] { return counters().strangers == 2 && counters().authenticated == 1; }));
}

TEST_F(AdmissionTest, TheFirstSealedFrameMustBeTheHostList) {
  start();
  Client c(own_ip(1), a_->port());
  json hello = c.read();
  const std::string cn(32, 'c');
  c.send_plain({{"type", "auth"}, {"version", kControlVersion}, {"nonce", cn},
                {"mac", client_proof(test_secret(), hello["nonce"].get<std::string>(), cn)}});
  ASSERT_EQ(c.read().value("type", ""), "auth_ok");
  const SessionKeys k = session_keys(test_secret(), hello["nonce"].get<std::string>(), cn);
  Sealer out(k.to_agent, Direction::kToAgent);
  c.send_raw(out.seal(json{{"type", "status"}}));
  EXPECT_TRUE(eventually([&] { return a_->rejected(ControlReject::kBadMessage) == 1; }));
  c.read();  // the agent's (sealed) error
  EXPECT_TRUE(c.closed_by_peer());
}

CampaignCommand campaign_to(uint32_t target, int ports, double rate) {
  CampaignCommand c;
  c.run = 4242;
  c.nonce = std::string(32, 'f');
  c.plan.targets = {target};
  c.plan.sport_first = 51000;
  c.plan.sport_count = static_cast<uint16_t>(ports);
  c.plan.port_window = 64;
  c.plan.rate_pps = rate;
  c.plan.timeout_ms = 100;
  c.plan.retries = 0;
  return c;
}

// Reads until "done" or "error"; returns it.
json until_done(Client& c) {
  for (;;) {
    json m = c.read();
    if (!m.is_object() || m["type"] == "done" || m["type"] == "error") return m;
  }
}

TEST_F(AdmissionTest, ACampaignTargetOutsideTheHostListIsRefused) {
  start();
  Client c(own_ip(1), a_->port());
  ASSERT_TRUE(c.authenticate(test_secret(), {kA, kB}));
  c.send(encode_campaign(campaign_to(own_ip_u32(9), 4, 1000)));
  json m = c.read();
  EXPECT_EQ(m.value("type", ""), "error");
  EXPECT_EQ(m.value("message", ""),
            "campaign 4242 refused: target " + own_ip(9) + " is not in the controller's host list");
  EXPECT_EQ(a_->rejected(ControlReject::kTargetRefused), 1u);
  EXPECT_EQ(counters().campaigns, 0u);
  c.send(encode_campaign(campaign_to(kB, 4, 1000)));  // the session goes on
  EXPECT_EQ(until_done(c).value("type", ""), "done");
  EXPECT_EQ(counters().campaigns, 1u);
}

// A watcher orders a run once per session (a new session takes it over):
// a second order of a running monitor on the same session would send the
// same probe sequences again, which the reflectors refuse as replayed.
TEST_F(AdmissionTest, AMonitorOrderedTwiceOnOneSessionIsRefusedAndTheFirstRunsOn) {
  start();
  Client c(own_ip(1), a_->port());
  ASSERT_TRUE(c.authenticate(test_secret(), {kA, kB}));
  MonitorCommand cmd;
  cmd.run = 77;
  cmd.nonce = std::string(32, 'e');
  cmd.dport = udp_;
  cmd.plan.tuples = {{kB, 52001}, {kB, 52002}};
  cmd.plan.rate_pps = 100;
  cmd.plan.report_ms = 50;
  Client to_b(own_ip(2), b_->port());  // B's reflector needs the run's key
  ASSERT_TRUE(to_b.authenticate(test_secret(), {kA, kB}));
  ASSERT_TRUE(to_b.send({{"type", "announce"}, {"run", cmd.run}, {"nonce", cmd.nonce}}));
  ASSERT_EQ(to_b.read().value("type", ""), "ok");
  ASSERT_TRUE(c.send(encode_monitor(cmd)));
  EXPECT_EQ(c.read().value("type", ""), "ok");
  ASSERT_TRUE(c.send(encode_monitor(cmd)));
  json m;
  do m = c.read();
  while (m.is_object() && m.value("type", "") == "monitor_report");
  EXPECT_EQ(m.value("type", ""), "error") << m.dump();
  EXPECT_EQ(m.value("message", ""), "monitor 77 refused: it already runs on this session");
  EXPECT_EQ(a_->rejected(ControlReject::kBadMessage), 1u);
  // The first monitor reports on, every probe answered: no replayed sequence.
  uint64_t answered = 0;
  for (int i = 0; i < 100 && answered < 8; ++i) {
    m = c.read();
    ASSERT_EQ(m.value("type", ""), "monitor_report") << m.dump();
    answered = 0;
    for (const auto& row : m["rows"]) answered += decode_tally(row)->answered;
  }
  EXPECT_GE(answered, 8u);
  EXPECT_EQ(b_->agent().reflector_stats().rejected_total(), 0u);
}

// A sweep reports when a window of ports settles; at a low rate that takes
// long, and the controller gives an agent silent for 30 s up (it did: a
// window of 64 targets x 64 ports at --rate 100 failed every campaign). While
// it runs, an empty "results" frame says it is alive; none follows its "done",
// so the next command gets its own answer.
TEST_F(AdmissionTest, ASlowSweepSaysItIsAliveAndNothingFollowsItsDone) {
  start([](AgentConfig& c) { c.sweep_heartbeat_ms = 100; });
  Client c(own_ip(1), a_->port());
  ASSERT_TRUE(c.authenticate(test_secret(), {kA, kB}));
  c.send(encode_campaign(campaign_to(kB, 4, 4)));  // one window: 4 probes paced to 1 s
  int heartbeats = 0;
  size_t rows = 0;
  json m;
  for (m = c.read(); m.is_object() && m.value("type", "") == "results"; m = c.read()) {
    EXPECT_EQ(m.value("run", 0), 4242);
    if (m["rows"].empty()) ++heartbeats;
    rows += m["rows"].size();
  }
  ASSERT_EQ(m.value("type", ""), "done") << m.dump();
  EXPECT_EQ(rows, 4u);
  EXPECT_GE(heartbeats, 5);
  ASSERT_TRUE(c.send({{"type", "status"}}));
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // three heartbeat periods
  EXPECT_EQ(c.read().value("type", ""), "status");
}

struct RateCase {
  double asked;
  bool capped;
};

void PrintTo(const RateCase& r, std::ostream* os) { *os << "asked " << r.asked << (r.capped ? ", capped" : ""); }

class RateCapTest : public AdmissionTest, public ::testing::WithParamInterface<RateCase> {};

// 60 probes at the agent's 300/s take >= 0.15 s (the pacer may send a first
// burst); unpaced they take milliseconds.
TEST_P(RateCapTest, FasterOrUnpacedCampaignsRunAtTheAgentMaximum) {
  start([](AgentConfig& c) { c.max_rate_pps = 300; });
  Client c(own_ip(1), a_->port());
  ASSERT_TRUE(c.authenticate(test_secret(), {kA, kB}));
  const auto t0 = Clock::now();
  c.send(encode_campaign(campaign_to(kB, 60, GetParam().asked)));
  json done = until_done(c);
  const double secs = std::chrono::duration<double>(Clock::now() - t0).count();
  ASSERT_EQ(done.value("type", ""), "done") << done.dump();
  EXPECT_EQ(counters().rate_capped, GetParam().capped ? 1u : 0u);
  EXPECT_GE(secs, 0.15) << "60 probes at <= 300/s";
}

INSTANTIATE_TEST_SUITE_P(Rates, RateCapTest,
                         ::testing::Values(RateCase{0, true}, RateCase{1e9, true}, RateCase{300.5, true},
                                           RateCase{250, false}));

TEST_F(AdmissionTest, AControllerOfTheOldProtocolIsToldWhy) {
  start();
  Client c(own_ip(1), a_->port());
  json hello = c.read();
  EXPECT_EQ(hello.value("version", 0), kControlVersion);
  const std::string cn(32, 'c');
  c.send_plain({{"type", "auth"}, {"nonce", cn},  // version 1 sent none
                {"mac", client_proof(test_secret(), hello["nonce"].get<std::string>(), cn)}});
  json m = c.read();
  EXPECT_EQ(m.value("type", ""), "error");
  EXPECT_EQ(m.value("message", ""),
            "this agent speaks control protocol version 2, the controller 1: run the same weft version on both");
  EXPECT_TRUE(c.closed_by_peer());
  EXPECT_EQ(a_->rejected(ControlReject::kVersion), 1u);
}

// Without --listen the control port is the --ip address's port 7400, not
// every interface's.
TEST(AgentProcessTest, ListensOnTheIpAddressByDefault) {
  const std::string dir = fmt::format("/tmp/weft-listen-test-{}", ::getpid());
  ::mkdir(dir.c_str(), 0700);
  {
    AgentProcess a(dir, own_ip(9), free_udp_port(), {});
    ASSERT_EQ(a.port(), 7400) << a.log();
    Client c(own_ip(9), 7400);
    EXPECT_EQ(c.hello().value("type", ""), "hello");
    std::ifstream tcp("/proc/net/tcp");  // proc(5): local address in hex, state 0A = LISTEN
    std::string line;
    int listening = 0;
    while (std::getline(tcp, line)) {
      if (line.find(":1CE8 ") != std::string::npos && line.find(" 0A ") != std::string::npos) {
        const uint32_t ip = own_ip_u32(9);  // as proc(5) prints it: the address's bytes in host order
        const std::string hex = fmt::format("{:02X}{:02X}{:02X}{:02X}:1CE8", ip & 0xff, ip >> 8 & 0xff, ip >> 16 & 0xff,
                                            ip >> 24);
        EXPECT_NE(line.find(hex), std::string::npos) << "port 7400 listens beyond " << own_ip(9) << ": " << line;
        ++listening;
      }
    }
    EXPECT_GE(listening, 1);
  }
  for (const char* f : {"/secret", "/agent.log"}) std::remove((dir + f).c_str());
  ::rmdir(dir.c_str());
}

// A controller that keeps sending commands but never reads their answers:
// the agent closes it at its write deadline, or once more than
// max_queued_bytes wait for it however long the deadline, counts
// not_reading (where the deadline fires, whichever of the session's reads
// and writes it cancels first), and serves the next controller.
struct StalledCase {
  const char* name;
  int idle_timeout_ms;
  std::size_t max_queued_bytes = AgentConfig{}.max_queued_bytes;
};

class StalledReaderTest : public AdmissionTest, public ::testing::WithParamInterface<StalledCase> {};

TEST_P(StalledReaderTest, AControllerThatStopsReadingIsClosedAndCounted) {
  start([](AgentConfig& c) {
    c.idle_timeout_ms = GetParam().idle_timeout_ms;
    c.max_queued_bytes = GetParam().max_queued_bytes;
  });
  Client c(own_ip(1), a_->port());
  ASSERT_TRUE(c.authenticate(test_secret(), {kA, kB}));
  // A send blocks while the agent reads slower than this (under a sanitizer
  // it may, for seconds); one that timed out would cut a frame, and the agent
  // would close the session for that instead.
  c.set_send_timeout(60000);
  const auto end = Clock::now() + std::chrono::seconds(60);
  bool refused = false;
  for (int i = 1; Clock::now() < end; ++i) {
    if (!c.send({{"type", "status"}})) break;  // closed by the agent
    if (i % 512 == 0) {
      if ((refused = a_->rejected(ControlReject::kNotReading) > 0)) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
  }
  EXPECT_TRUE(refused || eventually([&] { return a_->rejected(ControlReject::kNotReading) > 0; }));
  EXPECT_EQ(a_->rejected(ControlReject::kNotReading), 1u);
  EXPECT_TRUE(eventually([&] { return counters().authenticated == 0; }));
  Client next(own_ip(1), a_->port());
  ASSERT_TRUE(next.authenticate(test_secret(), {kA}));
  ASSERT_TRUE(next.send({{"type", "status"}}));
  const json st = next.read();
  EXPECT_EQ(st.value("type", ""), "status");
  EXPECT_EQ(st["control_rejected"].value("not_reading", 0), 1) << st.dump();
}

INSTANTIATE_TEST_SUITE_P(Bounds, StalledReaderTest,
                         ::testing::Values(StalledCase{"ShortDeadline", 300}, StalledCase{"LongerDeadline", 1500},
                                           StalledCase{"QueueBoundBeforeADeadlineOf10Minutes", 600000, kMaxFrame}),
                         [](const auto& p) { return std::string(p.param.name); });

// The controller sends nothing on a session while it waits for a sweep's
// results, so a sweep that outlasts the idle timeout (a large fabric at a low
// rate) must not end its session as idle (it did: the sweep was cancelled and
// the campaign failed mid-way), nor may the session of a host that only
// reflects, or whose sweep ended first (the controller keeps it open); a
// session that orders nothing is still closed when idle.
struct LongSweep {
  const char* name;
  bool a_sweeps;  // else only b sweeps (to a), and a only reflects
};

class LongSweepTest : public AdmissionTest, public ::testing::WithParamInterface<LongSweep> {};

TEST_P(LongSweepTest, ASweepLongerThanTheIdleTimeoutCompletes) {
  start([](AgentConfig& c) { c.idle_timeout_ms = 500; });
  const std::string path = fmt::format("/tmp/weft-admission-long-sweep-{}.db", ::getpid());
  const int64_t flows = GetParam().a_sweeps ? 2 * 8 : 8;
  {
    auto db = db::Database::open(path);
    ASSERT_TRUE(db) << db.status().to_string();
    ProbeRunConfig cfg = quick_campaign();
    cfg.rate_pps = 6;  // 8 ports to one target: about 1.4 s, near three idle timeouts
    cfg.keep_open_ms = 150;
    if (!GetParam().a_sweeps) cfg.pairs = std::vector<std::pair<int, int>>{{1, 0}};
    const auto t0 = Clock::now();
    auto run = run_probe(*db, {{"a", own_ip(1), a_->port()}, {"b", own_ip(2), b_->port()}}, test_secret(), cfg);
    ASSERT_TRUE(run) << run.status().to_string();
    EXPECT_GE(Clock::now() - t0, std::chrono::milliseconds(1100));
    EXPECT_EQ(run->flows_total, flows);
    EXPECT_EQ(run->senders.sent, static_cast<uint64_t>(flows));
  }
  for (const char* ext : {"", "-wal", "-shm"}) std::remove((path + ext).c_str());

  ASSERT_TRUE(eventually([&] { return counters().authenticated == 0; }));
  const uint64_t timeouts = a_->rejected(ControlReject::kTimeout);
  Client idle(own_ip(1), a_->port());
  ASSERT_TRUE(idle.authenticate(test_secret(), {kA, kB}));
  EXPECT_TRUE(idle.closed_within(3000));
  EXPECT_EQ(a_->rejected(ControlReject::kTimeout), timeouts + 1);
}

INSTANTIATE_TEST_SUITE_P(Hosts, LongSweepTest,
                         ::testing::Values(LongSweep{"BothSweep", true}, LongSweep{"OneOnlyReflects", false}),
                         [](const auto& p) { return std::string(p.param.name); });

// An agent that goes away mid-campaign ends the run at once: the other
// host's sweep (here 16 ports at 2 probes/s, 8 s) stops with it instead of
// probing on towards the agent that is gone, and the campaign stays
// 'running' for a resume.
TEST_F(AdmissionTest, AnAgentLostMidCampaignStopsTheOtherSweepsAtOnce) {
  start();
  const std::string path = fmt::format("/tmp/weft-admission-lost-agent-{}.db", ::getpid());
  {
    auto db = db::Database::open(path);
    ASSERT_TRUE(db) << db.status().to_string();
    ProbeRunConfig cfg = quick_campaign();
    cfg.sport_count = 16;
    cfg.rate_pps = 2;
    cfg.keep_open_ms = 150;
    std::optional<Result<ProbeSummary>> run;
    const auto t0 = Clock::now();
    std::thread controller([&] {
      run.emplace(run_probe(*db, {{"a", own_ip(1), a_->port()}, {"b", own_ip(2), b_->port()}}, test_secret(), cfg));
    });
    std::this_thread::sleep_for(std::chrono::milliseconds(1500));
    b_.reset();  // its sessions close with it
    controller.join();
    const auto took = Clock::now() - t0;
    ASSERT_TRUE(run && !*run);
    EXPECT_NE(run->status().message().find("mid-campaign (rerun the same command to resume)"), std::string::npos)
        << run->status().message();
    EXPECT_LT(took, std::chrono::milliseconds(5000));
    auto state = db->query_int("SELECT COUNT(*) FROM campaigns WHERE state = 'running'");
    ASSERT_TRUE(state) << state.status().to_string();
    EXPECT_EQ(*state, 1);
  }
  for (const char* ext : {"", "-wal", "-shm"}) std::remove((path + ext).c_str());
  EXPECT_TRUE(eventually([&] { return counters().authenticated == 0; }));
}

}  // namespace
}  // namespace weft::agent::testing
