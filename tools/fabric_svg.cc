#include "fabric_svg.h"

#include <algorithm>
#include <cmath>
#include <iterator>

#include <fmt/format.h>

namespace weft::cli {
namespace {

// Grey when idle, through amber to red at full utilisation.
std::string colour(double u) {
  u = std::clamp(u, 0.0, 1.0);
  const int r = static_cast<int>(std::lround(190 + 65 * u));
  const int g = static_cast<int>(std::lround(190 - 150 * u));
  const int b = static_cast<int>(std::lround(190 - 170 * u));
  return fmt::format("#{:02x}{:02x}{:02x}", r, g, b);
}

std::string escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '<') out += "&lt;";
    else if (c == '>') out += "&gt;";
    else if (c == '&') out += "&amp;";
    else out += c;
  }
  return out;
}

// Switches and NICs of a multi-plane fabric are filled by plane (fabric.h).
const char* plane_fill(int plane, bool sw) {
  static constexpr const char* kPlanes[] = {"#3b6ea5", "#2e8b57", "#8a4fa3", "#b5651d"};
  if (plane < 0) return sw ? "#3b6ea5" : "#555555";
  return kPlanes[static_cast<size_t>(plane) % std::size(kPlanes)];
}

// " rail R plane P" (what the vertex has of them), for its tooltip.
std::string rail_plane_label(const topo::Fabric& f, int v) {
  const int rail = f.is_switch_vertex(v) ? f.switches[static_cast<size_t>(f.vertex_switch(v))].rail : f.nic_rail(v);
  const int plane = f.is_switch_vertex(v) ? f.switches[static_cast<size_t>(f.vertex_switch(v))].plane : f.nic_plane(v);
  std::string out;
  if (rail >= 0) out += fmt::format(" rail {}", rail);
  if (plane >= 0) out += fmt::format(" plane {}", plane);
  return out;
}

}  // namespace

std::string fabric_svg(const topo::Fabric& f, const std::vector<SvgPanel>& panels) {
  // Rows: tier 2, tier 1, tier 0 switches, then NICs (grouped under their leaf).
  const int tiers = std::max(1, f.num_tiers());
  std::vector<std::vector<int>> rows(static_cast<size_t>(tiers) + 1);
  for (size_t s = 0; s < f.switches.size(); ++s) rows[static_cast<size_t>(tiers - 1 - f.switches[s].tier)].push_back(f.switch_vertex(static_cast<int>(s)));
  for (int leaf : rows[static_cast<size_t>(tiers - 1)]) {
    for (int n : f.switch_nics(f.vertex_switch(leaf))) rows[static_cast<size_t>(tiers)].push_back(f.nic_vertex(n));
  }
  size_t widest = 1;
  for (const auto& r : rows) widest = std::max(widest, r.size());
  const double panel_w = std::max(360.0, 18.0 * static_cast<double>(widest) + 40);
  const double row_h = 110, top = 50;
  const double height = top + row_h * static_cast<double>(rows.size()) + 30;
  std::vector<double> x(static_cast<size_t>(f.num_vertices()), 0), y(x.size(), 0);
  for (size_t r = 0; r < rows.size(); ++r) {
    for (size_t i = 0; i < rows[r].size(); ++i) {
      x[static_cast<size_t>(rows[r][i])] = 20 + (panel_w - 40) * (static_cast<double>(i) + 0.5) / static_cast<double>(rows[r].size());
      y[static_cast<size_t>(rows[r][i])] = top + row_h * static_cast<double>(r) + 20;
    }
  }
  std::string svg = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{:.0f}\" height=\"{:.0f}\" font-family=\"sans-serif\" "
      "font-size=\"11\">\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n",
      panel_w * static_cast<double>(std::max<size_t>(1, panels.size())), height);
  for (size_t p = 0; p < panels.size(); ++p) {
    const double ox = panel_w * static_cast<double>(p);
    svg += fmt::format("<g transform=\"translate({:.0f},0)\">\n<text x=\"20\" y=\"24\" font-size=\"14\" font-weight=\"bold\">{}</text>\n",
                       ox, escape(panels[p].title));
    for (size_t l = 0; l < f.links.size(); ++l) {
      const auto& lk = f.links[l];
      double u = 0;
      if (2 * l + 1 < panels[p].utilisation.size()) u = std::max(panels[p].utilisation[2 * l], panels[p].utilisation[2 * l + 1]);
      const bool down = lk.state != topo::LinkState::kUp ||
                        std::find(panels[p].down.begin(), panels[p].down.end(), static_cast<int>(l)) != panels[p].down.end();
      svg += fmt::format(
          "<line x1=\"{:.1f}\" y1=\"{:.1f}\" x2=\"{:.1f}\" y2=\"{:.1f}\" stroke=\"{}\" stroke-width=\"{:.1f}\"{}>"
          "<title>{} - {}: {:.0f}%{}</title></line>\n",
          x[static_cast<size_t>(lk.a)], y[static_cast<size_t>(lk.a)], x[static_cast<size_t>(lk.b)], y[static_cast<size_t>(lk.b)],
          down ? "#000000" : colour(u), down ? 1.0 : 1.0 + 5.0 * std::min(u, 1.0), down ? " stroke-dasharray=\"4,3\"" : "",
          escape(f.vertex_name(lk.a)), escape(f.vertex_name(lk.b)), 100 * u, down ? " (down)" : "");
    }
    for (const auto& row : rows) {
      for (int v : row) {
        const bool sw = f.is_switch_vertex(v);
        const int plane = sw ? f.switches[static_cast<size_t>(f.vertex_switch(v))].plane : f.nic_plane(v);
        svg += fmt::format("<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"{}\" fill=\"{}\"><title>{}{}</title></circle>\n",
                           x[static_cast<size_t>(v)], y[static_cast<size_t>(v)], sw ? 9 : 4, plane_fill(plane, sw),
                           escape(f.vertex_name(v)), rail_plane_label(f, v));
        if (sw) {
          svg += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\">{}</text>\n", x[static_cast<size_t>(v)],
                             y[static_cast<size_t>(v)] - 13, escape(f.switches[static_cast<size_t>(f.vertex_switch(v))].name));
        }
      }
    }
    svg += "</g>\n";
  }
  svg += fmt::format("<text x=\"20\" y=\"{:.0f}\" fill=\"#555\">link colour and width: utilisation of the busier direction "
                     "(grey idle, red saturated); dashed: down{}</text>\n</svg>\n",
                     height - 10, f.num_planes() > 0 ? "; switches and NICs filled by plane" : "");
  return svg;
}

}  // namespace weft::cli
