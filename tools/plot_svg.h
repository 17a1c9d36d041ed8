// A line chart as SVG (weft sim's busbw-vs-endpoints plot): log2 x axis,
// linear y axis from 0, one polyline with markers per series, a legend.
#pragma once

#include <string>
#include <vector>

namespace weft::cli {

struct PlotSeries {
  std::string name;
  std::vector<double> x;  // > 0 (log2 axis)
  std::vector<double> y;
};

std::string line_plot_svg(const std::string& title, const std::string& x_label, const std::string& y_label,
                          const std::vector<PlotSeries>& series);

}  // namespace weft::cli
