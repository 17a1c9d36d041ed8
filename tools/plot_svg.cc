#include "plot_svg.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

namespace weft::cli {
namespace {

std::string esc(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '<') out += "&lt;";
    else if (c == '>') out += "&gt;";
    else if (c == '&') out += "&amp;";
    else out += c;
  }
  return out;
}

// A "nice" step for about `n` ticks over [0, hi].
double tick_step(double hi, int n) {
  const double raw = hi / n, mag = std::pow(10.0, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 2.5, 5.0, 10.0}) {
    if (m * mag >= raw) return m * mag;
  }
  return 10 * mag;
}

}  // namespace

std::string line_plot_svg(const std::string& title, const std::string& x_label, const std::string& y_label,
                          const std::vector<PlotSeries>& series, const PlotAxes& axes) {
  const double W = 720, H = 440, L = 70, R = 200, T = 40, B = 60;
  // Everything x is placed in axis units: log2(x), or x itself.
  auto unit = [&](double x) { return axes.log2_x ? std::log2(x) : x; };
  double x_lo = INFINITY, x_hi = -INFINITY, y_hi = 0;
  for (const auto& s : series) {
    for (double x : s.x) x_lo = std::min(x_lo, unit(x)), x_hi = std::max(x_hi, unit(x));
    for (double y : s.y) y_hi = std::max(y_hi, y);
  }
  for (const auto& m : axes.markers) x_lo = std::min(x_lo, unit(m.x)), x_hi = std::max(x_hi, unit(m.x));
  if (!(x_lo <= x_hi)) x_lo = 0, x_hi = 1;
  if (!axes.log2_x) x_lo = std::min(x_lo, 0.0);
  if (x_hi - x_lo < 1) x_lo -= 0.5, x_hi += 0.5;
  if (y_hi <= 0) y_hi = 1;
  const double ystep = tick_step(y_hi, 5);
  y_hi = std::ceil(y_hi / ystep) * ystep;
  auto px = [&](double x) { return L + (unit(x) - x_lo) / (x_hi - x_lo) * (W - L - R); };
  auto py = [&](double y) { return T + (1 - y / y_hi) * (H - T - B); };
  static const char* colours[] = {"#d62728", "#ff7f0e", "#2ca02c", "#1f77b4", "#9467bd", "#8c564b"};
  std::string svg = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{:.0f}\" height=\"{:.0f}\" font-family=\"sans-serif\" "
      "font-size=\"12\">\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
      "<text x=\"{:.0f}\" y=\"24\" font-size=\"15\" font-weight=\"bold\">{}</text>\n",
      W, H, L, esc(title));
  for (double y = 0; y <= y_hi + 1e-9; y += ystep) {
    svg += fmt::format("<line x1=\"{:.1f}\" y1=\"{:.1f}\" x2=\"{:.1f}\" y2=\"{:.1f}\" stroke=\"#e5e5e5\"/>"
                       "<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"end\">{:g}</text>\n",
                       L, py(y), W - R, py(y), L - 6, py(y) + 4, y);
  }
  const double xstep = axes.log2_x ? 1 : tick_step(x_hi - x_lo, 8);
  for (double lx = std::ceil(x_lo / xstep) * xstep; lx <= x_hi + 1e-9; lx += xstep) {
    const double x = axes.log2_x ? std::exp2(lx) : lx;
    svg += fmt::format("<line x1=\"{:.1f}\" y1=\"{:.1f}\" x2=\"{:.1f}\" y2=\"{:.1f}\" stroke=\"#e5e5e5\"/>"
                       "<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\">{:g}</text>\n",
                       px(x), T, px(x), H - B, px(x), H - B + 18, x);
  }
  svg += fmt::format("<rect x=\"{:.0f}\" y=\"{:.0f}\" width=\"{:.0f}\" height=\"{:.0f}\" fill=\"none\" stroke=\"#333\"/>\n",
                     L, T, W - L - R, H - T - B);
  svg += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\">{}</text>\n", L + (W - L - R) / 2, H - 18,
                     esc(x_label));
  svg += fmt::format("<text transform=\"translate(18,{:.1f}) rotate(-90)\" text-anchor=\"middle\">{}</text>\n",
                     T + (H - T - B) / 2, esc(y_label));
  for (size_t i = 0; i < axes.markers.size(); ++i) {  // labels staggered: events may be close in time
    const PlotMarker& m = axes.markers[i];
    svg += fmt::format("<line x1=\"{0:.1f}\" y1=\"{1:.1f}\" x2=\"{0:.1f}\" y2=\"{2:.1f}\" stroke=\"#555\" "
                       "stroke-dasharray=\"5,4\"/><text x=\"{3:.1f}\" y=\"{4:.1f}\" font-size=\"11\">{5}</text>\n",
                       px(m.x), T, H - B, px(m.x) + 3, T + 12 + 13 * static_cast<double>(i % 3), esc(m.label));
  }
  for (size_t i = 0; i < series.size(); ++i) {
    const auto& s = series[i];
    const char* c = colours[i % 6];
    std::string pts;
    for (size_t k = 0; k < s.x.size() && k < s.y.size(); ++k) pts += fmt::format("{:.1f},{:.1f} ", px(s.x[k]), py(s.y[k]));
    svg += fmt::format("<polyline points=\"{}\" fill=\"none\" stroke=\"{}\" stroke-width=\"2\"/>\n", pts, c);
    for (size_t k = 0; k < s.x.size() && k < s.y.size(); ++k) {
      svg += fmt::format("<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"3.5\" fill=\"{}\"><title>{}: {:g} at {:g}</title></circle>\n",
                         px(s.x[k]), py(s.y[k]), c, esc(s.name), s.y[k], s.x[k]);
    }
    const double ly = T + 10 + 22 * static_cast<double>(i);
    svg += fmt::format("<line x1=\"{:.0f}\" y1=\"{:.0f}\" x2=\"{:.0f}\" y2=\"{:.0f}\" stroke=\"{}\" stroke-width=\"3\"/>"
                       "<text x=\"{:.0f}\" y=\"{:.0f}\">{}</text>\n",
                       W - R + 14, ly, W - R + 40, ly, c, W - R + 46, ly + 4, esc(s.name));
  }
  return svg + "</svg>\n";
}

}  // namespace weft::cli
