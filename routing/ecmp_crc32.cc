// CRC32 switch hash with a per-switch seed.
//
// Switch ASICs hash the header fields with a CRC polynomial; the seed
// (per switch, configurable) decorrelates consecutive tiers so that a flow
// that collides at the leaf does not collide again at the spine for the same
// reason. The seed is mixed with the switch index so each switch hashes
// differently, as in a real fabric where every box has its own seed.
#include <array>

#include <boost/crc.hpp>

#include "weft/routing/ecmp.h"

namespace weft::routing {
namespace {

class Crc32Hash final : public EcmpHash {
 public:
  explicit Crc32Hash(uint32_t seed) : seed_(seed) {}
  std::string_view name() const override { return "crc32"; }
  uint32_t hash(const FiveTuple& t, int sw) const override {
    std::array<uint8_t, 17> b{};
    auto put32 = [&](size_t at, uint32_t v) {
      for (int i = 0; i < 4; ++i) b[at + i] = static_cast<uint8_t>(v >> (24 - 8 * i));
    };
    put32(0, t.src_ip);
    put32(4, t.dst_ip);
    b[8] = t.proto;
    b[9] = static_cast<uint8_t>(t.sport >> 8);
    b[10] = static_cast<uint8_t>(t.sport);
    b[11] = static_cast<uint8_t>(t.dport >> 8);
    b[12] = static_cast<uint8_t>(t.dport);
    put32(13, seed_ ^ (static_cast<uint32_t>(sw) * 0x9E3779B1u));
    boost::crc_32_type crc;
    crc.process_bytes(b.data(), b.size());
    return crc.checksum();
  }

 private:
  uint32_t seed_;
};

}  // namespace

std::unique_ptr<EcmpHash> make_crc32_hash(uint32_t seed) { return std::make_unique<Crc32Hash>(seed); }

}  // namespace weft::routing
