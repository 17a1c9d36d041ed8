// CRC32 switch hash with a per-switch seed.
//
// Switch ASICs hash the header fields with a CRC polynomial; the seed
// (per switch, configurable) decorrelates consecutive tiers so that a flow
// that collides at the leaf does not collide again at the spine for the same
// reason. The seed is mixed with the switch index so each switch hashes
// differently, as in a real fabric where every box has its own seed.
#include <array>
#include <bit>

#include <boost/crc.hpp>

#include "weft/routing/ecmp.h"

namespace weft::routing {
namespace {

class Crc32Hash final : public EcmpHash {
 public:
  explicit Crc32Hash(uint32_t seed) : seed_(seed) {}
  std::string_view name() const override { return "crc32"; }
  uint32_t hash(const FiveTuple& t, int sw) const override {
    // CRC over src IP, dst IP, proto, dport, the switch's seed, sport (big
    // endian). Everything before sport is the same for every source port of
    // a pair at one switch (a planner asks for 64 ports of each), so the CRC
    // state after it is memoised and a port costs two table steps.
    const uint32_t seed = seed_ ^ (static_cast<uint32_t>(sw) * 0x9E3779B1u);
    if (!memo_valid_ || memo_src_ != t.src_ip || memo_dst_ != t.dst_ip || memo_proto_ != t.proto ||
        memo_dport_ != t.dport || memo_seed_ != seed) {
      std::array<uint8_t, 15> b{};
      put32(b.data(), t.src_ip);
      put32(b.data() + 4, t.dst_ip);
      b[8] = t.proto;
      b[9] = static_cast<uint8_t>(t.dport >> 8);
      b[10] = static_cast<uint8_t>(t.dport);
      put32(b.data() + 11, seed);
      memo_ = boost::crc_32_type();
      memo_.process_bytes(b.data(), b.size());
      memo_valid_ = true, memo_src_ = t.src_ip, memo_dst_ = t.dst_ip, memo_proto_ = t.proto;
      memo_dport_ = t.dport, memo_seed_ = seed;
    }
    boost::crc_32_type crc = memo_;
    crc.process_byte(static_cast<uint8_t>(t.sport >> 8));
    crc.process_byte(static_cast<uint8_t>(t.sport));
    // Each switch reads different bits of its CRC (ASICs' per-device hash
    // offset / bit selection): a CRC is affine, so two switches' CRCs of one
    // tuple differ by a constant, and reading the same bits at every tier
    // would tie the aggregation's choice to the leaf's (polarisation).
    return std::rotl(crc.checksum(), static_cast<int>(seed % 31) + 1);
  }

 private:
  static void put32(uint8_t* at, uint32_t v) {
    for (int i = 0; i < 4; ++i) at[i] = static_cast<uint8_t>(v >> (24 - 8 * i));
  }

  uint32_t seed_;
  // Not thread-safe (ecmp.h): the CRC state after the pair's fixed bytes.
  mutable boost::crc_32_type memo_;
  mutable bool memo_valid_ = false;
  mutable uint32_t memo_src_ = 0, memo_dst_ = 0;
  mutable uint8_t memo_proto_ = 0;
  mutable uint16_t memo_dport_ = 0;
  mutable uint32_t memo_seed_ = 0;
};

}  // namespace

std::unique_ptr<EcmpHash> make_crc32_hash(uint32_t seed) { return std::make_unique<Crc32Hash>(seed); }

}  // namespace weft::routing
