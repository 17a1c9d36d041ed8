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
// key: one class, so both share the memoised per-pair prefix and the tables
// of the per-port bytes' terms.
#include <array>
#include <bit>

#include <boost/crc.hpp>

#include "weft/routing/ecmp.h"

namespace weft::routing {
namespace {

// pick() of every port: the CRC of the pair's fields with a zero tail
// (base), the sport's bytes' terms (hi, lo), the switch's rotation. Also
// built for AVX2 (GCC's target_clones): the mapping onto n next hops, a
// 64-bit multiply, then runs four ports at a time.
[[gnu::target_clones("avx2", "default")]] void pick_ports(const uint32_t* hi, const uint32_t* lo, uint32_t base,
                                                          int rot, size_t n, std::span<const uint16_t> sports,
                                                          std::span<uint16_t> picks) {
  for (size_t i = 0; i < sports.size(); ++i) {
    const uint32_t h = std::rotl(base ^ hi[sports[i] >> 8] ^ lo[sports[i] & 0xFF], rot);
    picks[i] = static_cast<uint16_t>((static_cast<uint64_t>(h) * n) >> 32);
  }
}

class Crc32Hash final : public EcmpHash {
 public:
  Crc32Hash(uint32_t seed, bool qpn) : seed_(seed), qpn_(qpn) {
    // tail_[k][b]: what byte value b at position k of the tail (sport's two
    // bytes, then the QPN's three) adds to the CRC. The register update is
    // linear over GF(2) in (register, byte) and the init and final XORs are
    // constants, so CRC(prefix || tail) = CRC(prefix || zeros) ^ sum over k
    // of tail_[k][tail byte k], independent of the prefix.
    const size_t len = qpn_ ? 5 : 2;
    std::array<uint8_t, 5> zeros{};
    boost::crc_32_type z;
    z.process_bytes(zeros.data(), len);
    for (size_t k = 0; k < len; ++k) {
      for (int b = 0; b < 256; ++b) {
        std::array<uint8_t, 5> bytes{};
        bytes[k] = static_cast<uint8_t>(b);
        boost::crc_32_type c;
        c.process_bytes(bytes.data(), len);
        tail_[k][static_cast<size_t>(b)] = c.checksum() ^ z.checksum();
      }
    }
  }
  std::string_view name() const override { return qpn_ ? "crc32-qp" : "crc32"; }
  bool hashes_qpn() const override { return qpn_; }
  uint32_t hash(const FiveTuple& t, int sw) const override {
    const Memo& m = prefix(t, sw);
    return std::rotl(m.base ^ tail(t.sport, t.dqpn), m.rot);
  }
  void pick_sports(const FiveTuple& t, int sw, size_t n, std::span<const uint16_t> sports, std::span<uint16_t> picks,
                   std::span<const uint32_t> dqpns) const override {
    const Memo& m = prefix(t, sw);
    const uint32_t base = m.base;
    const int rot = m.rot;
    if (!qpn_) return pick_ports(tail_[0].data(), tail_[1].data(), base, rot, n, sports, picks);
    for (size_t i = 0; i < sports.size(); ++i) {
      const uint32_t q = dqpns.empty() ? t.dqpn : dqpns[i];
      const uint32_t h = std::rotl(base ^ tail(sports[i], q), rot);
      picks[i] = static_cast<uint16_t>((static_cast<uint64_t>(h) * n) >> 32);
    }
  }

 private:
  uint32_t switch_seed(int sw) const { return seed_ ^ (static_cast<uint32_t>(sw) * 0x9E3779B1u); }

  // The tail's term of the CRC (constructor): sport big endian, then, for
  // crc32-qp, the BTH's 24-bit Destination QP big endian as on the wire.
  uint32_t tail(uint16_t sport, uint32_t dqpn) const {
    uint32_t x = tail_[0][sport >> 8] ^ tail_[1][sport & 0xFF];
    if (qpn_) x ^= tail_[2][(dqpn >> 16) & 0xFF] ^ tail_[3][(dqpn >> 8) & 0xFF] ^ tail_[4][dqpn & 0xFF];
    return x;
  }

  struct Memo {
    uint32_t base = 0;  // the CRC of the pair's fixed fields and a zero tail
    int rot = 0;        // the switch's bit selection (finish comment)
    bool valid = false;
    uint32_t src = 0, dst = 0;
    uint8_t proto = 0;
    uint16_t dport = 0;
    uint32_t seed = 0;
  };

  // CRC over src IP, dst IP, proto, dport, the switch's seed, then the tail
  // (sport, and the QPN for crc32-qp). Everything before the tail is the
  // same for every source port of a pair at one switch (a planner asks for
  // 64 ports of each), so the CRC with a zero tail is memoised per switch
  // seed (a 3-tier walk alternates between a leaf and a dozen aggregation
  // switches) and a port costs a few table look-ups (tail_).
  const Memo& prefix(const FiveTuple& t, int sw) const {
    const uint32_t seed = switch_seed(sw);
    Memo& m = memo_[(seed ^ (seed >> 7)) % memo_.size()];
    if (!m.valid || m.src != t.src_ip || m.dst != t.dst_ip || m.proto != t.proto || m.dport != t.dport ||
        m.seed != seed) {
      std::array<uint8_t, 20> b{};  // the fixed fields, then a zero tail
      put32(b.data(), t.src_ip);
      put32(b.data() + 4, t.dst_ip);
      b[8] = t.proto;
      b[9] = static_cast<uint8_t>(t.dport >> 8);
      b[10] = static_cast<uint8_t>(t.dport);
      put32(b.data() + 11, seed);
      boost::crc_32_type crc;
      crc.process_bytes(b.data(), 15 + (qpn_ ? 5 : 2));
      m.base = crc.checksum();
      // Each switch reads different bits of its CRC (ASICs' per-device hash
      // offset / bit selection): a CRC is affine, so two switches' CRCs of
      // one tuple differ by a constant, and reading the same bits at every
      // tier would tie the aggregation's choice to the leaf's (polarisation).
      m.rot = static_cast<int>(seed % 31) + 1;
      m.valid = true, m.src = t.src_ip, m.dst = t.dst_ip, m.proto = t.proto, m.dport = t.dport, m.seed = seed;
    }
    return m;
  }

  static void put32(uint8_t* at, uint32_t v) {
    for (int i = 0; i < 4; ++i) at[i] = static_cast<uint8_t>(v >> (24 - 8 * i));
  }

  uint32_t seed_;
  bool qpn_;
  std::array<std::array<uint32_t, 256>, 5> tail_{};
  // Not thread-safe (ecmp.h): per switch seed (direct-mapped).
  mutable std::array<Memo, 64> memo_;
};

}  // namespace

std::unique_ptr<EcmpHash> make_crc32_hash(uint32_t seed) { return std::make_unique<Crc32Hash>(seed, false); }
std::unique_ptr<EcmpHash> make_crc32_qp_hash(uint32_t seed) { return std::make_unique<Crc32Hash>(seed, true); }

}  // namespace weft::routing
