#include <gtest/gtest.h>

#include <map>
#include <string>

#include "weft/routing/plan.h"

namespace weft::routing {
namespace {

RoutePlan sample() {
  RoutePlan p;
  p.collective = "allreduce-hd";
  p.topology = "clos2-2x2x1x1";
  p.ranks = 2;
  p.flows = {{0, 1, "h1-1", "h2-1", "eth0", "eth0", "tcp", 49152, 29500, {"l1", "s2", "l2"}, {0, 1}, {}, "", "", 0, 0},
             {1, 0, "h2-1", "h1-1", "", "", "tcp", 49153, 29501, {"l2", "s1", "l1"}, {0, 1}, {}, "", "", 0, 0}};
  p.steps = {{0, "rs", 1, 1, 1}, {1, "ag", 1, 1, 1}};
  return p;
}

TEST(PlanFile, RoundTripsEveryField) {
  auto back = parse_plan(plan_to_json(sample()));
  ASSERT_TRUE(back) << back.status().message();
  EXPECT_EQ(*back, sample());
  ASSERT_NE(back->find(1, 0), nullptr);
  EXPECT_EQ(back->find(1, 0)->sport, 49153);
  EXPECT_EQ(back->find(0, 0), nullptr);
}

RoutePlan with_rounds() {
  RoutePlan p = sample();
  p.flows[0].rounds = {1, 0};
  p.steps[0].rounds = 2;
  return p;
}

TEST(PlanFile, RoundTripsRounds) {
  const std::string text = plan_to_json(with_rounds());
  auto back = parse_plan(text);
  ASSERT_TRUE(back) << back.status().message();
  EXPECT_EQ(*back, with_rounds());
  EXPECT_EQ(back->find(0, 1)->round_in(0), 1);
  EXPECT_EQ(back->find(0, 1)->round_in(1), 0);
  EXPECT_EQ(back->find(0, 1)->round_in(7), 0);
  EXPECT_EQ(back->find(1, 0)->round_in(0), 0);
}

// Several QPs of several connections between one pair of NIC addresses: the
// NCCL net plugin's lookup key (src_addr, dst_addr, conn, qp).
TEST(PlanFile, RoundTripsQpFlowsAndFindsThemByAddress) {
  RoutePlan p = sample();
  p.flows[1].protocol = p.flows[0].protocol = "udp";
  p.flows[1].dport = p.flows[0].dport = 4791;
  for (int conn = 0; conn < 2; ++conn) {
    for (int qp = 0; qp < 3; ++qp) {
      if (conn == 0 && qp == 0) continue;
      PlanFlow f = p.flows[0];
      f.conn = conn;
      f.qp = qp;
      f.sport = static_cast<uint16_t>(50000 + conn * 10 + qp);
      p.flows.push_back(f);
    }
  }
  for (auto& f : p.flows) {
    f.src_addr = f.src_rank == 0 ? "10.78.0.1" : "10.78.0.2";
    f.dst_addr = f.dst_rank == 0 ? "10.78.0.1" : "10.78.0.2";
  }
  auto back = parse_plan(plan_to_json(p));
  ASSERT_TRUE(back) << back.status().message();
  EXPECT_EQ(*back, p);
  ASSERT_NE(back->find_qp("10.78.0.1", "10.78.0.2", 1, 2), nullptr);
  EXPECT_EQ(back->find_qp("10.78.0.1", "10.78.0.2", 1, 2)->sport, 50012);
  EXPECT_EQ(back->find_qp("10.78.0.1", "10.78.0.2", 0, 0)->sport, 49152);
  EXPECT_EQ(back->find_qp("10.78.0.2", "10.78.0.1", 0, 0)->sport, 49153);
  EXPECT_EQ(back->find_qp("10.78.0.1", "10.78.0.2", 2, 0), nullptr);
  EXPECT_EQ(back->find_qp("10.78.0.2", "10.78.0.1", 0, 1), nullptr);
}

TEST(PlanFile, ASecondFlowOfOnePairConnAndQpIsRefused) {
  RoutePlan p = sample();
  p.flows.push_back(p.flows[0]);
  p.flows.back().qp = 1;
  ASSERT_TRUE(parse_plan(plan_to_json(p)));
  p.flows.push_back(p.flows.back());
  auto bad = parse_plan(plan_to_json(p));
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.status().message(), "route plan /flows/3: second flow 0 -> 1 (conn 0, qp 1)");
}

// Every TCP flow into a rank has that rank's listen port as dport.
TEST(PlanFile, TwoListenPortsOfOneRankAreRefused) {
  RoutePlan p = sample();
  p.ranks = 3;
  p.flows[0].dst_rank = 2;
  p.flows[1].dst_rank = 2;
  EXPECT_EQ(parse_plan(plan_to_json(p)).status().message(),
            "route plan /flows/1/dport: rank 2 listens on 29500 in another flow, not 29501");
  p.flows[1].dport = 29500;
  EXPECT_TRUE(parse_plan(plan_to_json(p)));
}

TEST(PlanFile, APlanWithoutRoundsWritesNoRoundFields) {
  EXPECT_EQ(plan_to_json(sample()).find("rounds"), std::string::npos);
}

// A plan inside an object (the plan epochs file): the plan as parse_plan
// reads it, the other members as their JSON text.
TEST(PlanMember, ReadsThePlanAndHandsBackTheOtherMembers) {
  const std::string text = "{\"version\": 1, \"job\": \"j-1\", \"epoch\": 7, \"plan\": " + plan_to_json(sample()) +
                           ", \"reason\": {\"link\": [\"s2\", \"l3\"]}}";
  auto doc = parse_plan_member(text, "plan");
  ASSERT_TRUE(doc) << doc.status().message();
  EXPECT_TRUE(doc->present);
  EXPECT_TRUE(doc->plan_status) << doc->plan_status.message();
  EXPECT_EQ(doc->plan, sample());
  const std::map<std::string, std::string, std::less<>> others = {
      {"version", "1"}, {"job", "\"j-1\""}, {"epoch", "7"}, {"reason", "{\"link\":[\"s2\",\"l3\"]}"}};
  EXPECT_EQ(doc->others, others);
}

TEST(PlanMember, AMissingOrBadPlanIsSaidAndTheRestStillRead) {
  auto none = parse_plan_member("{\"epoch\": 3}", "plan");
  ASSERT_TRUE(none);
  EXPECT_FALSE(none->present);
  EXPECT_EQ(none->others.at("epoch"), "3");
  auto array = parse_plan_member("{\"plan\": [], \"epoch\": 3}", "plan");
  ASSERT_TRUE(array);
  EXPECT_FALSE(array->present);
  std::string text = plan_to_json(sample());
  text.replace(text.find("\"sport\": 49152"), 14, "\"sport\": 0");
  auto bad = parse_plan_member("{\"plan\": " + text + ", \"epoch\": 3}", "plan");
  ASSERT_TRUE(bad);
  EXPECT_TRUE(bad->present);
  EXPECT_EQ(bad->plan_status.message(), "route plan /flows/0/sport: 0 is not a port (1..65535)");
  EXPECT_EQ(bad->others.at("epoch"), "3");
  // Of a member given twice the last counts.
  auto twice = parse_plan_member("{\"plan\": " + text + ", \"plan\": " + plan_to_json(sample()) + "}", "plan");
  ASSERT_TRUE(twice);
  EXPECT_TRUE(twice->plan_status);
  EXPECT_EQ(twice->plan, sample());
}

TEST(PlanMember, TextThatIsNoObjectIsRefused) {
  EXPECT_EQ(parse_plan_member("[1]", "plan").status().message(), "/: not an object");
  auto garbage = parse_plan_member("{not json", "plan");
  ASSERT_FALSE(garbage);
  EXPECT_EQ(garbage.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(garbage.status().message().rfind("not JSON: ", 0), 0u) << garbage.status().message();
}

struct Corrupt {
  const char* from;
  const char* to;
  const char* error;
};

class PlanFileErrors : public ::testing::TestWithParam<Corrupt> {};

TEST_P(PlanFileErrors, NameTheJsonPath) {
  std::string text = plan_to_json(sample());
  auto pos = text.find(GetParam().from);
  ASSERT_NE(pos, std::string::npos) << text;
  text.replace(pos, std::string(GetParam().from).size(), GetParam().to);
  auto p = parse_plan(text);
  ASSERT_FALSE(p);
  EXPECT_EQ(p.status().message(), GetParam().error);
}

INSTANTIATE_TEST_SUITE_P(
    Cases, PlanFileErrors,
    ::testing::Values(Corrupt{"\"version\": 1", "\"version\": 2", "route plan /version: unsupported version 2 (this weft reads 1)"},
                      Corrupt{"\"sport\": 49152", "\"sport\": 70000", "route plan /flows/0/sport: 70000 is not a port (1..65535)"},
                      Corrupt{"\"dst_rank\": 1", "\"dst_rank\": 5", "route plan /flows/0/dst_rank: 5 is not a rank of 2"},
                      Corrupt{"\"protocol\": \"tcp\"", "\"protocol\": \"sctp\"", "route plan /flows/0/protocol: \"sctp\" is not udp or tcp"},
                      Corrupt{"\"ranks\": 2", "\"ranks\": \"2\"", "route plan /ranks: wrong type (string)"},
                      Corrupt{"\"steps\": [\n    0,\n    1\n   ]", "\"steps\": [0, 1], \"rounds\": [0]",
                              "route plan /flows/0/rounds: 1 rounds for 2 steps (one per step)"},
                      Corrupt{"\"steps\": [\n    0,\n    1\n   ]", "\"steps\": [0, 1], \"rounds\": [0, -1]",
                              "route plan /flows/0/rounds: round -1 is negative"},
                      Corrupt{"\"steps\": [\n    0,\n    1\n   ]", "\"steps\": [0, 1], \"rounds\": [0, 1]",
                              "route plan /flows/0/rounds: round 1 in step 1, which has 1 round"},
                      Corrupt{"\"steps\": [\n    0,\n    1\n   ]", "\"steps\": [0, 1], \"qp\": -1",
                              "route plan /flows/0/qp: -1 is negative"},
                      Corrupt{"{", "[", "route plan: parse error at line 2, column 14: syntax error while parsing array - unexpected ':'; expected ']'"},
                      // Numbers are integers that fit their field: no 2.0 for 2, no true for 1.
                      Corrupt{"\"ranks\": 2", "\"ranks\": 2.0", "route plan /ranks: 2.0 is not an integer"},
                      Corrupt{"\"protocol\": \"tcp\"", "\"protocol\": \"t\\ncp\"",
                              "route plan /flows/0/protocol: \"t\\ncp\" is not udp or tcp"},
                      Corrupt{"\"ranks\": 2", "\"ranks\": true", "route plan /ranks: wrong type (boolean)"},
                      Corrupt{"\"ranks\": 2", "\"ranks\": 4294967298", "route plan /ranks: 4294967298 is out of range"},
                      Corrupt{"\"ranks\": 2", "\"ranks\": 1e999", "route plan: number overflow parsing '1e999'"},
                      Corrupt{"\"sport\": 49152", "\"sport\": 18446744073709551615",
                              "route plan /flows/0/sport: 18446744073709551615 is out of range"},
                      Corrupt{"\"sport\": 49152", "\"sport\": -3", "route plan /flows/0/sport: -3 is not a port (1..65535)"},
                      Corrupt{"\"s2\"", "2", "route plan /flows/0/path/1: wrong type (number)"},
                      Corrupt{"\"steps\": [\n    0,\n    1\n   ]", "\"steps\": [0, null]",
                              "route plan /flows/0/steps/1: wrong type (null)"},
                      Corrupt{"\"path\": [", "\"path\": 7, \"x\": [", "route plan /flows/0/path: wrong type (number)"},
                      Corrupt{"\"src_host\"", "\"source_host\"", "route plan /flows/0/src_host: missing"},
                      Corrupt{"\"src_rank\": 1", "\"src_rank\": 0", "route plan /flows/1: a flow from a rank to itself"},
                      Corrupt{"\"collective\": \"allreduce-hd\"", "\"collective\": null",
                              "route plan /collective: wrong type (null)"},
                      Corrupt{"\"flows\": [", "\"flows\": 3, \"x\": [", "route plan /flows: missing or not an array"},
                      Corrupt{"\"max_load\": 1", "\"max_load\": \"1\"", "route plan /steps/0/max_load: wrong type (string)"},
                      Corrupt{"\"phase\": \"rs\",", "\"phase\": \"rs\", \"rounds\": 0,",
                              "route plan /steps/0/rounds: 0 rounds (at least 1)"}));

// The whole text is one value; a document that is not an object, or no
// JSON at all, is one line saying so (with the line and column of the fault).
TEST(PlanFile, TextThatIsNoPlanObjectIsOneLine) {
  EXPECT_EQ(parse_plan("[]").status().message(), "route plan /: not a JSON object");
  EXPECT_EQ(parse_plan("").status().message(),
            "route plan: parse error at line 1, column 1: syntax error while parsing value - unexpected end of input; "
            "expected '[', '{', or a literal");
  EXPECT_EQ(parse_plan("{} }").status().message(),
            "route plan: parse error at line 1, column 4: syntax error while parsing value - unexpected '}'; expected "
            "end of input");
}

// A UTF-8 byte order mark before the plan is passed over (RFC 8259 8.1).
TEST(PlanFile, AByteOrderMarkIsPassedOver) {
  auto back = parse_plan("\xEF\xBB\xBF" + plan_to_json(sample()));
  ASSERT_TRUE(back) << back.status().message();
  EXPECT_EQ(*back, sample());
}

// JSON the reader cannot hold is refused with a line that says what it
// may be, not taken in part.
TEST(PlanFile, AnIntegerBeyondSixtyFourBitsIsRefusedWithTheReason) {
  std::string text = plan_to_json(sample());
  text.replace(text.find("\"ranks\": 2"), 10, "\"ranks\": 2, \"meta\": 123456789012345678901234567890");
  auto p = parse_plan(text);
  ASSERT_FALSE(p);
  EXPECT_NE(p.status().message().find("an integer beyond 64 bits"), std::string::npos) << p.status().message();
}

// Readers ignore members added later; of a member given twice the last
// counts (as nlohmann::json's tree kept it).
TEST(PlanFile, UnknownMembersAreIgnoredAndTheLastOfTwinsCounts) {
  std::string text = plan_to_json(sample());
  text.replace(text.find("\"sport\": 49152"), 14, "\"sport\": 1, \"future\": {\"a\": [1, 2]}, \"sport\": 49152");
  text.replace(text.find("\"ranks\": 2"), 10, "\"ranks\": 2, \"meta\": null");
  auto back = parse_plan(text);
  ASSERT_TRUE(back) << back.status().message();
  EXPECT_EQ(*back, sample());
}

}  // namespace
}  // namespace weft::routing
