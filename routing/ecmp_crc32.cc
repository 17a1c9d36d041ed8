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
// key: one class, so both share the tables of the key bytes' terms.
#include <array>
#include <bit>
#include <vector>

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
  // The key hashed: src IP, dst IP, proto, dport, the switch's seed, sport
  // (all big endian), then for crc32-qp the BTH's 24-bit Destination QP.
  static constexpr size_t kSeedAt = 11, kSportAt = 15;

  Crc32Hash(uint32_t seed, bool qpn) : seed_(seed), qpn_(qpn), len_(qpn ? kSportAt + 5 : kSportAt + 2) {
    // at_[k][b]: what byte value b at position k of the key adds to its CRC.
    // The register update is linear over GF(2) in (register, byte) and the
    // init and final XORs are constants, so for a key of fixed length
    // CRC(key) = CRC(zeros) ^ the sum over k of at_[k][key byte k]: a pair's
    // fields are summed once, a switch's seed costs four look-ups and a
    // port two (five with the QPN).
    std::array<uint8_t, kSportAt + 5> bytes{};
    boost::crc_32_type z;
    z.process_bytes(bytes.data(), len_);
    zero_ = z.checksum();
    for (size_t k = 0; k < len_; ++k) {
      for (int b = 0; b < 256; ++b) {
        bytes[k] = static_cast<uint8_t>(b);
        boost::crc_32_type c;
        c.process_bytes(bytes.data(), len_);
        at_[k][static_cast<size_t>(b)] = c.checksum() ^ zero_;
      }
      bytes[k] = 0;
    }
  }
  std::string_view name() const override { return qpn_ ? "crc32-qp" : "crc32"; }
  bool hashes_qpn() const override { return qpn_; }
  uint32_t hash(const FiveTuple& t, int sw) const override {
    const uint32_t seed = switch_seed(sw);
    return std::rotl(pair_term(t) ^ seed_term(seed) ^ tail(t.sport, t.dqpn), rotation(seed));
  }
  void pick_sports(const FiveTuple& t, int sw, size_t n, std::span<const uint16_t> sports, std::span<uint16_t> picks,
                   std::span<const uint32_t> dqpns) const override {
    const SwitchTerm& st = switch_term(sw);
    const uint32_t base = pair_term(t) ^ st.term;
    const int rot = st.rot;
    if (!qpn_) return pick_ports(at_[kSportAt].data(), at_[kSportAt + 1].data(), base, rot, n, sports, picks);
    for (size_t i = 0; i < sports.size(); ++i) {
      const uint32_t q = dqpns.empty() ? t.dqpn : dqpns[i];
      const uint32_t h = std::rotl(base ^ tail(sports[i], q), rot);
      picks[i] = static_cast<uint16_t>((static_cast<uint64_t>(h) * n) >> 32);
    }
  }
  void pick_each(const FiveTuple& t, std::span<const int> sws, std::span<const uint16_t> ns,
                 std::span<const uint16_t> sports, std::span<uint16_t> picks,
                 std::span<const uint32_t> dqpns) const override {
    const uint32_t pair = pair_term(t);
    for (size_t i = 0; i < sports.size(); ++i) {
      const SwitchTerm& st = switch_term(sws[i]);
      const uint32_t h = std::rotl(pair ^ st.term ^ tail(sports[i], dqpns.empty() ? t.dqpn : dqpns[i]), st.rot);
      picks[i] = static_cast<uint16_t>((static_cast<uint64_t>(h) * ns[i]) >> 32);
    }
  }

 private:
  // A switch's seed term and rotation, the same for every tuple: computed
  // once per switch (a path table asks for ~10^7 picks over ~10^3 switches).
  struct SwitchTerm {
    uint32_t term = 0;
    int rot = 0;  // 0: not computed yet (rotation() is 1..31)
  };
  const SwitchTerm& switch_term(int sw) const {
    const auto at = static_cast<size_t>(sw);
    if (at >= switch_terms_.size()) switch_terms_.resize(at + 1);
    SwitchTerm& st = switch_terms_[at];
    if (st.rot == 0) {
      const uint32_t seed = switch_seed(sw);
      st = {seed_term(seed), rotation(seed)};
    }
    return st;
  }

  uint32_t switch_seed(int sw) const { return seed_ ^ (static_cast<uint32_t>(sw) * 0x9E3779B1u); }

  // Each switch reads different bits of its CRC (ASICs' per-device hash
  // offset / bit selection): a CRC is affine, so two switches' CRCs of one
  // tuple differ by a constant, and reading the same bits at every tier
  // would tie the aggregation's choice to the leaf's (polarisation).
  static int rotation(uint32_t seed) { return static_cast<int>(seed % 31) + 1; }

  uint32_t term(size_t at, uint32_t v, int bytes) const {
    uint32_t x = 0;
    for (int i = 0; i < bytes; ++i) x ^= at_[at + static_cast<size_t>(i)][(v >> (8 * (bytes - 1 - i))) & 0xFF];
    return x;
  }
  uint32_t seed_term(uint32_t seed) const { return term(kSeedAt, seed, 4); }
  uint32_t tail(uint16_t sport, uint32_t dqpn) const {
    uint32_t x = term(kSportAt, sport, 2);
    if (qpn_) x ^= term(kSportAt + 2, dqpn, 3);
    return x;
  }

  // CRC(zeros) and the pair's fields' terms; the same for every port and
  // switch of a pair (a planner asks for 64 ports of each), so the last
  // pair's is kept.
  uint32_t pair_term(const FiveTuple& t) const {
    if (!pair_.valid || pair_.src != t.src_ip || pair_.dst != t.dst_ip || pair_.proto != t.proto ||
        pair_.dport != t.dport) {
      pair_ = {true, t.src_ip, t.dst_ip, t.proto, t.dport,
               zero_ ^ term(0, t.src_ip, 4) ^ term(4, t.dst_ip, 4) ^ term(8, t.proto, 1) ^ term(9, t.dport, 2)};
    }
    return pair_.term;
  }

  uint32_t seed_;
  bool qpn_;
  size_t len_;  // of the key
  uint32_t zero_ = 0;
  std::array<std::array<uint32_t, 256>, kSportAt + 5> at_{};
  // Not thread-safe (ecmp.h).
  struct PairTerm {
    bool valid = false;
    uint32_t src = 0, dst = 0;
    uint8_t proto = 0;
    uint16_t dport = 0;
    uint32_t term = 0;
  };
  mutable PairTerm pair_;
  mutable std::vector<SwitchTerm> switch_terms_;
};

}  // namespace

std::unique_ptr<EcmpHash> make_crc32_hash(uint32_t seed) { return std::make_unique<Crc32Hash>(seed, false); }
std::unique_ptr<EcmpHash> make_crc32_qp_hash(uint32_t seed) { return std::make_unique<Crc32Hash>(seed, true); }

}  // namespace weft::routing
