#include "cli/plan_plot.h"

#include <fmt/format.h>

#include <algorithm>

namespace kvpool::cli {
namespace {

constexpr double kWidth = 640, kHeight = 400, kLeft = 70, kRight = 20, kTop = 40, kBottom = 50;

std::string Escape(const std::string& text) {
  std::string out;
  for (char c : text) {
    if (c == '&') out += "&amp;";
    else if (c == '<') out += "&lt;";
    else if (c == '>') out += "&gt;";
    else out += c;
  }
  return out;
}

}  // namespace

std::string PlanPlotSvg(const std::vector<PlanPlotPoint>& points, double ceiling, const std::string& title) {
  const double x_max = std::max(1.0, points.back().pool_tokens) * 1.05;
  const auto x = [&](double tokens) { return kLeft + tokens / x_max * (kWidth - kLeft - kRight); };
  const auto y = [&](double share) { return kHeight - kBottom - share * (kHeight - kTop - kBottom); };
  std::string svg = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{0}\" height=\"{1}\" font-family=\"sans-serif\" "
      "font-size=\"12\">\n<rect width=\"{0}\" height=\"{1}\" fill=\"white\"/>\n"
      "<text x=\"{2}\" y=\"24\" font-size=\"14\">{3}</text>\n",
      kWidth, kHeight, kLeft, Escape(title));
  for (int pct = 0; pct <= 100; pct += 20) {  // horizontal grid and the y axis's labels
    svg += fmt::format("<line x1=\"{0}\" x2=\"{1}\" y1=\"{2:.1f}\" y2=\"{2:.1f}\" stroke=\"#ddd\"/>"
                       "<text x=\"{3}\" y=\"{4:.1f}\" text-anchor=\"end\">{5}%</text>\n",
                       kLeft, kWidth - kRight, y(pct / 100.0), kLeft - 6, y(pct / 100.0) + 4, pct);
  }
  for (const PlanPlotPoint& p : points) {  // the x axis's labels: the planned sizes
    svg += fmt::format("<text x=\"{:.1f}\" y=\"{}\" text-anchor=\"middle\">{:g}M</text>\n", x(p.pool_tokens),
                       kHeight - kBottom + 18, p.pool_tokens / 1e6);
  }
  svg += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">pool size (tokens)</text>\n",
                     (kLeft + kWidth - kRight) / 2, kHeight - 10);
  svg += fmt::format("<line x1=\"{0}\" x2=\"{1}\" y1=\"{2:.1f}\" y2=\"{2:.1f}\" stroke=\"#999\" "
                     "stroke-dasharray=\"6 4\"/><text x=\"{1}\" y=\"{3:.1f}\" text-anchor=\"end\" fill=\"#666\">"
                     "ceiling {4:.1f}%</text>\n",
                     kLeft, kWidth - kRight, y(ceiling), y(ceiling) - 5, 100 * ceiling);
  const auto line = [&](double PlanPlotPoint::*share, const char* colour, const char* label, double label_y) {
    std::string path;
    for (const PlanPlotPoint& p : points) {
      path += fmt::format("{}{:.1f},{:.1f}", path.empty() ? "" : " ", x(p.pool_tokens), y(p.*share));
      svg += fmt::format("<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"3\" fill=\"{}\"/>\n", x(p.pool_tokens),
                         y(p.*share), colour);
    }
    svg += fmt::format("<polyline points=\"{}\" fill=\"none\" stroke=\"{}\" stroke-width=\"2\"/>\n"
                       "<text x=\"{}\" y=\"{}\" fill=\"{}\" text-anchor=\"end\">{}</text>\n",
                       path, colour, kWidth - kRight - 10, label_y, colour, label);
  };
  // The legend in the bottom right corner: reuse only grows with the pool, so the lines are high there.
  line(&PlanPlotPoint::reuse, "#1f77b4", "reuse (GPU cache + pool)", kHeight - kBottom - 30);
  line(&PlanPlotPoint::pool_share, "#ff7f0e", "from the pool", kHeight - kBottom - 14);
  return svg + "</svg>\n";
}

}  // namespace kvpool::cli
