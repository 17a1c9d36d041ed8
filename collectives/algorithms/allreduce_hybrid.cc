// Hybrid AllReduce (ACCL: Dong et al., "ACCL: Architecting Highly Scalable
// Distributed Training Systems with Highly Efficient Collective
// Communication Library", IEEE Micro 2021): with n hosts of m ranks each,
//   1. reduce-scatter inside each host (ring over shm): local rank l ends
//      with chunk l of the vector reduced over its host;
//   2. halving-doubling between the ranks of equal local index on the n
//      hosts, on chunk l only (1/m of the vector crosses the fabric per
//      rank, and HD's partners are exactly the flows weft routes);
//   3. allgather inside each host.
//
// Under an allreduce-hybrid route plan (plan_epochs.h: kHybridPlan) the
// plan's flows are step 2's, and with rounds its gates (routing/gates.h)
// hold them as hd_gates.cc does for HD. A gate may tie legs together — a
// flow of local rank 0 waits for one of local rank 1 that shares a link
// with it — so the gated legs run in the whole group's context, not each
// in its own subgroup: its tokens then reach any rank. Nothing else
// changes: on a pair of one host the intra-host reduce-scatter's messages
// all precede the leg's tokens, and these the allgather's, in both the
// order sent and the order the receives are posted (transport.h).
#include "algorithms/algorithms.h"
#include "algorithms/allreduce_halving_doubling.h"
#include "algorithms/ring_phases.h"
#include "weft/routing/schedule.h"

namespace weft::coll::internal {

std::vector<std::vector<int>> equal_hosts(const std::vector<int>& host_of) {
  std::vector<std::vector<int>> hosts;
  std::vector<int> index;  // host id -> position in hosts
  for (size_t g = 0; g < host_of.size(); ++g) {
    const int h = host_of[g];
    if (static_cast<size_t>(h) >= index.size()) index.resize(static_cast<size_t>(h) + 1, -1);
    if (index[static_cast<size_t>(h)] < 0) {
      index[static_cast<size_t>(h)] = static_cast<int>(hosts.size());
      hosts.emplace_back();
    }
    hosts[static_cast<size_t>(index[static_cast<size_t>(h)])].push_back(static_cast<int>(g));
  }
  for (const auto& h : hosts) {
    if (h.size() != hosts.front().size()) return {};
  }
  return hosts;
}

namespace {

class Hybrid final : public Plan {
 public:
  explicit Hybrid(const Shape& s) : bytes_(s.count * s.esize) {
    const auto hosts = equal_hosts(s.host_of);
    const size_t m = hosts.front().size();
    size_t my_host = 0, l = 0;
    for (size_t h = 0; h < hosts.size(); ++h) {
      for (size_t i = 0; i < m; ++i) {
        if (hosts[h][i] == s.rank) my_host = h, l = i;
      }
    }
    local_ = hosts[my_host];
    me_ = s.rank;
    l_ = static_cast<int>(l);
    for (const auto& h : hosts) inter_.push_back(h[l]);
    const size_t seg = s.segment ? s.segment : kDefaultSegment;
    chunks_ = ring_chunks(static_cast<int>(m), 0, s.count, s.esize, seg);
    const routing::Range mine = routing::ring_chunk(static_cast<int>(m), static_cast<int>(l), s.count);
    Shape leg{static_cast<int>(hosts.size()), static_cast<int>(my_host), mine.size(), s.esize, seg, mine.lo, 0, {}};
    if (s.gates != nullptr && !s.gates->empty() && hosts.size() > 1) {
      auto hd = std::make_unique<HalvingDoubling>(leg);
      hd->join_group(inter_, s.size, *s.gates);
      inter_plan_ = std::move(hd);
      whole_group_ = true;
    } else {
      inter_plan_ = plan_allreduce_hd(leg);
    }
  }
  size_t scratch_bytes() const override { return bytes_; }
  // The intra-host ring's neighbours and the inter-host HD's partners.
  std::vector<int> peers() const override {
    std::vector<int> out;
    for (int i : ring_peers(l_, static_cast<int>(local_.size()))) out.push_back(local_[static_cast<size_t>(i)]);
    if (whole_group_) {
      for (int i : inter_plan_->peers()) out.push_back(i);
    } else if (inter_.size() > 1) {
      for (int i : inter_plan_->peers()) out.push_back(inter_[static_cast<size_t>(i)]);
    }
    return peer_set(std::move(out), me_);
  }
  Status run(Context& ctx) const override {
    Context local = ctx.subgroup(local_);
    local.step("hybrid-rs", 1);
    WEFT_RETURN_IF_ERROR(ring_reduce_scatter(local, chunks_, 0));
    if (whole_group_) {
      WEFT_RETURN_IF_ERROR(inter_plan_->run(ctx));
    } else if (inter_.size() > 1) {
      Context inter = ctx.subgroup(inter_);
      WEFT_RETURN_IF_ERROR(inter_plan_->run(inter));
    }
    local.step("hybrid-ag", 1);
    return ring_allgather(local, chunks_, 0);
  }

 private:
  size_t bytes_;
  int me_ = 0, l_ = 0;
  std::vector<int> local_, inter_;
  Chunks chunks_;
  std::unique_ptr<Plan> inter_plan_;
  bool whole_group_ = false;  // the leg's HD addresses the whole group (gates)
};

}  // namespace

std::unique_ptr<Plan> plan_allreduce_hybrid(const Shape& s) { return std::make_unique<Hybrid>(s); }

}  // namespace weft::coll::internal
