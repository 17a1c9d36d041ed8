#include "weft/routing/list_edge_coloring.h"

#include <algorithm>
#include <numeric>
#include <utility>

#include <fmt/format.h>

#include "weft/routing/edge_coloring.h"

namespace weft::routing {
namespace {

int ceil_div(int a, int b) { return (a + b - 1) / b; }

// Full lists: vertex splitting + König (see the header).
Result<ListColoring> color_full(int n_left, int n_right, int C, const std::vector<ListEdge>& edges, int K) {
  std::vector<int> seen_l(static_cast<size_t>(n_left), 0), seen_r(static_cast<size_t>(n_right), 0);
  std::vector<BipartiteEdge> split;
  split.reserve(edges.size());
  for (const auto& e : edges) {
    const int cl = seen_l[static_cast<size_t>(e.left)]++ % K, cr = seen_r[static_cast<size_t>(e.right)]++ % K;
    split.push_back({e.left * K + cl, e.right * K + cr});
  }
  auto col = color_bipartite_edges(n_left * K, n_right * K, split, C);
  if (!col) return col.status();
  ListColoring out;
  out.colour = std::move(*col);
  out.exact = true;
  return out;
}

class ListSearch {
 public:
  ListSearch(int n_left, int n_right, int C, const std::vector<ListEdge>& edges, int K, int budget)
      : C_(static_cast<size_t>(C)), K_(K), budget_(budget), edges_(edges),
        cnt_l_(static_cast<size_t>(n_left) * C_, 0), cnt_r_(static_cast<size_t>(n_right) * C_, 0),
        head_l_(cnt_l_.size(), -1), head_r_(cnt_r_.size(), -1), next_l_(edges.size(), -1),
        next_r_(edges.size(), -1), colour_(edges.size(), -1), stamp_(edges.size(), 0) {}

  std::vector<int> run() {
    std::vector<int> order(edges_.size());
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
      return edges_[static_cast<size_t>(a)].colours.size() < edges_[static_cast<size_t>(b)].colours.size();
    });
    for (int e : order) {
      if (!insert(e)) place_least_loaded(e);
    }
    // Repair: edges on overloaded slots try again now that the rest settled.
    for (int pass = 0; pass < 3; ++pass) {
      bool moved = false;
      for (int e : order) {
        const int c = colour_[static_cast<size_t>(e)];
        if (load_l(e, c) <= K_ && load_r(e, c) <= K_) continue;
        unassign(e);
        if (insert(e)) {
          moved = true;
        } else {
          assign(e, c);
        }
      }
      if (!moved) break;
    }
    return colour_;
  }

 private:
  // Slot (vertex, colour) of edge e at its left / right end.
  size_t sl(int e, int c) const { return static_cast<size_t>(edges_[static_cast<size_t>(e)].left) * C_ + static_cast<size_t>(c); }
  size_t sr(int e, int c) const { return static_cast<size_t>(edges_[static_cast<size_t>(e)].right) * C_ + static_cast<size_t>(c); }
  int& cl(int e, int c) { return cnt_l_[sl(e, c)]; }
  int& cr(int e, int c) { return cnt_r_[sr(e, c)]; }
  int load_l(int e, int c) { return cl(e, c); }
  int load_r(int e, int c) { return cr(e, c); }
  // Each slot keeps its edges in an intrusive list (a slot holds about K).
  static void unlink(std::vector<int>& head, std::vector<int>& next, size_t slot, int e) {
    int* at = &head[slot];
    while (*at != e) at = &next[static_cast<size_t>(*at)];
    *at = next[static_cast<size_t>(e)];
  }
  void assign(int e, int c) {
    colour_[static_cast<size_t>(e)] = c;
    ++cl(e, c);
    ++cr(e, c);
    next_l_[static_cast<size_t>(e)] = std::exchange(head_l_[sl(e, c)], e);
    next_r_[static_cast<size_t>(e)] = std::exchange(head_r_[sr(e, c)], e);
  }
  void unassign(int e) {
    const int c = colour_[static_cast<size_t>(e)];
    --cl(e, c);
    --cr(e, c);
    unlink(head_l_, next_l_, sl(e, c), e);
    unlink(head_r_, next_r_, sr(e, c), e);
    colour_[static_cast<size_t>(e)] = -1;
  }

  bool insert(int e) {
    ++stamp_now_;
    left_ = budget_;
    return place(e, -1, 0);
  }

