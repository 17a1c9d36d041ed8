// A man in the middle between the real controller (run_probe) and a real agent
// forges, replays, swaps and truncates control frames. Each attack must be
// rejected by the side that receives it, counted by its reason, and lead to no
// action: no sweep for a forged campaign, no row from a forged result. A
// separate honest session then completes its campaign.
#include <unistd.h>

#include <gtest/gtest.h>

#include <cstdio>
#include <optional>

#include <fmt/format.h>

#include "loopback.h"
#include "weft/db/stores.h"

namespace weft::agent::testing {
namespace {

using nlohmann::json;

struct Attack {
  const char* name;
  Toward toward;
  const char* trigger;  // the type of the first sealed frame attacked
  Tamper kind;
  ControlReject reason;  // as the receiver counts it
};

std::string print(const ::testing::TestParamInfo<Attack>& p) { return p.param.name; }
void PrintTo(const Attack& a, std::ostream* os) { *os << a.name; }

class AttackTest : public ::testing::TestWithParam<Attack> {
 protected:
  void SetUp() override {
    const uint16_t udp = free_udp_port();
    a_ = LoopbackAgent::start(own_ip(1), udp);
    b_ = LoopbackAgent::start(own_ip(2), udp);
    ASSERT_TRUE(a_ && b_);
    db_path_ = fmt::format("/tmp/weft-attack-test-{}-{}.db", ::getpid(), GetParam().name);
    auto db = db::Database::open(db_path_);
    ASSERT_TRUE(db) << db.status().to_string();
    db_.emplace(std::move(*db));
  }
  void TearDown() override {
    db_.reset();
    for (const char* ext : {"", "-wal", "-shm"}) std::remove((db_path_ + ext).c_str());
  }
  std::vector<HostEntry> hosts(uint16_t port_a) const {
    return {{"a", own_ip(1), port_a}, {"b", own_ip(2), b_->port()}};
  }
  int64_t rows_outside_campaign_ports() {
    return *db_->query_int("SELECT COUNT(*) FROM observations WHERE sport NOT BETWEEN 50000 AND 50007");
  }

