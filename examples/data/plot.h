// Pictures for the examples, drawn by gnuplot: heatmaps with axes and a colour bar, line plots.
//
// gnuplot is a Debian package that scripts/setup.sh installs (gnuplot-nox); it is not needed to
// build linea. Without it on PATH heatmap_plot and line_plot throw; gnuplot_available() says.
//
//   plot::heatmap_plot("a.png", {.title = "softmax", .cblabel = "weight", .vmin = 1e-4, .log = true,
//                                .maps = {head0, head1}, .labels = {"head 0", "head 1"}});
//   plot::line_plot("rank.png", {.title = "rank", .xlabel = "N", .ylabel = "rank", .logx = true,
//                                .series = {{"linear", ns, ranks}}});
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include <linea/linea.h>

namespace linea::plot {

bool gnuplot_available();  // a `gnuplot` program is on PATH

// 2-D maps of one shape [rows, cols] drawn side by side as panels on one colour scale (viridis:
// dark = vmin, yellow = vmax; log10 of both when `log`), rows top to bottom, with axes, ticks, a
// label over each panel, one colour bar, the title above and the caption below. NaN entries are
// masked (a causal map's upper triangle) and drawn grey; values below vmin take vmin's colour.
struct HeatmapPlot {
  std::string title = "", caption = "";
  std::string xlabel = "key index", ylabel = "query index", cblabel = "attention weight";
  double vmin = 0, vmax = 1;
  bool log = false;
  std::vector<Tensor> maps;         // 2-D float CPU tensors of one shape
  std::vector<std::string> labels;  // one per map, or none
  int64_t panel = 260;              // pixels per panel side
};

// The gnuplot script heatmap_plot runs to draw `plot` into `output`, the maps inline. Throws a
// linea::Error on maps of different shapes, a bad scale, or labels that do not match the maps.
std::string heatmap_script(const std::string& output, const HeatmapPlot& plot);

// Draws `plot` into a PNG through gnuplot, as line_plot does (atomically, errors named). Its size
// is heatmap_size(plot).
void heatmap_plot(const std::string& png_path, const HeatmapPlot& plot);

struct PixelSize {
  int64_t width = 0, height = 0;
};
PixelSize heatmap_size(const HeatmapPlot& plot);

struct Series {
  std::string name;
  std::vector<double> x, y;  // of equal length; NaN y values leave a gap
  int64_t color = -1;        // index into the plot's palette (-1: the series' own index)
  bool dashed = false;       // a reference line (a bound): dashed, no markers
};

struct LinePlot {
  std::string title, xlabel, ylabel;
  std::string caption = "";  // a line of text under the plot, e.g. what the axes mean
  bool logx = false, logy = false;
  std::vector<Series> series;
  int64_t width = 800, height = 500;  // pixels
};

// Draws every series into a PNG through gnuplot: lines with points (a distinct colour and marker
// per series), or lines alone for a dashed series or one thinned to the plot's width
// (thin_series). The PNG is drawn into a temp file beside png_path and renamed onto it, so a
// failed or killed gnuplot never leaves an empty or partial PNG. Throws a
// linea::Error when gnuplot is missing, or with gnuplot's error line when it fails.
void line_plot(const std::string& png_path, const LinePlot& plot);

// The gnuplot script line_plot runs to draw `plot` into `output`, its data inline. Each series is
// thin_series(s, plot.width), so the script stays within a few points per pixel column however
// long the series (gnuplot's time grows faster than linearly with inline points).
std::string gnuplot_script(const std::string& output, const LinePlot& plot);

// `s` with at most 3 points per bucket of consecutive points, `buckets` buckets in all: each
// bucket's lowest and highest y and its first NaN (a gap), in their order. A spike stays visible
// however many points share its pixel column. A series of at most 3·buckets points is returned whole.
Series thin_series(const Series& s, int64_t buckets);

// A run's metrics.csv (a header of column names, then numeric rows, as the examples write) as
// loss and accuracy curves: <dir>/loss.png gets every column whose name holds "loss",
// <dir>/accuracy.png every column holding "acc", both against the "step" column (else the first).
// Returns the files written (accuracy.png only when there are such columns).
std::vector<std::string> plot_metrics(const std::string& csv_path, const std::string& out_dir);

// The command that draws a run's curves: "<this program's folder>/plot_metrics <run_dir>", for the
// end-of-run message of the training examples (plot_metrics is built beside them).
std::string plot_metrics_command(const std::string& run_dir);

}  // namespace linea::plot
