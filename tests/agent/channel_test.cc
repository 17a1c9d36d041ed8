// The sealed control channel: what passes, and why each altered frame fails.
#include <gtest/gtest.h>

#include <fstream>
#include <iterator>

#include "weft/agent/channel.h"

namespace weft::agent {
namespace {

using nlohmann::json;

const probe::MacKey kSecret = probe::MacKey::from_string("a shared secret of some length");
const std::string kAgentNonce(32, 'a'), kClientNonce(32, 'c');

// The sealed body of a whole frame (the bytes after the 4-byte length).
std::string body_of(const std::string& frame) {
  EXPECT_EQ(frame_length(reinterpret_cast<const uint8_t*>(frame.data())), frame.size() - 4);
  return frame.substr(4);
}

struct Pair {
  Sealer out;
  Opener in;
};

Pair to_agent() {
  const SessionKeys k = session_keys(kSecret, kAgentNonce, kClientNonce);
  return {Sealer(k.to_agent, Direction::kToAgent), Opener(k.to_agent, Direction::kToAgent)};
}

TEST(ChannelTest, FramesOpenInOrderAndCarryTheirText) {
  Pair p = to_agent();
  for (int i = 0; i < 5; ++i) {
    const json j = {{"type", "status"}, {"i", i}};
    ControlReject why{};
    auto text = p.in.open(body_of(p.out.seal(j)), &why);
    ASSERT_TRUE(text) << text.status().to_string();
    EXPECT_EQ(*text, j.dump());
  }
  EXPECT_EQ(p.in.next(), 5u);
  EXPECT_EQ(p.out.next(), 5u);
}

TEST(ChannelTest, AnEmptyTextIsSealedToo) {
  Pair p = to_agent();
  const std::string f = p.out.seal_text("");
  EXPECT_EQ(f.size(), 4 + kSealOverhead);
  ControlReject why{};
  auto text = p.in.open(body_of(f), &why);
  ASSERT_TRUE(text);
  EXPECT_EQ(*text, "");
}

TEST(ChannelTest, AReplayedFrameIsRejectedAsReplayed) {
  Pair p = to_agent();
  const std::string f0 = body_of(p.out.seal_text("{\"type\":\"status\"}"));
  ControlReject why{};
  ASSERT_TRUE(p.in.open(f0, &why));
  EXPECT_FALSE(p.in.open(f0, &why));
  EXPECT_EQ(why, ControlReject::kReplayed);
  EXPECT_EQ(p.in.next(), 1u) << "a rejected frame must not move the counter";
}

TEST(ChannelTest, SwappedFramesAreRejectedAsOutOfOrder) {
  Pair p = to_agent();
  const std::string f0 = body_of(p.out.seal_text("{\"n\":0}"));
  const std::string f1 = body_of(p.out.seal_text("{\"n\":1}"));
  ControlReject why{};
  EXPECT_FALSE(p.in.open(f1, &why));
  EXPECT_EQ(why, ControlReject::kOutOfOrder);
  ASSERT_TRUE(p.in.open(f0, &why)) << "the receiver still expects frame 0";
}

TEST(ChannelTest, ABodyShorterThanItsSealIsTruncated) {
  Pair p = to_agent();
  const std::string f = body_of(p.out.seal_text("{}"));
  for (size_t n : {size_t{0}, size_t{1}, size_t{8}, size_t{39}}) {
    ControlReject why{};
    EXPECT_FALSE(p.in.open(f.substr(0, n), &why)) << n;
    EXPECT_EQ(why, ControlReject::kTruncated) << n;
  }
}

// Every single-bit change anywhere in the body, and every shortening that
// keeps the seal, fails the tag.
TEST(ChannelTest, AnyAlteredOrShortenedBodyFailsTheTag) {
  Pair p = to_agent();
  const std::string f = body_of(p.out.seal_text(R"({"type":"campaign","targets":[167772417]})"));
  for (size_t i = 0; i < f.size(); ++i) {
    for (int bit = 0; bit < 8; ++bit) {
      std::string g = f;
      g[i] = static_cast<char>(g[i] ^ (1 << bit));
      ControlReject why{};
      ASSERT_FALSE(p.in.open(g, &why)) << "byte " << i << " bit " << bit;
      // Flipping a counter bit gives a counter the tag was not made for.
      ASSERT_EQ(why, ControlReject::kBadTag) << "byte " << i << " bit " << bit;
    }
  }
  for (size_t n = kSealOverhead; n < f.size(); ++n) {
    ControlReject why{};
    ASSERT_FALSE(p.in.open(f.substr(0, n), &why)) << n;
    ASSERT_EQ(why, ControlReject::kBadTag) << n;
  }
}

TEST(ChannelTest, KeysDependOnDirectionNoncesAndSecret) {
  const SessionKeys k = session_keys(kSecret, kAgentNonce, kClientNonce);
  Sealer out(k.to_agent, Direction::kToAgent);
  const std::string f = body_of(out.seal_text("{}"));
  ControlReject why{};
  auto fails = [&](const probe::MacKey& key, Direction d) {
    Opener in(key, d);
    return !in.open(f, &why) && why == ControlReject::kBadTag;
  };
  EXPECT_TRUE(fails(k.to_controller, Direction::kToController)) << "the other direction's key";
  EXPECT_TRUE(fails(k.to_agent, Direction::kToController)) << "the right key, the direction reflected";
  EXPECT_TRUE(fails(session_keys(kSecret, kClientNonce, kAgentNonce).to_agent, Direction::kToAgent))
      << "nonces swapped: another session";
  EXPECT_TRUE(fails(session_keys(kSecret, kAgentNonce, std::string(32, 'd')).to_agent, Direction::kToAgent))
      << "another client nonce: another session";
  EXPECT_TRUE(fails(session_keys(probe::MacKey::from_string("another secret entirely"), kAgentNonce, kClientNonce)
                        .to_agent,
                    Direction::kToAgent));
  EXPECT_FALSE(fails(k.to_agent, Direction::kToAgent));
}

// The fuzzer's seed session was sealed by a separate implementation of the
// format in docs/agent.md (Python's hmac); the channel must open every frame.
TEST(ChannelTest, OpensFramesSealedFromTheDocumentedFormat) {
  std::ifstream in(std::string(WEFT_SOURCE_DIR) + "/tests/fuzz/corpus/sealed/stream-session", std::ios::binary);
  const std::string seed((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  ASSERT_GT(seed.size(), 1u);
  const SessionKeys k = session_keys(probe::MacKey::from_string("weft fuzz secret"), std::string(32, 'a'),
                                     std::string(32, 'c'));
  Opener opener(k.to_agent, Direction::kToAgent);
  std::string_view rest = std::string_view(seed).substr(1);  // the fuzzer's mode byte
  std::vector<std::string> types;
  while (rest.size() >= 4) {
    const uint32_t n = frame_length(reinterpret_cast<const uint8_t*>(rest.data()));
    ControlReject why{};
    auto text = opener.open(rest.substr(4, n), &why);
    ASSERT_TRUE(text) << "frame " << types.size() << ": " << control_reject_name(why);
    types.push_back(json::parse(*text).value("type", ""));
    rest.remove_prefix(4 + n);
  }
  EXPECT_EQ(types, (std::vector<std::string>{"hosts", "announce", "campaign", "status", "retire"}));
}

}  // namespace
}  // namespace weft::agent
