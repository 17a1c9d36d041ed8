// A line chart as SVG: weft sim's busbw-vs-endpoints plot (log2 x axis) and
// weft demo's busbw-over-time plot (linear x axis, events marked by vertical
// lines); linear y axis from 0, one polyline with markers per series, a legend.
#pragma once

#include <string>
#include <vector>

namespace weft::cli {

struct PlotSeries {
  std::string name;
  std::vector<double> x;  // > 0 (log2 axis)
  std::vector<double> y;
};

struct PlotMarker {
  double x = 0;       // a vertical line here, labelled at the top
  std::string label;
};

struct PlotAxes {
  bool log2_x = true;  // false: linear x from the smallest x (or 0) up
  std::vector<PlotMarker> markers;
};

std::string line_plot_svg(const std::string& title, const std::string& x_label, const std::string& y_label,
                          const std::vector<PlotSeries>& series, const PlotAxes& axes = {});

}  // namespace weft::cli
