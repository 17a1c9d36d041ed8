// The probe MAC covers the packet's 5-tuple (wire.h): a request or reply whose
// addresses, ports or protocol were altered on the way, or that is sent again
// from or to another address, is refused under its own reason; forged packets
// never reach the replay guard.
#include <gtest/gtest.h>

#include <array>
#include <functional>

#include "weft/probe/validate.h"

namespace weft::probe {
namespace {

constexpr uint32_t kTupleRun = 0x0badcafe;
constexpr uint32_t kTupleSender = 0x0a000101, kTupleReflector = 0x0a000201, kElsewhere = 0x0a000909;

FiveTuple request_tuple() {
  return {.src_ip = kTupleSender, .dst_ip = kTupleReflector, .proto = 17, .sport = 49153, .dport = 4791};
}

std::array<uint8_t, kProbeSize> make(ProbeType type, const FiveTuple& t, uint32_t seq, uint64_t now,
                                     const MacKey& key) {
  ProbeHeader h;
  h.type = type;
  h.campaign = kTupleRun;
  h.sequence = seq;
  h.sport = 49153;
  h.dport = 4791;
  h.send_time_ns = now;
  h.tuple = t;
  std::array<uint8_t, kProbeSize> b{};
  encode_probe(h, key, b);
  return b;
}

struct Alteration {
  const char* name;
  std::function<void(FiveTuple&)> alter;
  Reject want;
};

void PrintTo(const Alteration& a, std::ostream* os) { *os << a.name; }

const Alteration kAlterations[] = {
    {"SourceAddress", [](FiveTuple& t) { t.src_ip = kElsewhere; }, Reject::kBadSource},
    {"SourcePort", [](FiveTuple& t) { t.sport ^= 1; }, Reject::kBadSource},
    {"DestinationAddress", [](FiveTuple& t) { t.dst_ip = kElsewhere; }, Reject::kBadDestination},
    {"DestinationPort", [](FiveTuple& t) { t.dport = 4792; }, Reject::kBadDestination},
    {"Protocol", [](FiveTuple& t) { t.proto = 6; }, Reject::kBadDestination},
};

class TupleAlterationTest : public ::testing::TestWithParam<Alteration> {
 protected:
  void SetUp() override {
    keys_.set(kTupleRun, key_);
    seen_ = request_tuple();
    GetParam().alter(seen_);
  }
  MacKey key_ = MacKey::from_string("tuple test key");
  KeyRing keys_;
  ProbeStats stats_;
  RequestAcceptor acc_{keys_, stats_};
  const uint64_t now_ = realtime_ns();
  FiveTuple seen_;  // the request's 5-tuple with the case's field altered
};

// On the wire: the headers were rewritten, the payload left alone.
TEST_P(TupleAlterationTest, ARequestArrivingWithAnAlteredFieldIsRefusedUnderItsReason) {
  const auto pkt = make(ProbeType::kRequest, request_tuple(), 1, now_, key_);
  ProbeHeader h;
  EXPECT_FALSE(acc_.accept(pkt, seen_, now_, &h));
  EXPECT_EQ(stats_.rejected_for(GetParam().want), 1u);
  EXPECT_EQ(stats_.rejected_total(), 1u);
  EXPECT_EQ(acc_.guard().senders(), 0u) << "a refused request leaves no replay state";
  EXPECT_TRUE(acc_.accept(pkt, request_tuple(), now_, &h)) << "the unaltered request is still fresh";
}

// The attacker also rewrote the payload's copy of the field to match: the MAC fails.
TEST_P(TupleAlterationTest, ARequestWhosePayloadTupleWasRewrittenToMatchFailsTheMac) {
  const auto pkt = make(ProbeType::kRequest, request_tuple(), 1, now_, key_);
  // The same header with the altered tuple, under the genuine packet's tag.
  auto rewritten = make(ProbeType::kRequest, seen_, 1, now_, key_);
  ASSERT_FALSE(std::equal(pkt.begin(), pkt.begin() + kMacOffset, rewritten.begin()));
  std::copy(pkt.begin() + kMacOffset, pkt.end(), rewritten.begin() + kMacOffset);
  ProbeHeader h;
  EXPECT_FALSE(acc_.accept(rewritten, seen_, now_, &h));
  EXPECT_EQ(stats_.rejected_for(Reject::kBadMac), 1u);
  EXPECT_EQ(stats_.rejected_total(), 1u);
}

TEST_P(TupleAlterationTest, AReplyArrivingWithAnAlteredFieldIsRefusedUnderItsReason) {
  const FiveTuple reply{.src_ip = kTupleReflector, .dst_ip = kTupleSender, .proto = 17, .sport = 4791, .dport = 49153};
  const auto pkt = make(ProbeType::kReply, reply, 1, realtime_ns(), key_);
  FiveTuple seen = reply;
  GetParam().alter(seen);
  ProbeHeader h;
  const bool altered = !(seen == reply);
  ASSERT_TRUE(altered);
  EXPECT_FALSE(accept_reply(pkt, seen, kTupleRun, key_, ProbeType::kReply, stats_, &h));
  EXPECT_EQ(stats_.rejected_for(GetParam().want), 1u);
  EXPECT_TRUE(accept_reply(pkt, reply, kTupleRun, key_, ProbeType::kReply, stats_, &h));
  EXPECT_EQ(stats_.rejected_total(), 1u);
}

INSTANTIATE_TEST_SUITE_P(Fields, TupleAlterationTest, ::testing::ValuesIn(kAlterations),
                         [](const auto& p) { return std::string(p.param.name); });

class CapturedRequestTest : public ::testing::Test {
 protected:
  void SetUp() override { keys_.set(kTupleRun, key_); }
  MacKey key_ = MacKey::from_string("captured");
  KeyRing keys_;
  ProbeStats stats_;
  RequestAcceptor acc_{keys_, stats_};
};

TEST_F(CapturedRequestTest, ReplayedFromItsOwnSourceOrASpoofedOneItIsRefusedAndLegitRequestsStillPass) {
  const uint64_t now = realtime_ns();
  const auto captured = make(ProbeType::kRequest, request_tuple(), 100, now, key_);
  ProbeHeader h;
  ASSERT_TRUE(acc_.accept(captured, request_tuple(), now, &h));
  uint32_t seq = 101;
  int legit = 0;
  for (uint32_t spoofed = 0x0a000001; spoofed < 0x0a000001 + 1000; ++spoofed) {
    FiveTuple from = request_tuple();
    from.src_ip = spoofed;
    if (spoofed == kTupleSender) continue;
    EXPECT_FALSE(acc_.accept(captured, from, now + 1000, &h));
    EXPECT_FALSE(acc_.accept(captured, request_tuple(), now + 1000, &h));  // from its own source
    const auto next = make(ProbeType::kRequest, request_tuple(), seq++, now + 2000, key_);
    legit += acc_.accept(next, request_tuple(), now + 2000, &h);
  }
  EXPECT_EQ(legit, 999);
  EXPECT_EQ(stats_.rejected_for(Reject::kBadSource), 999u);
  EXPECT_EQ(stats_.rejected_for(Reject::kReplayed), 999u);
  EXPECT_EQ(stats_.rejected_total(), 999u * 2);
  EXPECT_EQ(acc_.guard().senders(), 1u);
}

// 100,000 forged requests from 100,000 spoofed sources (random tags, another
// key, a genuine request re-addressed): not one replay window is created.
TEST_F(CapturedRequestTest, AFloodOfForgedRequestsLeavesTheGuardEmpty) {
  const uint64_t now = realtime_ns();
  const MacKey other = MacKey::from_string("another key");
  const auto genuine = make(ProbeType::kRequest, request_tuple(), 7, now, key_);
  ProbeHeader h;
  for (uint32_t i = 0; i < 100'000; ++i) {
    FiveTuple t = request_tuple();
    t.src_ip = 0x0b000000 + i;
    switch (i % 3) {
      case 0: {
        auto p = make(ProbeType::kRequest, t, i, now, key_);
        p[kMacOffset + i % 16] ^= static_cast<uint8_t>(1 + i % 255);
        EXPECT_FALSE(acc_.accept(p, t, now, &h));
        break;
      }
      case 1: EXPECT_FALSE(acc_.accept(make(ProbeType::kRequest, t, i, now, other), t, now, &h)); break;
      case 2: EXPECT_FALSE(acc_.accept(genuine, t, now, &h)); break;
    }
  }
  EXPECT_EQ(stats_.rejected_for(Reject::kBadMac), 66'667u);
  EXPECT_EQ(stats_.rejected_for(Reject::kBadSource), 33'333u);
  EXPECT_EQ(acc_.guard().senders(), 0u);
}

// The reflector's clock steps back after a sender's window was forgotten:
// the guard refuses every send time up to the newest it forgot.
TEST_F(CapturedRequestTest, AClockSteppedBackDoesNotReopenAForgottenRequest) {
  const uint64_t t0 = realtime_ns(), s = 1'000'000'000ull;
  const auto captured = make(ProbeType::kRequest, request_tuple(), 1, t0, key_);
  ProbeHeader h;
  ASSERT_TRUE(acc_.accept(captured, request_tuple(), t0, &h));
  FiveTuple b = request_tuple();
  b.src_ip = kElsewhere;
  ASSERT_TRUE(acc_.accept(make(ProbeType::kRequest, b, 1, t0 + 32 * s, key_), b, t0 + 32 * s, &h));
  ASSERT_EQ(acc_.guard().senders(), 1u) << "the first sender's window was forgotten";
  EXPECT_FALSE(acc_.accept(captured, request_tuple(), t0 + s, &h));
  EXPECT_EQ(stats_.rejected_for(Reject::kStale), 1u);
}

// A reflector whose clock ran an hour ahead (booted before NTP) refuses
// genuine requests as stale; once corrected it accepts them at once, and a
// captured request of a window forgotten while the clock was ahead stays
// refused even after its sender's window is re-created around its sequence.
TEST_F(CapturedRequestTest, AClockCorrectedAfterRunningAheadAcceptsGenuineRequestsAtOnce) {
  const uint64_t t0 = realtime_ns(), s = 1'000'000'000ull, hour = 3600 * s;
  const auto captured = make(ProbeType::kRequest, request_tuple(), 1, t0, key_);
  ProbeHeader h;
  ASSERT_TRUE(acc_.accept(captured, request_tuple(), t0, &h));
  FiveTuple b = request_tuple();
  b.src_ip = kElsewhere;
  // The clock jumps an hour ahead: genuine requests are stale; the first
  // sender's window is forgotten.
  EXPECT_FALSE(acc_.accept(make(ProbeType::kRequest, b, 1, t0 + 2 * s, key_), b, t0 + hour, &h));
  EXPECT_EQ(stats_.rejected_for(Reject::kStale), 1u);
  ASSERT_TRUE(acc_.accept(make(ProbeType::kRequest, b, 2, t0 + hour, key_), b, t0 + hour, &h));
  ASSERT_EQ(acc_.guard().senders(), 1u) << "the first sender's window was forgotten";
  // Corrected: genuine requests of both senders pass at once.
  for (uint32_t seq = 2; seq < 12; ++seq) {
    const uint64_t sent = t0 + (3 + seq) * s;
    EXPECT_TRUE(acc_.accept(make(ProbeType::kRequest, request_tuple(), seq, sent, key_), request_tuple(),
                            sent + s, &h)) << seq;
    EXPECT_TRUE(acc_.accept(make(ProbeType::kRequest, b, seq + 1, sent, key_), b, sent + s, &h)) << seq;
  }
  // The captured request (sequence 1, inside the re-created window) is refused.
  EXPECT_FALSE(acc_.accept(captured, request_tuple(), t0 + 20 * s, &h));
  EXPECT_EQ(stats_.rejected_for(Reject::kStale), 2u);
  EXPECT_EQ(stats_.rejected_total(), 2u);
}

}  // namespace
}  // namespace weft::probe
