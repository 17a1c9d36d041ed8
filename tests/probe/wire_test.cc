// The probe wire format and its acceptance rules: exact bytes, every rejection
// reason, replay and staleness.
#include <gtest/gtest.h>

#include <array>

#include "weft/probe/backend.h"
#include "weft/probe/validate.h"

namespace weft::probe {
namespace {

constexpr uint32_t kSender = 0x0a000101, kReflector = 0x0a000201;  // 10.0.1.1 -> 10.0.2.1

ProbeHeader request(uint32_t seq, uint16_t sport) {
  ProbeHeader h;
  h.type = ProbeType::kRequest;
  h.campaign = 0x01020304;
  h.sequence = seq;
  h.sport = sport;
  h.dport = 4791;
  h.send_time_ns = realtime_ns();
  h.tuple = {.src_ip = kSender, .dst_ip = kReflector, .proto = 17, .sport = sport, .dport = 4791};
  return h;
}

std::array<uint8_t, kProbeSize> encode(const ProbeHeader& h, const MacKey& k) {
  std::array<uint8_t, kProbeSize> b{};
  encode_probe(h, k, b);
  return b;
}

TEST(WireTest, EncodesBigEndianFieldsAtTheirOffsets) {
  ProbeHeader h;
  h.type = ProbeType::kReply;
  h.flags = kFlagTcp;
  h.dscp_seen = 11;
  h.campaign = 0xa1b2c3d4;
  h.sequence = 7;
  h.sport = 49153;
  h.dport = 4791;
  h.spine = 3;
  h.reply_port = 0x1234;
  h.send_time_ns = 0x0102030405060708ull;
  h.tuple = {.src_ip = kReflector, .dst_ip = kSender, .proto = 17, .sport = 4791, .dport = 0x1234};
  const auto b = encode(h, MacKey::from_string("k"));
  const std::array<uint8_t, kMacOffset> want = {
      0x57, 0x46, 0x50, 0x42, 2, 2, 1, 11, 0xa1, 0xb2, 0xc3, 0xd4, 0, 0, 0, 7,  //
      0xc0, 0x01, 0x12, 0xb7, 3, 17, 0x12, 0x34, 1, 2, 3, 4, 5, 6, 7, 8,       //
      10, 0, 2, 1, 10, 0, 1, 1, 0x12, 0xb7, 0x12, 0x34, 0, 0, 0, 0};
  EXPECT_TRUE(std::equal(want.begin(), want.end(), b.begin()));
  ProbeHeader back;
  Reject why{};
  ASSERT_TRUE(parse_probe(b, &back, &why));
  EXPECT_EQ(back.campaign, h.campaign);
  EXPECT_EQ(back.sport, 49153);
  EXPECT_EQ(back.reply_port, 0x1234);
  EXPECT_EQ(back.send_time_ns, h.send_time_ns);
  EXPECT_EQ(back.spine, 3);
  EXPECT_EQ(back.tuple, h.tuple);
  EXPECT_TRUE(verify_probe_mac(b, MacKey::from_string("k")));
  EXPECT_FALSE(verify_probe_mac(b, MacKey::from_string("K")));
}

TEST(WireTest, SpineFromDscpNamesTheSpineOrUnknown) {
  EXPECT_EQ(spine_from_dscp(8, 8), 0);
  EXPECT_EQ(spine_from_dscp(13, 8), 5);
  EXPECT_EQ(spine_from_dscp(63, 8), 55);
  EXPECT_EQ(spine_from_dscp(7, 8), kSpineUnknown);
  EXPECT_EQ(spine_from_dscp(64, 8), kSpineUnknown);
}

struct BadCase {
  const char* name;
  Reject want;
};

class RequestAcceptorTest : public ::testing::Test {
 protected:
  void SetUp() override { keys_.set(0x01020304, key_); }
  bool accept(std::span<const uint8_t> pkt, uint64_t now = realtime_ns()) {
    ProbeHeader h;
    return acceptor_.accept(pkt, {.src_ip = kSender, .dst_ip = kReflector, .proto = 17, .sport = 49152, .dport = 4791},
                            now, &h);
  }
  MacKey key_ = MacKey::from_string("campaign key");
  KeyRing keys_;
  ProbeStats stats_;
  RequestAcceptor acceptor_{keys_, stats_};
};

TEST_F(RequestAcceptorTest, EachMalformationIsCountedUnderItsReason) {
  auto good = encode(request(1, 49152), key_);
  EXPECT_TRUE(accept(good));

  auto truncated = encode(request(2, 49152), key_);
  EXPECT_FALSE(accept(std::span<const uint8_t>(truncated.data(), kProbeSize - 1)));
  EXPECT_FALSE(accept(std::span<const uint8_t>(truncated.data(), kProbePrefix - 1)));
  auto magic = encode(request(3, 49152), key_);
  magic[0] ^= 1;
  EXPECT_FALSE(accept(magic));
  auto version = encode(request(4, 49152), key_);
  version[4] = 3;
  EXPECT_FALSE(accept(version));
  // A version-1 probe: 48 bytes, its MAC over bytes 0..31 only.
  auto v1 = encode(request(4, 49152), key_);
  v1[4] = 1;
  const Digest v1_mac = key_.mac(std::span<const uint8_t>(v1.data(), 32));
  std::copy(v1_mac.begin(), v1_mac.begin() + 16, v1.begin() + 32);
  EXPECT_FALSE(accept(std::span<const uint8_t>(v1.data(), 48)));
  auto type = encode(request(5, 49152), key_);
  type[5] = 9;
  EXPECT_FALSE(accept(type));
  ProbeHeader reply = request(6, 49152);
  reply.type = ProbeType::kReply;
  EXPECT_FALSE(accept(encode(reply, key_)));
  ProbeHeader other = request(7, 49152);
  other.campaign = 99;
  EXPECT_FALSE(accept(encode(other, key_)));
  EXPECT_FALSE(accept(encode(request(8, 49152), MacKey::from_string("wrong key"))));
  auto flipped = encode(request(9, 49152), key_);
  flipped[20] ^= 0x40;  // tamper with a MACed byte
  EXPECT_FALSE(accept(flipped));
  ProbeHeader old = request(10, 49152);
  old.send_time_ns -= 31'000'000'000ull;
  EXPECT_FALSE(accept(encode(old, key_)));
  EXPECT_FALSE(accept(good)) << "the same request twice is a replay";

  EXPECT_EQ(stats_.rejected_for(Reject::kTruncated), 2u);
  EXPECT_EQ(stats_.rejected_for(Reject::kBadMagic), 1u);
  EXPECT_EQ(stats_.rejected_for(Reject::kBadVersion), 2u) << "version 1 is counted as bad_version, not truncated";
  EXPECT_EQ(stats_.rejected_for(Reject::kBadType), 2u);
  EXPECT_EQ(stats_.rejected_for(Reject::kUnknownCampaign), 1u);
  EXPECT_EQ(stats_.rejected_for(Reject::kBadMac), 2u);
  EXPECT_EQ(stats_.rejected_for(Reject::kStale), 1u);
  EXPECT_EQ(stats_.rejected_for(Reject::kReplayed), 1u);
  EXPECT_EQ(stats_.rejected_total(), 12u);
  EXPECT_EQ(stats_.rejected_by_name().at("bad_mac"), 2);
}

TEST(MacTest, DerivedKeysDependOnEveryInput) {
  const MacKey secret = MacKey::from_string("shared secret");
  const auto a = MacKey::derive(secret, "probe", 7, "nonce").bytes();
  EXPECT_EQ(a, MacKey::derive(secret, "probe", 7, "nonce").bytes());
  EXPECT_NE(a, MacKey::derive(secret, "probe", 8, "nonce").bytes());
  EXPECT_NE(a, MacKey::derive(secret, "probe", 7, "nonce2").bytes());
  EXPECT_NE(a, MacKey::derive(MacKey::from_string("other"), "probe", 7, "nonce").bytes());
  // RFC 4231 test case 2: HMAC-SHA256("Jefe", "what do ya want for nothing?").
  const std::string msg = "what do ya want for nothing?";
  const auto d = MacKey::from_string("Jefe").mac(std::span<const uint8_t>(
      reinterpret_cast<const uint8_t*>(msg.data()), msg.size()));
  EXPECT_EQ(to_hex(d), "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
  EXPECT_EQ(*from_hex("00ff7a"), (std::vector<uint8_t>{0, 255, 0x7a}));
  EXPECT_FALSE(from_hex("0g"));
}

}  // namespace
}  // namespace weft::probe

namespace weft::probe {
namespace {

// Keys a dead controller never retired cannot pile up: past its capacity the
// ring forgets the key set longest ago, and setting a key again renews it.
class KeyRingCapacity : public ::testing::TestWithParam<size_t> {};

TEST_P(KeyRingCapacity, HoldsAtMostItsCapacityAndForgetsTheLongestAgoSet) {
  const size_t cap = GetParam();
  KeyRing ring(cap);
  const MacKey k = MacKey::from_string("campaign key");
  for (uint32_t c = 1; c <= cap + 5; ++c) {
    ring.set(c, k);
    if (c == 2) ring.set(1, k);  // campaign 1 set again: now newer than 2 (the ring still has room)
  }
  EXPECT_EQ(ring.size(), cap);
  EXPECT_EQ(ring.forgotten(), 5u);
  // Forgotten, oldest first: 2, then 1 (renewed after 2), then 3, 4, 5.
  std::vector<uint32_t> gone;
  for (uint32_t c = 1; c <= cap + 5; ++c) {
    if (!ring.find(c)) gone.push_back(c);
  }
  EXPECT_EQ(gone, (std::vector<uint32_t>{1, 2, 3, 4, 5}));
  ring.erase(cap + 5);
  EXPECT_EQ(ring.size(), cap - 1);
  EXPECT_EQ(ring.forgotten(), 5u);  // an erase is no forgetting
}

INSTANTIATE_TEST_SUITE_P(Capacities, KeyRingCapacity, ::testing::Values(2, 3, 256));

TEST(KeyRing, ACapacityOfOneKeepsTheNewestKey) {
  KeyRing ring(1);
  const MacKey k = MacKey::from_string("campaign key");
  ring.set(7, k);
  ring.set(8, k);
  EXPECT_FALSE(ring.find(7));
  EXPECT_TRUE(ring.find(8));
  EXPECT_EQ(ring.forgotten(), 1u);
}

}  // namespace
}  // namespace weft::probe
