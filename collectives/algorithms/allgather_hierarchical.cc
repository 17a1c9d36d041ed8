// Pipelined hierarchical AllGather (HCCL's fine-grained hierarchical
// pipeline): n hosts of m ranks. Between hosts, a ring among
// the ranks of equal local index; inside a host, a full mesh. At step i the
// block that arrived over the ring at step i-1 (or the rank's own block at
// step 0) is forwarded both to the next host and to every local peer, so
// inter- and intra-host links carry data at the same time, and every block
// goes straight to its final place in the output (no reordering copy).
//   rank (h, l), step i = 0 .. n-1:
//     ring:  send block (h-i, l) to (h+1, l); receive (h-i-1, l) from (h-1, l)  [i < n-1]
//     mesh:  send block (h-i, l) to every (h, l'); receive (h-i, l') from each
#include "algorithms/algorithms.h"

namespace weft::coll::internal {
namespace {

class Hierarchical final : public Plan {
 public:
  explicit Hierarchical(const Shape& s) : block_(s.count * s.esize), hosts_(equal_hosts(s.host_of)), me_(s.rank) {
    for (size_t h = 0; h < hosts_.size(); ++h) {
      for (size_t i = 0; i < hosts_[h].size(); ++i) {
        if (hosts_[h][i] == s.rank) h_ = static_cast<int>(h), l_ = static_cast<int>(i);
      }
    }
  }
  size_t scratch_bytes() const override { return 0; }
  // The inter-host ring's neighbours and every rank of this host.
  std::vector<int> peers() const override {
    const int n = static_cast<int>(hosts_.size());
    std::vector<int> out = hosts_[static_cast<size_t>(h_)];
    for (int h : ring_peers(h_, n)) out.push_back(hosts_[static_cast<size_t>(h)][static_cast<size_t>(l_)]);
    return peer_set(std::move(out), me_);
  }

  Status run(Context& ctx) const override {
    const int n = static_cast<int>(hosts_.size()), m = static_cast<int>(hosts_.front().size());
    auto at = [&](int h, int l) { return hosts_[static_cast<size_t>(((h % n) + n) % n)][static_cast<size_t>(l)]; };
    auto off = [&](int g) { return static_cast<size_t>(g) * block_; };
    const int next = at(h_ + 1, l_), prev = at(h_ - 1, l_);
    ctx.step("hier-ag", 1);
    // Every block has its own place in the output: post all receives first.
    std::vector<Ticket> ring_rt;
    std::vector<std::pair<int, Ticket>> mesh_rt;
    for (int i = 0; i < n; ++i) {
      if (i + 1 < n) {
        WEFT_ASSIGN_OR_RETURN(Ticket t, ctx.recv(prev, kData, off(at(h_ - i - 1, l_)), block_));
        ring_rt.push_back(t);
      }
      for (int lp = 0; lp < m; ++lp) {
        if (lp == l_) continue;
        WEFT_ASSIGN_OR_RETURN(Ticket t, ctx.recv(at(h_, lp), kData, off(at(h_ - i, lp)), block_));
        mesh_rt.emplace_back(at(h_, lp), t);
      }
    }
    for (int i = 0; i < n; ++i) {
      if (i > 0) WEFT_RETURN_IF_ERROR(ctx.wait_recv(prev, ring_rt[static_cast<size_t>(i - 1)]));
      const size_t b = off(at(h_ - i, l_));
      if (i + 1 < n && n > 1) WEFT_RETURN_IF_ERROR(ctx.send(next, kData, b, block_).status());
      for (int lp = 0; lp < m; ++lp) {
        if (lp != l_) WEFT_RETURN_IF_ERROR(ctx.send(at(h_, lp), kData, b, block_).status());
      }
    }
    for (auto [peer, t] : mesh_rt) WEFT_RETURN_IF_ERROR(ctx.wait_recv(peer, t));
    return ctx.wait_all_sends();
  }

 private:
  size_t block_;
  std::vector<std::vector<int>> hosts_;
  int me_;
  int h_ = 0, l_ = 0;
};

}  // namespace

std::unique_ptr<Plan> plan_allgather_hierarchical(const Shape& s) { return std::make_unique<Hierarchical>(s); }

}  // namespace weft::coll::internal
