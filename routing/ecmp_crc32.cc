// CRC32 switch hash with a per-switch seed.
//
// Switch ASICs hash the header fields with a CRC polynomial; the seed
// (per switch, configurable) decorrelates consecutive tiers so that a flow
// that collides at the leaf does not collide again at the spine for the same
// reason. The seed is mixed with the switch index so each switch hashes
// differently, as in a real fabric where every box has its own seed.
//
// crc32-qp (E-ECMP, ecmp.h) is the same CRC continued over the 24-bit
// Destination QP after sport, as a user-defined hash field appended to the
// key: one class, so both share the memoised per-pair prefix.
#include <array>
#include <bit>

#include <boost/crc.hpp>

#include "weft/routing/ecmp.h"

namespace weft::routing {
namespace {

class Crc32Hash final : public EcmpHash {
 public:
  Crc32Hash(uint32_t seed, bool qpn) : seed_(seed), qpn_(qpn) {}
  std::string_view name() const override { return qpn_ ? "crc32-qp" : "crc32"; }
  bool hashes_qpn() const override { return qpn_; }
  uint32_t hash(const FiveTuple& t, int sw) const override { return finish(prefix(t, sw), t.sport, t.dqpn, sw); }
  void pick_sports(const FiveTuple& t, int sw, size_t n, std::span<const uint16_t> sports, std::span<uint16_t> picks,
                   std::span<const uint32_t> dqpns) const override {
    const boost::crc_32_type state = prefix(t, sw);
    for (size_t i = 0; i < sports.size(); ++i) {
      const uint32_t q = dqpns.empty() ? t.dqpn : dqpns[i];
      picks[i] = static_cast<uint16_t>((static_cast<uint64_t>(finish(state, sports[i], q, sw)) * n) >> 32);
    }
  }

 private:
  uint32_t switch_seed(int sw) const { return seed_ ^ (static_cast<uint32_t>(sw) * 0x9E3779B1u); }

  // CRC over src IP, dst IP, proto, dport, the switch's seed, sport (big
  // endian). Everything before sport is the same for every source port of a
  // pair at one switch (a planner asks for 64 ports of each), so the CRC
  // state after it is memoised per switch seed (a 3-tier walk alternates
  // between a leaf and a dozen aggregation switches) and a port costs two
  // table steps.
  const boost::crc_32_type& prefix(const FiveTuple& t, int sw) const {
    const uint32_t seed = switch_seed(sw);
    Memo& m = memo_[(seed ^ (seed >> 7)) % memo_.size()];
    if (!m.valid || m.src != t.src_ip || m.dst != t.dst_ip || m.proto != t.proto || m.dport != t.dport ||
        m.seed != seed) {
      std::array<uint8_t, 15> b{};
      put32(b.data(), t.src_ip);
      put32(b.data() + 4, t.dst_ip);
      b[8] = t.proto;
      b[9] = static_cast<uint8_t>(t.dport >> 8);
      b[10] = static_cast<uint8_t>(t.dport);
      put32(b.data() + 11, seed);
      m.crc = boost::crc_32_type();
      m.crc.process_bytes(b.data(), b.size());
      m.valid = true, m.src = t.src_ip, m.dst = t.dst_ip, m.proto = t.proto, m.dport = t.dport, m.seed = seed;
    }
    return m.crc;
  }

  uint32_t finish(boost::crc_32_type crc, uint16_t sport, uint32_t dqpn, int sw) const {
    crc.process_byte(static_cast<uint8_t>(sport >> 8));
    crc.process_byte(static_cast<uint8_t>(sport));
    if (qpn_) {  // the BTH's 24-bit Destination QP, big endian as on the wire
      crc.process_byte(static_cast<uint8_t>(dqpn >> 16));
      crc.process_byte(static_cast<uint8_t>(dqpn >> 8));
      crc.process_byte(static_cast<uint8_t>(dqpn));
    }
    // Each switch reads different bits of its CRC (ASICs' per-device hash
    // offset / bit selection): a CRC is affine, so two switches' CRCs of one
    // tuple differ by a constant, and reading the same bits at every tier
    // would tie the aggregation's choice to the leaf's (polarisation).
    return std::rotl(crc.checksum(), static_cast<int>(switch_seed(sw) % 31) + 1);
  }

  static void put32(uint8_t* at, uint32_t v) {
    for (int i = 0; i < 4; ++i) at[i] = static_cast<uint8_t>(v >> (24 - 8 * i));
  }

  uint32_t seed_;
  bool qpn_;
  // Not thread-safe (ecmp.h): the CRC state after a pair's fixed bytes, per
  // switch seed (direct-mapped).
  struct Memo {
    boost::crc_32_type crc;
    bool valid = false;
    uint32_t src = 0, dst = 0;
    uint8_t proto = 0;
    uint16_t dport = 0;
    uint32_t seed = 0;
  };
  mutable std::array<Memo, 64> memo_;
};

}  // namespace

std::unique_ptr<EcmpHash> make_crc32_hash(uint32_t seed) { return std::make_unique<Crc32Hash>(seed, false); }
std::unique_ptr<EcmpHash> make_crc32_qp_hash(uint32_t seed) { return std::make_unique<Crc32Hash>(seed, true); }

}  // namespace weft::routing
