// Control-plane messages: validation, round trips, handshake proofs.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <functional>
#include <limits>

#include "../scratch_name.h"
#include "controller_internal.h"
#include "weft/agent/channel.h"
#include "weft/agent/control.h"
#include "weft/agent/controller.h"
#include "weft/db/database.h"

namespace weft::agent {
namespace {

using nlohmann::json;

CampaignCommand sample() {
  CampaignCommand c;
  c.run = 77;
  c.nonce = std::string(32, 'c');
  c.plan.targets = {0x0a000101, 0x0a000203};
  c.plan.sport_first = 50000;
  c.plan.sport_count = 13;
  c.skip_frames = 3;
  c.plan.stop_at_spines = 4;
  c.plan.ports_per_spine = 3;
  return c;
}

TEST(ControlTest, CampaignRoundTripsThroughTheParser) {
  const CampaignCommand c = sample();
  auto m = parse_control(encode_campaign(c).dump());
  ASSERT_TRUE(m) << m.status().to_string();
  auto back = decode_campaign(m->body);
  ASSERT_TRUE(back);
  EXPECT_EQ(back->run, 77u);
  EXPECT_EQ(back->plan.targets, c.plan.targets);
  EXPECT_EQ(back->skip_frames, 3u);
  EXPECT_EQ(back->plan.sport_count, 13);
  EXPECT_EQ(back->plan.stop_at_spines, 4);
  EXPECT_EQ(back->plan.ports_per_spine, 3);
}

// A controller from before ports_per_spine sends no such field: one port per spine, as it meant.
TEST(ControlTest, ACampaignWithoutPortsPerSpineAsksForOne) {
  json j = encode_campaign(sample());
  j.erase("ports_per_spine");
  auto back = decode_campaign(j);
  ASSERT_TRUE(back) << back.status().to_string();
  EXPECT_EQ(back->plan.ports_per_spine, 1);
}

struct Bad {
  const char* frame;
  const char* why;
};

class BadFrameTest : public ::testing::TestWithParam<Bad> {};

TEST_P(BadFrameTest, IsRejectedWithAReason) {
  auto m = parse_control(GetParam().frame);
  ASSERT_FALSE(m);
  EXPECT_NE(m.status().message().find(GetParam().why), std::string::npos) << m.status().message();
}

INSTANTIATE_TEST_SUITE_P(
    Frames, BadFrameTest,
    ::testing::Values(Bad{"{", "not JSON"}, Bad{"[1,2]", "not a JSON object"}, Bad{"{\"t\":1}", "no string 'type'"},
                      Bad{"{\"type\":\"reboot\"}", "unknown message type 'reboot'"},
                      Bad{"{\"type\":\"announce\",\"run\":0,\"nonce\":\"00\"}", "field 'run' = 0 is outside"},
                      Bad{"{\"type\":\"announce\",\"run\":5,\"nonce\":\"zz\"}", "field 'nonce' is not 32..32 hex"},
                      Bad{"{\"type\":\"retire\",\"run\":-1}", "field 'run' has the wrong type"},
                      Bad{"{\"type\":\"results\",\"run\":1,\"rows\":[[1,2,3]]}", "11-element"},
                      Bad{"{\"type\":\"results\",\"run\":1,\"rows\":[[1,0,1,1,3,0,11,0,-1,0,5]]}", "out of range"},
                      Bad{"{\"type\":\"skip\",\"run\":1,\"dsts\":[[5,10]]}", "not [ip, first, last, ...]"},
                      Bad{"{\"type\":\"skip\",\"run\":1,\"dsts\":[[5,10,9]]}", "skip range 10..9 is not within"},
                      Bad{"{\"type\":\"skip\",\"run\":1,\"dsts\":[[5,0,9]]}", "skip range 0..9 is not within"},
                      Bad{"{\"type\":\"skip\",\"run\":1,\"dsts\":[[5,1,65536]]}", "skip range 1..65536"},
                      Bad{"{\"type\":\"skip\",\"run\":1,\"dsts\":[[0,1,2]]}", "destination is not an IPv4"},
                      Bad{"{\"type\":\"skip\",\"run\":1,\"dsts\":[[5,1,-2]]}", "no unsigned integer"},
                      Bad{"{\"type\":\"error\",\"message\":1}", "field 'message' has the wrong type"},
                      Bad{"{\"type\":\"error\",\"message\":[\"x\"]}", "field 'message' has the wrong type"},
                      Bad{"{\"type\":\"error\"}", "missing field 'message'"}));

// The agent echoes parts of what it refuses, cut to a length that may fall
// inside a UTF-8 character: the frame is still sent, with U+FFFD there,
// where dump() threw out of the session (and the session kept its slot).
TEST(ControlTest, TextCutInsideAUtf8CharacterIsFramedAndSealedWithAReplacement) {
  const std::string cut = std::string(31, 'x') + std::string("\xc3\xa9").substr(0, 1);
  const json j = {{"type", "error"}, {"message", cut}};
  const std::string f = frame(j);
  EXPECT_EQ(f.substr(4), "{\"message\":\"" + std::string(31, 'x') + "\xef\xbf\xbd\",\"type\":\"error\"}");
  const probe::MacKey key = probe::MacKey::from_string("a secret of the test, 32 bytes..");
  Sealer out(key, Direction::kToController);
  Opener in(key, Direction::kToController);
  const std::string sealed = out.seal(j);
  ControlReject why{};
  auto text = in.open(std::string_view(sealed).substr(4), &why);
  ASSERT_TRUE(text) << text.status().message();
  auto m = parse_control(*text);
  ASSERT_TRUE(m) << m.status().message();
  EXPECT_EQ(m->body["message"].get<std::string>(), std::string(31, 'x') + "\xef\xbf\xbd");
}

TEST(ControlTest, CampaignFieldsAreRangeChecked) {
  json j = encode_campaign(sample());
  j["sport_first"] = 65500;
  j["sport_count"] = 100;
  EXPECT_EQ(decode_campaign(j).status().message(), "source port range passes 65535");
  j = encode_campaign(sample());
  j["probe_dscp"] = 64;
  EXPECT_EQ(decode_campaign(j).status().message(), "field 'probe_dscp' = 64 is outside 0..63");
  j = encode_campaign(sample());
  j["targets"] = json::array();
  EXPECT_EQ(decode_campaign(j).status().message(), "campaign has no targets");
  j = encode_campaign(sample());
  j["method"] = "magic";
  EXPECT_EQ(decode_campaign(j).status().message(), "unknown probe method 'magic' (dscp, ttl)");
  j = encode_campaign(sample());
  j["ports_per_spine"] = 0;
  EXPECT_EQ(decode_campaign(j).status().message(), "field 'ports_per_spine' = 0 is outside 1..4096");
}

// What `weft probe` lets through, every agent accepts (decode_campaign's
// ranges): a run the agents would refuse stops before it has a campaign row,
// naming the option to change.
struct ProbeRunOutsideAgentRange {
  const char* name;
  std::function<void(ProbeRunConfig&)> set;
  const char* message;
};

class ProbeRunRangeTest : public ::testing::TestWithParam<ProbeRunOutsideAgentRange> {};

TEST_P(ProbeRunRangeTest, IsRefusedNamingTheOptionBeforeACampaignRowExists) {
  ProbeRunConfig cfg;
  cfg.connect_timeout_ms = 500;
  GetParam().set(cfg);
  EXPECT_EQ(cfg.validate().message(), GetParam().message);
  const auto path = std::filesystem::temp_directory_path() / (test::scratch_name("weft-probe-range") + ".db");
  std::filesystem::remove(path);
  {
    auto db = db::Database::open(path.string());
    ASSERT_TRUE(db) << db.status().message();
    // Port 1 of loopback: nothing listens, so a run that got past validation
    // would fail at connect, after creating its campaign row.
    auto hosts = parse_hosts("a 127.0.0.1 1\nb 127.0.0.2 1\n", "hosts");
    ASSERT_TRUE(hosts) << hosts.status().message();
    auto run = run_probe(*db, *hosts, probe::MacKey::from_string("a shared secret of some length"), cfg);
    EXPECT_EQ(run.status().message(), GetParam().message);
    EXPECT_EQ(*db->query_int("SELECT COUNT(*) FROM campaigns"), 0);
  }
  std::filesystem::remove(path);
  std::filesystem::remove(path.string() + "-wal");
  std::filesystem::remove(path.string() + "-shm");
}

INSTANTIATE_TEST_SUITE_P(
    Options, ProbeRunRangeTest,
    ::testing::Values(
        ProbeRunOutsideAgentRange{"Probes", [](ProbeRunConfig& c) { c.probes_per_port = 1001; },
                                  "--probes 1001 is outside 1..1000 (what an agent accepts)"},
        ProbeRunOutsideAgentRange{"TimeoutMs", [](ProbeRunConfig& c) { c.timeout_ms = 60001; },
                                  "--timeout-ms 60001 is outside 1..60000 (what an agent accepts)"},
        ProbeRunOutsideAgentRange{"Retries", [](ProbeRunConfig& c) { c.retries = 101; },
                                  "--retries 101 is outside 0..100 (what an agent accepts)"},
        ProbeRunOutsideAgentRange{"Rate", [](ProbeRunConfig& c) { c.rate_pps = 2e9; },
                                  "--rate 2000000000 is outside 0..1e9 (what an agent accepts)"},
        ProbeRunOutsideAgentRange{"RateNaN", [](ProbeRunConfig& c) { c.rate_pps = std::nan(""); },
                                  "--rate nan is outside 0..1e9 (what an agent accepts)"},
        ProbeRunOutsideAgentRange{"PortWindow", [](ProbeRunConfig& c) { c.port_window = 4097; },
                                  "--port-window 4097 is outside 1..4096 (what an agent accepts)"},
        ProbeRunOutsideAgentRange{"PortsPerSpine", [](ProbeRunConfig& c) { c.ports_per_spine = 4097; },
                                  "--ports-per-spine 4097 is outside 0..4096 (what an agent accepts)"}),
    [](const auto& p) { return std::string(p.param.name); });

// The controller's wait for a sweep's next frame, for the largest plan an
// agent accepts: 4 x 60000 ms x 101 attempts x 1000 rounds overflowed int (to
// a negative product, so the 30 s floor); it is capped at a day.
TEST(ControlTest, TheSilenceAllowedASweepIsComputedWithoutOverflowAndCapped) {
  probe::CampaignPlan p;
  p.timeout_ms = 250;
  p.retries = 2;
  p.probes_per_port = 1;
  EXPECT_EQ(internal::sweep_silence_ms(p), 30000);
  p.timeout_ms = 60000;
  EXPECT_EQ(internal::sweep_silence_ms(p), 720000);  // 4 x 60000 x 3
  p.retries = 100;
  p.probes_per_port = 1000;
  EXPECT_EQ(internal::sweep_silence_ms(p), 86400000);
}

// A skip set of any size crosses in frames of at most the given number of
// ranges, each a valid message, and arrives whole.
class SkipFramesTest : public ::testing::TestWithParam<size_t> {};

TEST_P(SkipFramesTest, ASkipSetCrossesInBoundedFramesAndArrivesWhole) {
  const size_t per_frame = GetParam();
  probe::SkipSet skip;
  for (uint32_t p = 1; p < 30000; p += 3) skip.add(0x0a000101, static_cast<uint16_t>(p), static_cast<uint16_t>(p + 1));
  skip.add(0x0a000202, 7, 65535);
  for (uint32_t p = 100; p < 130; p += 2) skip.add(0x0a000303, static_cast<uint16_t>(p));
  ASSERT_EQ(skip.ranges(), 10000u + 1 + 15);
  const auto frames = encode_skip(77, skip, per_frame);
  EXPECT_EQ(frames.size(), (skip.ranges() + per_frame - 1) / per_frame);
  probe::SkipSet back;
  size_t ranges = 0;
  for (const auto& f : frames) {
    const std::string wire = f.dump();
    auto m = parse_control(wire);
    ASSERT_TRUE(m) << m.status().to_string();
    EXPECT_EQ(m->type, "skip");
    EXPECT_EQ(m->body["run"], 77);
    const size_t n = add_skip(m->body, back);
    EXPECT_LE(n, per_frame);
    ranges += n;
    EXPECT_LT(wire.size(), 16 * per_frame + 64);  // about 12 bytes a range
  }
  EXPECT_EQ(ranges, skip.ranges());
  EXPECT_EQ(back, skip);
}

INSTANTIATE_TEST_SUITE_P(FrameSizes, SkipFramesTest, ::testing::Values(1, 7, 4096, kSkipRangesPerFrame, 1u << 20));

TEST(ControlTest, ACampaignFromAnOlderControllerWithAnInlineSkipListIsRefused) {
  json j = encode_campaign(sample());
  j["skip"] = json::array({json::array({1, 2})});
  EXPECT_EQ(decode_campaign(j).status().message(),
            "field 'skip' is from an older controller: skip sets travel in 'skip' frames now");
}

TEST(ControlTest, StatsSurviveTheirJsonForm) {
  probe::ProbeStats s;
  s.sent = 9;
  s.answered = 7;
  s.reject(probe::Reject::kBadMac);
  s.reject(probe::Reject::kBadMac);
  s.reject(probe::Reject::kTruncated);
  const json j = json::parse(encode_stats(s).dump());  // through text, as on the wire
  const probe::ProbeStats back = decode_stats(j);
  EXPECT_EQ(back.sent, 9u);
  EXPECT_EQ(back.answered, 7u);
  EXPECT_EQ(back.rejected_for(probe::Reject::kBadMac), 2u);
  EXPECT_EQ(back.rejected_for(probe::Reject::kTruncated), 1u);
}

TEST(ControlTest, HandshakeProofsBindBothNoncesAndTheSecret) {
  const auto secret = probe::MacKey::from_string("a shared secret of some length");
  const std::string a(32, 'a'), c(32, 'c');
  const std::string p = client_proof(secret, a, c);
  EXPECT_EQ(p.size(), 64u);
  EXPECT_TRUE(proof_matches(p, client_proof(secret, a, c)));
  EXPECT_FALSE(proof_matches(p, client_proof(secret, c, a)));
  EXPECT_FALSE(proof_matches(p, agent_proof(secret, c, a))) << "the two directions use different labels";
  EXPECT_FALSE(proof_matches(p, client_proof(probe::MacKey::from_string("another secret entirely"), a, c)));
  EXPECT_FALSE(proof_matches(p, p.substr(0, 63)));
}

TEST(ControlTest, FramesCarryABigEndianLength) {
  const std::string f = frame(json{{"type", "status"}});
  ASSERT_GE(f.size(), 4u);
  EXPECT_EQ(frame_length(reinterpret_cast<const uint8_t*>(f.data())), f.size() - 4);
  EXPECT_EQ(f.substr(4), R"({"type":"status"})");
}

}  // namespace
}  // namespace weft::agent