  // Places uncoloured edge e, ejecting along a chain if it must.
  bool place(int e, int banned, int depth) {
    const auto& L = edges_[static_cast<size_t>(e)].colours;
    // A colour with room at both ends; the least loaded one keeps slack for
    // later edges when K > 1.
    int best = -1, best_load = 0;
    for (int c : L) {
      if (c == banned || cl(e, c) >= K_ || cr(e, c) >= K_) continue;
      const int load = std::max(cl(e, c), cr(e, c));
      if (best < 0 || load < best_load) best = c, best_load = load;
    }
    if (best >= 0) {
      assign(e, best);
      return true;
    }
    if (depth >= kMaxDepth) return false;
    for (int c : L) {
      if (c == banned) continue;
      const bool room_l = cl(e, c) < K_, room_r = cr(e, c) < K_;
      // Full at one end: eject an edge of colour c there. Full at both: only
      // a parallel edge (same two leaves) frees both ends with one ejection —
      // the augmenting step of a bipartite matching between flows and spines.
      const bool both = !room_l && !room_r;
      const ListEdge& me = edges_[static_cast<size_t>(e)];
      // The edges of colour c at the full end (snapshot: the list changes
      // while we try them).
      held_.clear();
      if (room_l) {
        for (int g = head_r_[sr(e, c)]; g >= 0; g = next_r_[static_cast<size_t>(g)]) held_.push_back(g);
      } else {
        for (int g = head_l_[sl(e, c)]; g >= 0; g = next_l_[static_cast<size_t>(g)]) held_.push_back(g);
      }
      const size_t from = chain_.size();
      chain_.insert(chain_.end(), held_.begin(), held_.end());
      const size_t to = chain_.size();
      for (size_t k = from; k < to; ++k) {
        const int g = chain_[k];
        if (colour_[static_cast<size_t>(g)] != c || stamp_[static_cast<size_t>(g)] == stamp_now_) continue;
        if (both && (edges_[static_cast<size_t>(g)].left != me.left || edges_[static_cast<size_t>(g)].right != me.right)) {
          continue;
        }
        if (--left_ < 0) return false;
        stamp_[static_cast<size_t>(g)] = stamp_now_;
        unassign(g);
        assign(e, c);
        if (place(g, c, depth + 1)) {
          chain_.resize(from);
          return true;
        }
        unassign(e);
        assign(g, c);
      }
      chain_.resize(from);
    }
    return false;
  }

  void place_least_loaded(int e) {
    int best = -1, best_load = 0;
    for (int c : edges_[static_cast<size_t>(e)].colours) {
      const int load = std::max(cl(e, c), cr(e, c));
      if (best < 0 || load < best_load) best = c, best_load = load;
    }
    assign(e, best);
  }

  static constexpr int kMaxDepth = 512;
  size_t C_;
  int K_;
  int budget_;
  int left_ = 0;
  const std::vector<ListEdge>& edges_;
  std::vector<int> cnt_l_, cnt_r_;
  std::vector<int> head_l_, head_r_, next_l_, next_r_;
  std::vector<int> held_, chain_;  // DFS scratch: candidates to eject, per depth
  std::vector<int> colour_;
  std::vector<unsigned> stamp_;
  unsigned stamp_now_ = 0;
};

}  // namespace

Result<ListColoring> color_list_edges(int n_left, int n_right, int n_colours, const std::vector<ListEdge>& edges,
                                      const ListColoringOptions& opt) {
  if (n_colours < 1) return invalid_argument("list edge colouring needs at least one colour");
  const size_t C = static_cast<size_t>(n_colours);
  std::vector<int> deg_l(static_cast<size_t>(n_left), 0), deg_r(static_cast<size_t>(n_right), 0);
  std::vector<char> has_l(static_cast<size_t>(n_left) * C, 0), has_r(static_cast<size_t>(n_right) * C, 0);
  bool full = true;
  for (size_t i = 0; i < edges.size(); ++i) {
    const auto& e = edges[i];
    if (e.left < 0 || e.left >= n_left || e.right < 0 || e.right >= n_right) {
      return invalid_argument(fmt::format("edge {}: endpoint out of range", i));
    }
    if (e.colours.empty()) return invalid_argument(fmt::format("edge {} has no usable colour", i));
    for (int c : e.colours) {
      if (c < 0 || c >= n_colours) return invalid_argument(fmt::format("edge {}: colour {} out of range", i, c));
      has_l[static_cast<size_t>(e.left) * C + static_cast<size_t>(c)] = 1;
      has_r[static_cast<size_t>(e.right) * C + static_cast<size_t>(c)] = 1;
    }
    if (e.colours.size() != C) full = false;
    ++deg_l[static_cast<size_t>(e.left)];
    ++deg_r[static_cast<size_t>(e.right)];
  }
  // The target: no vertex can do better than its degree over its colours.
  int K = std::max(1, opt.min_load);
  auto bound = [&](const std::vector<int>& deg, const std::vector<char>& has) {
    for (size_t v = 0; v < deg.size(); ++v) {
      if (deg[v] == 0) continue;
      const int k = static_cast<int>(std::count(has.begin() + static_cast<std::ptrdiff_t>(v * C),
                                                has.begin() + static_cast<std::ptrdiff_t>((v + 1) * C), 1));
      K = std::max(K, ceil_div(deg[v], k));
    }
  };
  bound(deg_l, has_l);
  bound(deg_r, has_r);

  ListColoring out;
  if (full) {
    WEFT_ASSIGN_OR_RETURN(out, color_full(n_left, n_right, n_colours, edges, K));
  } else {
    out.colour = ListSearch(n_left, n_right, n_colours, edges, K, opt.budget).run();
  }
  out.lower_bound = K;
  std::vector<int> cnt_l(static_cast<size_t>(n_left) * C, 0), cnt_r(static_cast<size_t>(n_right) * C, 0);
  for (size_t i = 0; i < edges.size(); ++i) {
    const size_t c = static_cast<size_t>(out.colour[i]);
    out.max_load = std::max({out.max_load, ++cnt_l[static_cast<size_t>(edges[i].left) * C + c],
                             ++cnt_r[static_cast<size_t>(edges[i].right) * C + c]});
  }
  return out;
}

}  // namespace weft::routing
