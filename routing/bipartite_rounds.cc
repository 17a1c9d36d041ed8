#include "weft/routing/bipartite_rounds.h"

#include <algorithm>
#include <cstdint>
#include <unordered_map>

#include "weft/routing/edge_coloring.h"

namespace weft::routing {
namespace {

// SplitMix64 (Steele, Lea, Flood, "Fast splittable pseudorandom number
// generators", OOPSLA 2014): a flow's random tag for the link signatures.
uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

}  // namespace

int bipartite_rounds(std::span<const RoundFlow> flows, std::span<const size_t> order, int num_directed_links,
                     std::vector<int>& round) {
  // A link's signature: the sum of its flows' tags and their count. Equal
  // signatures are taken as equal flow sets; the result is verified below,
  // so a collision (2^-64 per pair) can only cost the fallback.
  const size_t nl = static_cast<size_t>(num_directed_links);
  std::vector<uint64_t> sig(nl, 0);
  std::vector<int> cnt(nl, 0), cls(nl, -1);
  std::vector<int> touched;
  for (size_t i = 0; i < flows.size(); ++i) {
    const uint64_t tag = mix(i);
    for (int dl : flows[i].fabric_links) {
      if (cnt[static_cast<size_t>(dl)]++ == 0) touched.push_back(dl);
      sig[static_cast<size_t>(dl)] += tag;
    }
  }
  std::unordered_map<uint64_t, int> class_of_sig;
  class_of_sig.reserve(touched.size());
  for (int dl : touched) {
    const uint64_t key = sig[static_cast<size_t>(dl)] ^ mix(static_cast<uint64_t>(cnt[static_cast<size_t>(dl)]) << 32);
    cls[static_cast<size_t>(dl)] = class_of_sig.try_emplace(key, static_cast<int>(class_of_sig.size())).first->second;
  }
  const int nc = static_cast<int>(class_of_sig.size());
  // Each flow: at most two classes, an edge between them (or to a vertex of
  // its own); sides by breadth-first search.
  std::vector<std::pair<int, int>> ends(flows.size(), {-1, -1});
  std::vector<std::vector<int>> adj(static_cast<size_t>(nc));
  for (size_t i = 0; i < flows.size(); ++i) {
    auto& [a, b] = ends[i];
    for (int dl : flows[i].fabric_links) {
      const int c = cls[static_cast<size_t>(dl)];
      if (c == a || c == b) continue;
      if (a < 0) {
        a = c;
      } else if (b < 0) {
        b = c;
      } else {
        return 0;
      }
    }
    if (a >= 0 && b >= 0) {
      adj[static_cast<size_t>(a)].push_back(b);
      adj[static_cast<size_t>(b)].push_back(a);
    }
  }
  std::vector<int> side(static_cast<size_t>(nc), -1), queue;
  for (int s = 0; s < nc; ++s) {
    if (side[static_cast<size_t>(s)] >= 0) continue;
    side[static_cast<size_t>(s)] = 0;
    queue.assign(1, s);
    for (size_t q = 0; q < queue.size(); ++q) {
      const int v = queue[q];
      for (int w : adj[static_cast<size_t>(v)]) {
        if (side[static_cast<size_t>(w)] < 0) {
          side[static_cast<size_t>(w)] = 1 - side[static_cast<size_t>(v)];
          queue.push_back(w);
        } else if (side[static_cast<size_t>(w)] == side[static_cast<size_t>(v)]) {
          return 0;  // an odd cycle: not bipartite
        }
      }
    }
  }
  // Vertices: classes on side 0 left, side 1 right; a one-class flow's own
  // vertex on the other side. Edges in the caller's order.
  std::vector<int> index(static_cast<size_t>(nc));
  int n_left = 0, n_right = 0;
  for (int c = 0; c < nc; ++c) index[static_cast<size_t>(c)] = side[static_cast<size_t>(c)] == 0 ? n_left++ : n_right++;
  std::vector<BipartiteEdge> edges;
  std::vector<size_t> edge_flow;
  std::vector<int> deg_l(static_cast<size_t>(n_left), 0), deg_r(static_cast<size_t>(n_right), 0);
  for (size_t i : order) {
    auto [a, b] = ends[i];
    if (a < 0) continue;  // no fabric link: round 0
    if (b >= 0 && side[static_cast<size_t>(a)] == 1) std::swap(a, b);
    BipartiteEdge e{};
    if (b >= 0) {
      e = {index[static_cast<size_t>(a)], index[static_cast<size_t>(b)]};
    } else if (side[static_cast<size_t>(a)] == 0) {
      e = {index[static_cast<size_t>(a)], n_right++};
      deg_r.push_back(0);
    } else {
      e = {n_left++, index[static_cast<size_t>(a)]};
      deg_l.push_back(0);
    }
    edges.push_back(e);
    edge_flow.push_back(i);
  }
  int max_deg = 1;
  for (const auto& e : edges) {
    max_deg = std::max({max_deg, ++deg_l[static_cast<size_t>(e.left)], ++deg_r[static_cast<size_t>(e.right)]});
  }
  auto colour = color_bipartite_edges(n_left, n_right, edges, max_deg);
  if (!colour) return 0;
  std::vector<int> out(flows.size(), 0);
  for (size_t k = 0; k < edges.size(); ++k) out[edge_flow[k]] = (*colour)[k];
  // Verify: no directed link twice in one round (a merged class whose links
  // did not in fact carry the same flows would show here).
  // Rounds as bits of one word per link while they fit (a vector per link
  // costs an allocation for each of ~10^5 links per class), else sorted
  // (link, round) pairs.
  if (max_deg <= 64) {
    std::vector<uint64_t> seen(nl, 0);
    for (size_t i = 0; i < flows.size(); ++i) {
      const uint64_t bit = uint64_t{1} << out[i];
      for (int dl : flows[i].fabric_links) {
        uint64_t& s = seen[static_cast<size_t>(dl)];
        if (s & bit) return 0;
        s |= bit;
      }
    }
  } else {
    std::vector<uint64_t> seen;
    for (size_t i = 0; i < flows.size(); ++i) {
      for (int dl : flows[i].fabric_links) {
        seen.push_back(static_cast<uint64_t>(dl) << 32 | static_cast<uint32_t>(out[i]));
      }
    }
    std::sort(seen.begin(), seen.end());
    if (std::adjacent_find(seen.begin(), seen.end()) != seen.end()) return 0;
  }
  round = std::move(out);
  return max_deg;
}

}  // namespace weft::routing