  std::unique_ptr<LoopbackAgent> a_, b_;
  std::string db_path_;
  std::optional<db::Database> db_;
};

TEST_P(AttackTest, IsRejectedCountedAndTakesNoAction) {
  const Attack& at = GetParam();
  bool done = false;
  std::optional<std::string> held;
  int attacked = 0;
  MitmProxy proxy(own_ip(1), a_->port(), [&](Toward d, int index, const std::string& f) -> Action {
    if (held && d == at.toward) {  // the swap: the next frame first, then the held one
      Action act{{f, *held}};
      held.reset();
      return act;
    }
    if (done || d != at.toward || index < 2) return {{f}};  // hello/auth and auth_ok/hosts pass
    if (frame_json(f, true).value("type", "") != at.trigger) return {{f}};
    done = true;
    ++attacked;
    return tamper(at.kind, at.toward, f, held);
  }, own_ip(1));

  auto attacked_run = run_probe(*db_, hosts(proxy.port()), test_secret(), quick_campaign());
  ASSERT_EQ(attacked, 1) << "the attack never happened";
  ASSERT_FALSE(attacked_run) << "a campaign completed through a tampered channel";
  if (at.toward == Toward::kAgent) {
    EXPECT_EQ(a_->rejected(at.reason), 1u) << control_reject_name(at.reason) << "; " << attacked_run.status().to_string();
    EXPECT_EQ(a_->agent().counters().campaigns, 0u) << "a forged or disordered command reached the sweep";
  } else {
    EXPECT_NE(attacked_run.status().message().find(fmt::format("control frame rejected ({})",
                                                               control_reject_name(at.reason))),
              std::string::npos)
        << attacked_run.status().to_string();
  }
  EXPECT_EQ(rows_outside_campaign_ports(), 0) << "a forged observation was stored";
  for (size_t r = 0; r < static_cast<size_t>(ControlReject::kCount); ++r) {
    if (static_cast<ControlReject>(r) != at.reason) {
      EXPECT_EQ(a_->agent().counters().rejected[r], 0u) << control_reject_name(static_cast<ControlReject>(r));
    }
  }

  // An honest session, straight to the agent, completes its campaign.
  auto honest = run_probe(*db_, hosts(a_->port()), test_secret(), quick_campaign());
  ASSERT_TRUE(honest) << honest.status().to_string();
  EXPECT_EQ(honest->flows_total, 2 * 8);
  EXPECT_EQ(rows_outside_campaign_ports(), 0);
}

INSTANTIATE_TEST_SUITE_P(
    Frames, AttackTest,
    ::testing::Values(
        Attack{"ForgedCampaign", Toward::kAgent, "announce", Tamper::kForged, ControlReject::kBadTag},
        Attack{"PlaintextCampaign", Toward::kAgent, "announce", Tamper::kPlaintext, ControlReject::kBadTag},
        Attack{"ReplayedCommand", Toward::kAgent, "announce", Tamper::kReplay, ControlReject::kReplayed},
        Attack{"ShortenedCommand", Toward::kAgent, "announce", Tamper::kShortenRefit, ControlReject::kBadTag},
        Attack{"CommandShorterThanItsSeal", Toward::kAgent, "announce", Tamper::kShortenBelowSeal,
               ControlReject::kTruncated},
        Attack{"CommandCutMidFrame", Toward::kAgent, "campaign", Tamper::kCutMidFrame, ControlReject::kTruncated},
        Attack{"ForgedResults", Toward::kController, "results", Tamper::kForged, ControlReject::kBadTag},
        Attack{"ReplayedResults", Toward::kController, "results", Tamper::kReplay, ControlReject::kReplayed},
        Attack{"SwappedResults", Toward::kController, "results", Tamper::kSwap, ControlReject::kOutOfOrder},
        Attack{"ShortenedResults", Toward::kController, "results", Tamper::kShortenRefit, ControlReject::kBadTag}),
    print);

// Before authentication anyone on the path can answer for an agent. A
// pre-authentication frame that is not the protocol ends the run at once,
// naming the agent and what was wrong, and nothing is stored. (An "error"
// whose message was not a string threw out of the controller's coroutine,
// which asio::detached dropped: the run went on over the unauthenticated
// connection, whose frames are not sealed.)
class ImpostorTest : public ::testing::TestWithParam<std::pair<const char*, const char*>> {};

TEST_P(ImpostorTest, AnswersThatAreNotTheProtocolFailTheRunNamingTheAgentAndStoreNothing) {
  const uint16_t udp = free_udp_port();
  auto a = LoopbackAgent::start(own_ip(1), udp);
  auto b = LoopbackAgent::start(own_ip(2), udp);
  ASSERT_TRUE(a && b);
  const std::string impostor = GetParam().first;
  MitmProxy proxy(own_ip(1), a->port(), [&](Toward d, int index, const std::string& f) -> Action {
    if (d == Toward::kController && index == 0) return {{frame(json::parse(impostor))}};  // instead of the hello
    return {{f}};
  }, own_ip(1));
  const std::string path = fmt::format("/tmp/weft-impostor-test-{}.db", ::getpid());
  {
    auto db = db::Database::open(path);
    ASSERT_TRUE(db) << db.status().to_string();
    auto run = run_probe(*db, {{"a", own_ip(1), proxy.port()}, {"b", own_ip(2), b->port()}}, test_secret(),
                         quick_campaign());
    ASSERT_FALSE(run);
    EXPECT_NE(run.status().message().find(fmt::format("agent a ({}:{})", own_ip(1), proxy.port())), std::string::npos)
        << run.status().message();
    EXPECT_NE(run.status().message().find(GetParam().second), std::string::npos) << run.status().message();
    EXPECT_EQ(*db->query_int("SELECT COUNT(*) FROM observations"), 0);
  }
  for (const char* ext : {"", "-wal", "-shm"}) std::remove((path + ext).c_str());
}

INSTANTIATE_TEST_SUITE_P(
    Frames, ImpostorTest,
    ::testing::Values(std::pair{R"({"type": "error", "message": 1})", "field 'message' has the wrong type"},
                      std::pair{R"({"type": "error"})", "missing field 'message'"},
                      std::pair{R"({"type": "error", "message": "go away"})", "go away"},
                      std::pair{R"({"type": "ok"})", "expected 'hello', got 'ok'"},
                      std::pair{R"({"type": "hello", "version": 2, "host": "a", "nonce": 5})", "field 'nonce'"}),
    [](const auto& p) { return std::to_string(p.index); });

// The controller waits for each answer, so only a client that sends two
// commands back to back gives the attacker two frames to swap.
TEST(PipelinedAttackTest, SwappedCommandsAreOutOfOrderAndNeitherRuns) {
  const uint16_t udp = free_udp_port();
  auto a = LoopbackAgent::start(own_ip(1), udp);
  ASSERT_TRUE(a);
  std::optional<std::string> held;
  MitmProxy proxy(own_ip(1), a->port(), [&](Toward d, int index, const std::string& f) -> Action {
    if (d != Toward::kAgent || index < 2) return {{f}};
    const std::string type = frame_json(f, true).value("type", "");
    if (type == "announce") {
      held = f;
      return {};
    }
    if (held) {
      Action act{{f, *held}};
      held.reset();
      return act;
    }
    return {{f}};
  }, own_ip(1));
  Client c(own_ip(1), proxy.port());
  ASSERT_TRUE(c.authenticate(test_secret(), {own_ip_u32(1)}));
  CampaignCommand cmd;
  cmd.run = 7;
  cmd.nonce = std::string(32, 'e');
  cmd.plan.targets = {own_ip_u32(1)};
  cmd.plan.sport_count = 4;
  c.send({{"type", "announce"}, {"run", 7}, {"nonce", std::string(32, 'e')}});
  c.send(encode_campaign(cmd));
  const json m = c.read();
  EXPECT_EQ(m.value("type", ""), "error");
  EXPECT_EQ(m.value("message", ""), "control frame 2 out of order (expected 1)");
  EXPECT_TRUE(c.closed_by_peer());
  EXPECT_EQ(a->rejected(ControlReject::kOutOfOrder), 1u);
  EXPECT_EQ(a->agent().counters().campaigns, 0u);
}

}  // namespace
}  // namespace weft::agent::testing