namespace weft::agent {
namespace {

TEST(ControlTest, AMonitorOrderRoundTripsThroughTheParser) {
  MonitorCommand c;
  c.run = 9;
  c.nonce = std::string(32, 'a');
  c.dport = 4792;
  c.probe_dscp = 10;
  c.plan.tuples = {{0x0a000102, 49153}, {0x0a000301, 49999}};
  c.plan.rate_pps = 40;
  c.plan.timeout_ms = 120;
  c.plan.report_ms = 70;
  auto m = parse_control(encode_monitor(c).dump());
  ASSERT_TRUE(m) << m.status().to_string();
  auto back = decode_monitor(m->body);
  ASSERT_TRUE(back);
  EXPECT_EQ(back->run, 9u);
  EXPECT_EQ(back->dport, 4792);
  EXPECT_EQ(back->probe_dscp, 10);
  ASSERT_EQ(back->plan.tuples.size(), 2u);
  EXPECT_EQ(back->plan.tuples[1].dst_ip, 0x0a000301u);
  EXPECT_EQ(back->plan.tuples[1].sport, 49999);
  EXPECT_EQ(back->plan.rate_pps, 40);
  EXPECT_EQ(back->plan.timeout_ms, 120);
  EXPECT_EQ(back->plan.report_ms, 70);
}

TEST(ControlTest, AMonitorReportRoundTripsThroughTheParser) {
  probe::TupleTally t{.dst_ip = 0x0a000102, .sport = 49153, .sent = 40, .answered = 33, .lost = 6, .streak = 4,
                      .spine = -1, .rtt_ns = 81234};
  const json report = {{"type", "monitor_report"}, {"run", 9}, {"t_ns", 1700000000000000000ull},
                       {"rows", json::array({encode_tally(t)})}, {"arrivals", json::array({{0x0a000301u, 49999, 17}})}};
  auto m = parse_control(report.dump());
  ASSERT_TRUE(m) << m.status().to_string();
  auto back = decode_tally(m->body["rows"][0]);
  ASSERT_TRUE(back);
  EXPECT_EQ(back->sent, 40u);
  EXPECT_EQ(back->answered, 33u);
  EXPECT_EQ(back->lost, 6u);
  EXPECT_EQ(back->streak, 4u);
  EXPECT_EQ(back->spine, -1);
  EXPECT_EQ(back->rtt_ns, 81234u);
  auto a = decode_arrival(m->body["arrivals"][0]);
  ASSERT_TRUE(a);
  EXPECT_EQ(a->src_ip, 0x0a000301u);
  EXPECT_EQ(a->sport, 49999);
  EXPECT_EQ(a->count, 17u);
}

INSTANTIATE_TEST_SUITE_P(
    Monitor, BadFrameTest,
    ::testing::Values(
        Bad{"{\"type\":\"monitor\",\"run\":1,\"nonce\":\"00000000000000000000000000000000\",\"dport\":4791,"
            "\"probe_dscp\":8,\"rate\":10.0,\"timeout_ms\":100,\"report_ms\":100,\"tuples\":[[5,0]]}",
            "not [IPv4 address as a number, source port]"},
        Bad{"{\"type\":\"monitor\",\"run\":1,\"nonce\":\"00000000000000000000000000000000\",\"dport\":4791,"
            "\"probe_dscp\":8,\"rate\":10.0,\"timeout_ms\":100,\"report_ms\":100,\"tuples\":[[5,9],[5,9]]}",
            "listed twice"},
        Bad{"{\"type\":\"monitor\",\"run\":1,\"nonce\":\"00000000000000000000000000000000\",\"dport\":4791,"
            "\"probe_dscp\":8,\"rate\":0.5,\"timeout_ms\":100,\"report_ms\":100,\"tuples\":[]}",
            "monitor rate 0.5 probes/s"},
        Bad{"{\"type\":\"monitor_report\",\"run\":1,\"t_ns\":5,\"rows\":[[5,9,3,2,2,0,1,7]]}", "out of range"},
        Bad{"{\"type\":\"monitor_report\",\"run\":1,\"t_ns\":5,\"rows\":[[5,9,3,2,1,2,1,7]]}", "out of range"},
        Bad{"{\"type\":\"monitor_report\",\"run\":1,\"t_ns\":5,\"rows\":[],\"arrivals\":[[5,0,1]]}",
            "an arrival is not"}));

}  // namespace
}  // namespace weft::agent
