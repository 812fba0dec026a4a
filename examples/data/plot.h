// Pictures for the examples: heatmaps as PNG through libpng, line plots through gnuplot.
//
// Both tools are Debian packages that scripts/setup.sh installs (libpng-dev, gnuplot-nox); neither
// is needed to build linea. Without libpng at configure time write_heatmap_png throws, without
// gnuplot on PATH line_plot throws; png_available() / gnuplot_available() say which works here.
//
//   plot::write_heatmap_png("a.png", {head0, head1, mean}, {.vmin = 1e-4, .vmax = 1, .log = true});
//   plot::line_plot("rank.png", {.title = "rank", .xlabel = "N", .ylabel = "rank", .logx = true,
//                                .series = {{"linear", ns, ranks}}});
#pragma once
#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include <linea/linea.h>

namespace linea::plot {

bool png_available();      // this build links libpng
bool gnuplot_available();  // a `gnuplot` program is on PATH

// How a value becomes a colour: clipped to [vmin, vmax] (on log10 of both when `log`), then
// mapped onto viridis (dark purple = vmin, yellow = vmax). One scale for several maps makes their
// colours comparable.
struct ColorScale {
  double vmin = 0, vmax = 1;
  bool log = false;  // values <= 0 then get vmin's colour
};

struct HeatmapLayout {
  int64_t pixel = 1;  // each cell becomes a pixel×pixel square
  int64_t gap = 4;    // white columns between maps
};

// 2-D maps of equal shape [rows, cols] (any float dtype, on the CPU), written side by side
// (left to right) as one RGB PNG of rows·pixel × (count·cols·pixel + (count − 1)·gap) pixels.
// Throws a linea::Error naming the file on bad shapes, a bad scale or a write failure.
void write_heatmap_png(const std::string& path, const std::vector<Tensor>& maps, ColorScale scale,
                       HeatmapLayout layout = {});

// The RGB colour (0..255 each) of t in [0, 1] on viridis, for a legend or a test.
std::array<uint8_t, 3> viridis(double t);

struct Series {
  std::string name;
  std::vector<double> x, y;  // of equal length; NaN y values leave a gap
};

struct LinePlot {
  std::string title, xlabel, ylabel;
  bool logx = false, logy = false;
  std::vector<Series> series;
  int64_t width = 800, height = 500;  // pixels
};

// Draws every series into a PNG through gnuplot: lines with points, or lines alone for a series
// thinned to the plot's width (thin_series). The PNG is drawn into a temp file beside png_path and
// renamed onto it, so a failed or killed gnuplot never leaves an empty or partial PNG. Throws a
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
