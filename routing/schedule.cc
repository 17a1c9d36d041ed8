#include "weft/routing/schedule.h"

#include <bit>

#include <fmt/format.h>

namespace weft::routing {

std::string_view collective_name(Collective c) {
  switch (c) {
    case Collective::kAllreduceHd: return "allreduce-hd";
    case Collective::kAllreduceRing: return "allreduce-ring";
    case Collective::kNcclRing: return "nccl-ring";
    case Collective::kAllreduceHybrid: return "allreduce-hybrid";
  }
  return "allreduce-hd";
}

std::optional<Collective> parse_collective(std::string_view s) {
  for (auto c : {Collective::kAllreduceHd, Collective::kAllreduceRing, Collective::kNcclRing,
                 Collective::kAllreduceHybrid}) {
    if (collective_name(c) == s) return c;
  }
  return std::nullopt;
}

HdLayout hd_layout(int ranks) {
  HdLayout l;
  l.ranks = ranks;
  l.pof2 = ranks > 0 ? static_cast<int>(std::bit_floor(static_cast<unsigned>(ranks))) : 0;
  l.rem = ranks - l.pof2;
  return l;
}

int HdLayout::newrank(int rank) const {
  if (rank < 2 * rem) return rank % 2 == 1 ? rank / 2 : -1;
  return rank - rem;
}

int HdLayout::rank_of(int nr) const { return nr < rem ? 2 * nr + 1 : nr + rem; }

int HdLayout::log2_pof2() const { return pof2 > 0 ? std::countr_zero(static_cast<unsigned>(pof2)) : 0; }

Range hd_block(const HdLayout& layout, int newrank, int steps, uint64_t count) {
  Range r{0, count};
  for (int k = 0; k < steps && k < layout.log2_pof2(); ++k) {
    uint64_t mid = r.lo + r.size() / 2;
    if ((newrank >> k) & 1) {
      r.lo = mid;
    } else {
      r.hi = mid;
    }
  }
  return r;
}

Range ring_chunk(int ranks, int c, uint64_t count) {
  auto p = static_cast<uint64_t>(ranks);
  auto cc = static_cast<uint64_t>(c);
  return {cc * count / p, (cc + 1) * count / p};
}

int hd_fold_step(const HdLayout&) { return 0; }
int hd_rs_step(const HdLayout& layout, int k) { return (layout.rem > 0 ? 1 : 0) + k; }
int hd_ag_step(const HdLayout& layout, int k) {
  return (layout.rem > 0 ? 1 : 0) + 2 * layout.log2_pof2() - 1 - k;
}
int hd_unfold_step(const HdLayout& layout) { return 1 + 2 * layout.log2_pof2(); }

namespace {

Schedule build_hd(int ranks, uint64_t count, uint32_t es) {
  Schedule s{Collective::kAllreduceHd, ranks, count, es, {}};
  const HdLayout L = hd_layout(ranks);
  const uint64_t all = count * es;
  if (L.rem > 0) {
    Step st{"fold", 1, 1, {}};
    for (int i = 0; i < L.rem; ++i) st.flows.push_back({2 * i, 2 * i + 1, all});
    s.steps.push_back(std::move(st));
  }
  const int levels = L.log2_pof2();
  for (int k = 0; k < levels; ++k) {
    Step st{"rs", 1 << k, 1, {}};
    st.flows.reserve(static_cast<size_t>(L.pof2));
    for (int v = 0; v < L.pof2; ++v) {
      // Before step k both partners hold hd_block(v, k); v sends the half it
      // does not keep, which is the half its partner keeps.
      int w = v ^ (1 << k);
      Range sent = hd_block(L, w, k + 1, count);
      st.flows.push_back({L.rank_of(v), L.rank_of(w), sent.size() * es});
    }
    s.steps.push_back(std::move(st));
  }
  for (int k = levels - 1; k >= 0; --k) {
    Step st{"ag", 1 << k, 1, {}};
    st.flows.reserve(static_cast<size_t>(L.pof2));
    for (int v = 0; v < L.pof2; ++v) {
      int w = v ^ (1 << k);
      Range held = hd_block(L, v, k + 1, count);
      st.flows.push_back({L.rank_of(v), L.rank_of(w), held.size() * es});
    }
    s.steps.push_back(std::move(st));
  }
  if (L.rem > 0) {
    Step st{"unfold", 1, 1, {}};
    for (int i = 0; i < L.rem; ++i) st.flows.push_back({2 * i + 1, 2 * i, all});
    s.steps.push_back(std::move(st));
  }
  return s;
}

Schedule build_ring(int ranks, uint64_t count, uint32_t es) {
  Schedule s{Collective::kAllreduceRing, ranks, count, es, {}};
  if (ranks < 2) return s;
  // Reduce-scatter repetition i: rank r sends chunk (r - i) mod P, so over
  // P-1 repetitions every chunk but (r + 1) mod P, the one it ends up owning.
  // Allgather repetition i: rank r sends chunk (r + 1 - i) mod P, so every
  // chunk but (r + 2) mod P.
  for (int phase = 0; phase < 2; ++phase) {
    Step st{phase == 0 ? "ring-rs" : "ring-ag", 1, ranks - 1, {}};
    st.flows.reserve(static_cast<size_t>(ranks));
    for (int r = 0; r < ranks; ++r) {
      int skipped = (r + 1 + phase) % ranks;
      uint64_t bytes = (count - ring_chunk(ranks, skipped, count).size()) * es;
      st.flows.push_back({r, (r + 1) % ranks, bytes});
    }
    s.steps.push_back(std::move(st));
  }
  return s;
}

}  // namespace

Result<Schedule> build_schedule(Collective c, int ranks, uint64_t count, uint32_t elem_size,
                                const NcclRingShape& shape) {
  if (ranks < 1) return invalid_argument(fmt::format("a collective needs at least one rank (got {})", ranks));
  if (elem_size < 1) return invalid_argument("element size must be >= 1 byte");
  if (c == Collective::kNcclRing) {
    WEFT_RETURN_IF_ERROR(validate(shape));
  } else if (shape.channels != 1 || shape.qps != 1) {
    return invalid_argument(fmt::format("{} has one flow per pair of ranks: channels and QPs ({} x {}) are for nccl-ring",
                                        collective_name(c), shape.channels, shape.qps));
  }
  switch (c) {
    case Collective::kAllreduceHd: return build_hd(ranks, count, elem_size);
    case Collective::kAllreduceRing: return build_ring(ranks, count, elem_size);
    case Collective::kNcclRing: return build_nccl_ring(ranks, shape, count, elem_size);
    case Collective::kAllreduceHybrid:
      return invalid_argument("allreduce-hybrid groups ranks by host: build it with build_hybrid_schedule "
                              "(routing/weft/routing/hybrid_schedule.h)");
  }
  return internal_error("unknown collective");
}

}  // namespace weft::routing
