// Linux's IPv4 multipath hash (see ecmp.h for what is and is not modelled).
//
// Since Linux 4.13 flow hashes are SipHash-2-4 (lib/siphash.c, after
// Aumasson & Bernstein, "SipHash: a fast short-input PRF", 2012) over the
// flow keys; Linux 6.11 added net.ipv4.fib_multipath_hash_seed, whose 32-bit
// value becomes both 64-bit key words as (seed << 32 | seed)
// (fib_multipath_hash_construct_key). fib_multipath_hash() returns hash >> 1
// and fib_select_multipath() walks next hops whose upper bounds split the
// 31-bit space evenly, so the 31-bit value is returned here shifted back up
// for EcmpHash::pick's 32-bit ranges.
#include <array>
#include <bit>
#include <cstring>

#include <fmt/format.h>

#include "weft/routing/ecmp.h"

namespace weft::routing {
namespace internal {

uint64_t siphash24(const uint8_t* data, size_t len, uint64_t k0, uint64_t k1) {
  uint64_t v0 = 0x736f6d6570736575ull ^ k0, v1 = 0x646f72616e646f6dull ^ k1;
  uint64_t v2 = 0x6c7967656e657261ull ^ k0, v3 = 0x7465646279746573ull ^ k1;
  auto round = [&] {
    v0 += v1, v1 = std::rotl(v1, 13), v1 ^= v0, v0 = std::rotl(v0, 32);
    v2 += v3, v3 = std::rotl(v3, 16), v3 ^= v2;
    v0 += v3, v3 = std::rotl(v3, 21), v3 ^= v0;
    v2 += v1, v1 = std::rotl(v1, 17), v1 ^= v2, v2 = std::rotl(v2, 32);
  };
  auto word = [&](const uint8_t* p, size_t n) {  // little-endian, n <= 8
    uint64_t w = 0;
    for (size_t i = 0; i < n; ++i) w |= static_cast<uint64_t>(p[i]) << (8 * i);
    return w;
  };
  size_t i = 0;
  for (; i + 8 <= len; i += 8) {
    uint64_t m = word(data + i, 8);
    v3 ^= m, round(), round(), v0 ^= m;
  }
  uint64_t last = (static_cast<uint64_t>(len) << 56) | word(data + i, len - i);
  v3 ^= last, round(), round(), v0 ^= last;
  v2 ^= 0xff;
  round(), round(), round(), round();
  return v0 ^ v1 ^ v2 ^ v3;
}

}  // namespace internal

namespace {

class LinuxHash final : public EcmpHash {
 public:
  LinuxHash(uint32_t seed, LinuxHashPolicy policy) : policy_(policy) {
    key_ = (static_cast<uint64_t>(seed) << 32) | seed;
  }
  std::string_view name() const override { return policy_ == LinuxHashPolicy::kL3 ? "linux-l3" : "linux-l4"; }

  uint32_t hash(const FiveTuple& t, int) const override {
    // Flow keys as hashed (struct flow_keys from 'basic' on): n_proto,
    // ip_proto, ports, addresses; the L3 policy leaves proto and ports zero.
    uint32_t src = t.src_ip, dst = t.dst_ip;
    uint16_t sp = t.sport, dp = t.dport;
    const bool l4 = policy_ == LinuxHashPolicy::kL4;
    if (!l4) sp = dp = 0;
    // __flow_hash_consistentify: the lower address first (ports follow).
    if (dst < src || (dst == src && dp < sp)) std::swap(src, dst), std::swap(sp, dp);
    std::array<uint8_t, 16> k{};
    k[0] = 0x08;  // ETH_P_IP, big endian
    k[2] = l4 ? t.proto : 0;
    k[4] = static_cast<uint8_t>(sp >> 8), k[5] = static_cast<uint8_t>(sp);
    k[6] = static_cast<uint8_t>(dp >> 8), k[7] = static_cast<uint8_t>(dp);
    for (int i = 0; i < 4; ++i) {
      k[8 + i] = static_cast<uint8_t>(src >> (24 - 8 * i));
      k[12 + i] = static_cast<uint8_t>(dst >> (24 - 8 * i));
    }
    auto h = static_cast<uint32_t>(internal::siphash24(k.data(), k.size(), key_, key_));
    if (h == 0) h = 1;  // __flow_hash_from_keys never returns 0
    return (h >> 1) << 1;
  }

 private:
  LinuxHashPolicy policy_;
  uint64_t key_;
};

}  // namespace

std::unique_ptr<EcmpHash> make_linux_hash(uint32_t seed, LinuxHashPolicy policy) {
  return std::make_unique<LinuxHash>(seed, policy);
}

Result<std::unique_ptr<EcmpHash>> make_hash(std::string_view model, uint32_t seed) {
  if (model == "crc32") return make_crc32_hash(seed);
  if (model == "crc32-qp") return make_crc32_qp_hash(seed);
  if (model == "linux-l4") return make_linux_hash(seed, LinuxHashPolicy::kL4);
  if (model == "linux-l3") return make_linux_hash(seed, LinuxHashPolicy::kL3);
  return invalid_argument(fmt::format("unknown hash model '{}' ({})", model, kHashModels));
}

}  // namespace weft::routing
