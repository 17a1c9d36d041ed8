#include "weft/routing/edge_coloring.h"

#include <fmt/format.h>

namespace weft::routing {

Result<std::vector<int>> color_bipartite_edges(int n_left, int n_right, const std::vector<BipartiteEdge>& edges,
                                               int colours) {
  if (colours < 1) return invalid_argument("edge colouring needs at least one colour");
  std::vector<int> deg_l(static_cast<size_t>(n_left), 0), deg_r(static_cast<size_t>(n_right), 0);
  for (const auto& e : edges) {
    if (e.left < 0 || e.left >= n_left || e.right < 0 || e.right >= n_right) {
      return invalid_argument("edge endpoint out of range");
    }
    if (++deg_l[e.left] > colours) {
      return failed_precondition(fmt::format("left vertex {} has more than {} edges", e.left, colours));
    }
    if (++deg_r[e.right] > colours) {
      return failed_precondition(fmt::format("right vertex {} has more than {} edges", e.right, colours));
    }
  }
  const size_t K = static_cast<size_t>(colours);
  // at_l[u*K + c] = edge of colour c at left vertex u, or -1.
  std::vector<int> at_l(static_cast<size_t>(n_left) * K, -1), at_r(static_cast<size_t>(n_right) * K, -1);
  std::vector<int> colour(edges.size(), -1);
  auto free_at = [&](const std::vector<int>& at, int v) {
    for (size_t c = 0; c < K; ++c) {
      if (at[v * K + c] < 0) return static_cast<int>(c);
    }
    return -1;
  };
  std::vector<int> path;
  for (size_t e = 0; e < edges.size(); ++e) {
    const int u = edges[e].left, v = edges[e].right;
    const int a = free_at(at_l, u);
    const int b = free_at(at_r, v);
    if (at_r[v * K + a] >= 0) {
      // Walk the a/b alternating path from v: v -a- u1 -b- v2 -a- u2 ...
      path.clear();
      int x = v;
      bool on_right = true;
      int want = a;
      while (true) {
        int ed = on_right ? at_r[x * K + want] : at_l[x * K + want];
        if (ed < 0) break;
        path.push_back(ed);
        x = on_right ? edges[ed].left : edges[ed].right;
        on_right = !on_right;
        want = want == a ? b : a;
      }
      for (int ed : path) {
        at_l[edges[ed].left * K + colour[ed]] = -1;
        at_r[edges[ed].right * K + colour[ed]] = -1;
      }
      for (int ed : path) {
        colour[ed] = colour[ed] == a ? b : a;
        at_l[edges[ed].left * K + colour[ed]] = ed;
        at_r[edges[ed].right * K + colour[ed]] = ed;
      }
    }
    colour[e] = a;
    at_l[u * K + a] = static_cast<int>(e);
    at_r[v * K + a] = static_cast<int>(e);
  }
  return colour;
}

}  // namespace weft::routing
