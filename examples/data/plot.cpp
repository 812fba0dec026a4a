// Heatmaps and line plots through gnuplot (data/plot.h).
#include "data/plot.h"
#include "data/output_paths.h"
#include "data/run_files.h"

#include <algorithm>
#include <array>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <tuple>

#include <fmt/core.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

namespace linea::plot {

namespace fs = std::filesystem;

bool gnuplot_available() { return std::system("command -v gnuplot > /dev/null 2>&1") == 0; }

// ---------------------------------------------------------------- line plots

namespace {

// gnuplot takes strings in double quotes; a backslash or quote in a label or path would end them.
std::string quoted(const std::string& s) {
  std::string q = "\"";
  for (char ch : s) {
    if (ch == '"' || ch == '\\') q += '\\';
    q += ch;
  }
  return q + "\"";
}

// A unique temporary file name for this process.
fs::path temp_file(const std::string& suffix) {
  static int counter = 0;
  return fs::temp_directory_path() / fmt::format("linea_plot_{}_{}{}", ::getpid(), counter++, suffix);
}

// The last non-blank line of a file: gnuplot's error, after its warnings and the echoed command.
std::string last_line(const fs::path& p) {
  std::ifstream f(p);
  std::string last;
  for (std::string line; std::getline(f, line);)
    if (line.find_first_not_of(" \t\r") != std::string::npos) last = line;
  return last;
}

// Colours far apart (Okabe-Ito, colour-blind safe, and black), markers of different shapes.
constexpr std::array<const char*, 8> kPalette = {"#0072b2", "#d55e00", "#009e73", "#cc79a7",
                                                 "#e69f00", "#56b4e9", "#000000", "#f0e442"};
constexpr std::array<int, 6> kMarkers = {7, 5, 9, 11, 13, 3};  // circle, square, triangles, diamond, star

void check_plot(const std::string& output, const LinePlot& plot) {
  LINEA_CHECK(!plot.series.empty(), "[line_plot] no series to draw into '{}'", output);
  LINEA_CHECK(plot.width > 0 && plot.height > 0, "[line_plot] size {}x{} must be positive", plot.width, plot.height);
  for (const Series& s : plot.series)
    LINEA_CHECK(s.x.size() == s.y.size() && !s.x.empty(), "[line_plot] series '{}' has {} x and {} y values",
                s.name, s.x.size(), s.y.size());
}

}  // namespace

Series thin_series(const Series& s, int64_t buckets) {
  LINEA_CHECK(buckets > 0, "[thin_series] buckets must be positive, got {}", buckets);
  const auto n = int64_t(s.x.size());
  if (n <= 3 * buckets) return s;
  Series out{s.name, {}, {}};
  for (int64_t b = 0; b < buckets; ++b) {
    const int64_t lo = b * n / buckets, hi = (b + 1) * n / buckets;
    int64_t imin = -1, imax = -1, inan = -1;
    for (int64_t i = lo; i < hi; ++i) {
      const double y = s.y[size_t(i)];
      if (std::isnan(y)) {
        if (inan < 0) inan = i;
      } else {
        if (imin < 0 || y < s.y[size_t(imin)]) imin = i;
        if (imax < 0 || y > s.y[size_t(imax)]) imax = i;
      }
    }
    std::vector<int64_t> keep;
    for (int64_t i : {imin, imax, inan})
      if (i >= 0 && std::find(keep.begin(), keep.end(), i) == keep.end()) keep.push_back(i);
    std::sort(keep.begin(), keep.end());
    for (int64_t i : keep) out.x.push_back(s.x[size_t(i)]), out.y.push_back(s.y[size_t(i)]);
  }
  return out;
}

std::string gnuplot_script(const std::string& output, const LinePlot& plot) {
  check_plot(output, plot);
  // The data goes inline, as datablocks ($d0, $d1, ...), so one file is all gnuplot reads.
  std::string gp, plots;
  for (size_t i = 0; i < plot.series.size(); ++i) {
    const Series s = thin_series(plot.series[i], plot.width);
    gp += fmt::format("$d{} << EOD\n", i);
    for (size_t j = 0; j < s.x.size(); ++j)
      gp += std::isnan(s.y[j]) ? "\n" : fmt::format("{:.10g} {:.10g}\n", s.x[j], s.y[j]);
    gp += "EOD\n";
    // A thinned series has points closer than a pixel: markers would only blot the line.
    const bool thinned = s.x.size() < plot.series[i].x.size();
    const Series& si = plot.series[i];
    const size_t c = size_t(si.color >= 0 ? si.color : int64_t(i)) % kPalette.size();
    const std::string style = si.dashed ? "lines lw 1.5 dt (8,6)"
                              : thinned ? "lines lw 2"
                                        : fmt::format("linespoints lw 2 pt {} ps 1.1", kMarkers[c % kMarkers.size()]);
    plots += fmt::format("{}$d{} using 1:2 with {} lc rgb \"{}\" title {}", i ? ", " : "", i, style, kPalette[c],
                         quoted(s.name));
  }
  // noenhanced: names such as train_loss print as written, not with "_l" as a subscript.
  gp += fmt::format("set terminal pngcairo size {},{} noenhanced font \"sans,11\"\nset output {}\n", plot.width,
                    plot.height, quoted(output));
  gp += fmt::format("set title {}\nset xlabel {}\nset ylabel {}\n", quoted(plot.title), quoted(plot.xlabel),
                    quoted(plot.ylabel));
  // A margin above and below, so a line along the lowest or highest value is not hidden by the axis.
  gp += "set grid\nset key outside right top\nset offsets 0, 0, graph 0.04, graph 0.04\n";
  if (!plot.caption.empty())
    gp += fmt::format("set bmargin 5\nset label 1 {} at screen 0.01,0.03 left\n", quoted(plot.caption));
  if (plot.logx) gp += "set logscale x 2\n";
  if (plot.logy) gp += "set logscale y 2\n";
  return gp + "plot " + plots + "\nunset output\n";
}

namespace {

// Runs the gnuplot script script_for(temp PNG) and renames the temp file onto png_path, so a
// failed or killed gnuplot never leaves an empty or partial PNG.
template <class ScriptFor>
void draw(const std::string& png_path, const char* who, ScriptFor script_for) {
  LINEA_CHECK(gnuplot_available(), "[{}] cannot draw '{}': gnuplot is not installed "
              "(apt-get install gnuplot-nox, or scripts/setup.sh)", who, png_path);
  std::string tmp = fmt::format("{}.tmp.{}.XXXXXX", png_path, ::getpid());  // write_file_atomically's temp name
  const int fd = ::mkstemp(tmp.data());
  LINEA_CHECK(fd >= 0, "[{}] cannot write '{}': {}", who, png_path, std::strerror(errno));
  ::fchmod(fd, 0644);  // mkstemp's 0600 would carry over to the PNG
  ::close(fd);
  std::string script_text;
  try {
    script_text = script_for(tmp);
  } catch (...) {
    ::unlink(tmp.c_str());
    throw;
  }
  const fs::path script = temp_file(".gp"), err = temp_file(".err");
  std::ofstream(script) << script_text;
  const int rc = std::system(fmt::format("gnuplot '{}' 2> '{}'", script.string(), err.string()).c_str());
  const std::string message = last_line(err);
  std::error_code ec;
  fs::remove(script, ec);
  fs::remove(err, ec);
  const bool drawn = rc == 0 && fs::file_size(tmp, ec) > 0 && !ec;
  if (!drawn || ::rename(tmp.c_str(), png_path.c_str()) != 0) {
    const std::string why = drawn ? std::strerror(errno)
                                  : fmt::format("gnuplot failed (exit {}): {}", WIFEXITED(rc) ? WEXITSTATUS(rc) : rc,
                                                message);
    ::unlink(tmp.c_str());
    throw Error(fmt::format("[{}] cannot draw '{}': {}", who, png_path, why));
  }
}

}  // namespace

void line_plot(const std::string& png_path, const LinePlot& plot) {
  check_plot(png_path, plot);
  draw(png_path, "line_plot", [&](const std::string& tmp) { return gnuplot_script(tmp, plot); });
}

// ---------------------------------------------------------------- heatmaps

namespace {

// Pixels around the panels: the title and panel labels above, axis labels and the caption
// below, the y label left, the colour bar and its label right.
constexpr int64_t kTop = 70, kBottom = 80, kLeft = 70, kGap = 40, kRight = 130;

void check_heatmap(const std::string& output, const HeatmapPlot& p) {
  LINEA_CHECK(!p.maps.empty(), "[heatmap_plot] no maps to draw into '{}'", output);
  LINEA_CHECK(p.labels.empty() || p.labels.size() == p.maps.size(),
              "[heatmap_plot] {} labels for {} maps in '{}'", p.labels.size(), p.maps.size(), output);
  LINEA_CHECK(p.panel >= 32 && p.panel <= 4096, "[heatmap_plot] panel {} pixels must be in [32, 4096]", p.panel);
  const bool ok_scale = p.log ? (p.vmin > 0 && p.vmax > p.vmin) : p.vmax > p.vmin;
  LINEA_CHECK(ok_scale, "[heatmap_plot] colour scale [{}, {}]{} is empty{}", p.vmin, p.vmax, p.log ? " (log)" : "",
              p.log ? " or not positive" : "");
  const Shape shape = p.maps[0].shape();
  for (const Tensor& m : p.maps)
    LINEA_CHECK(m.dim() == 2 && m.shape() == shape && is_floating(m.dtype()) && m.device().is_cpu() && m.numel() > 0,
                "[heatmap_plot] maps must be non-empty 2-D float CPU tensors of one shape; got {} {} on {} next to {}",
                shape_str(m.shape()), m.dtype(), m.device(), shape_str(shape));
}

}  // namespace

PixelSize heatmap_size(const HeatmapPlot& p) {
  const auto count = int64_t(p.maps.size());
  return {kLeft + count * p.panel + (count - 1) * kGap + kRight, kTop + p.panel + kBottom};
}

std::string heatmap_script(const std::string& output, const HeatmapPlot& p) {
  check_heatmap(output, p);
  const int64_t rows = p.maps[0].size(0), cols = p.maps[0].size(1), count = int64_t(p.maps.size());
  const PixelSize size = heatmap_size(p);
  const auto W = double(size.width), H = double(size.height);
  std::string gp;
  for (int64_t m = 0; m < count; ++m) {
    // Values below vmin are raised to it (a log axis has no place for 0); NaN stays: masked.
    const std::vector<double> v = p.maps[size_t(m)].to_vector();
    gp += fmt::format("$m{} << EOD\n", m);
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t c = 0; c < cols; ++c) {
        const double x = v[size_t(r * cols + c)];
        gp += std::isnan(x) ? (c ? " NaN" : "NaN") : fmt::format("{}{:.4g}", c ? " " : "", std::max(x, p.vmin));
      }
      gp += "\n";
    }
    gp += "EOD\n";
  }
  gp += fmt::format("set terminal pngcairo size {},{} noenhanced font \"sans,10\"\nset output {}\n", size.width,
                    size.height, quoted(output));
  // matplotlib's viridis at 9 evenly spaced points (dark purple, teal, yellow).
  gp += "set palette defined (0 '#440154', 1 '#472c7a', 2 '#3b518b', 3 '#2c718e', 4 '#21908d', 5 '#27ad81', "
        "6 '#5cc863', 7 '#aadc32', 8 '#fde725')\n";
  gp += fmt::format("set cbrange [{:g}:{:g}]\nset cblabel {}\n", p.vmin, p.vmax, quoted(p.cblabel));
  if (p.log) gp += "set logscale cb 10\nset format cb \"%.0e\"\n";
  gp += fmt::format("set xlabel {}\nset ylabel {}\n", quoted(p.xlabel), quoted(p.ylabel));
  // Rows top to bottom, as a matrix is written; pixel centres on the integers.
  gp += fmt::format("set xrange [-0.5:{}]\nset yrange [{}:-0.5]\nset tics out nomirror\n", double(cols) - 0.5,
                    double(rows) - 0.5);
  // Masked (NaN) cells are not drawn: the grey behind each panel shows through.
  gp += "set object 1 rectangle from graph 0,0 to graph 1,1 behind fillcolor rgb \"#b0b0b0\" "
        "fillstyle solid noborder\n";
  gp += fmt::format("set multiplot title {}\n", quoted(p.title));
  gp += fmt::format("set tmargin at screen {:.4f}\nset bmargin at screen {:.4f}\n", 1 - double(kTop) / H,
                    double(kBottom) / H);
  gp += fmt::format("set label 1 {} at screen 0.01,{:.4f} left\n", quoted(p.caption), 12 / H);
  for (int64_t m = 0; m < count; ++m) {
    const double x0 = double(kLeft + m * (p.panel + kGap));
    gp += fmt::format("set lmargin at screen {:.4f}\nset rmargin at screen {:.4f}\n", x0 / W,
                      (x0 + double(p.panel)) / W);
    if (m == count - 1)  // one colour bar, right of the last panel, as tall as the panels
      gp += fmt::format("set colorbox user origin screen {:.4f},{:.4f} size screen {:.4f},{:.4f}\n",
                        (x0 + double(p.panel) + 12) / W, double(kBottom) / H, 16 / W, double(p.panel) / H);
    else
      gp += "unset colorbox\n";
    gp += fmt::format("set title {}\n", quoted(p.labels.empty() ? "" : p.labels[size_t(m)]));
    gp += fmt::format("plot $m{} matrix with image notitle\n", m);
    if (m == 0) gp += "unset label 1\nunset ylabel\n";
  }
  return gp + "unset multiplot\nunset output\n";
}

void heatmap_plot(const std::string& png_path, const HeatmapPlot& plot) {
  check_heatmap(png_path, plot);
  draw(png_path, "heatmap_plot", [&](const std::string& tmp) { return heatmap_script(tmp, plot); });
}

// ---------------------------------------------------------------- metrics.csv

std::vector<std::string> plot_metrics(const std::string& csv_path, const std::string& out_dir) {
  std::ifstream f(csv_path);
  LINEA_CHECK(f.good(), "[plot_metrics] cannot read '{}'", csv_path);
  data::make_output_dir("plot_metrics", "output folder", out_dir);  // before the work, not after it
  auto split = [](const std::string& line) {
    std::vector<std::string> cells;
    std::stringstream ss(line);
    for (std::string c; std::getline(ss, c, ',');) cells.push_back(c);
    return cells;
  };
  std::string line;
  LINEA_CHECK(std::getline(f, line), "[plot_metrics] '{}' is empty: no header", csv_path);
  const std::string header = line;
  const std::vector<std::string> names = split(header);
  std::vector<std::vector<double>> cols(names.size());
  for (int64_t row = 2; std::getline(f, line); ++row) {
    if (line.empty()) continue;
    const std::vector<std::string> cells = split(line);
    LINEA_CHECK(cells.size() == names.size(), "[plot_metrics] '{}' line {} has {} cells, the header {}", csv_path,
                row, cells.size(), names.size());
    for (size_t c = 0; c < cells.size(); ++c) {
      char* end = nullptr;
      const double v = std::strtod(cells[c].c_str(), &end);
      LINEA_CHECK(end != cells[c].c_str() && *end == '\0', "[plot_metrics] '{}' line {}, column {}: '{}' is not a number",
                  csv_path, row, names[c], cells[c]);
      cols[c].push_back(v);
    }
  }
  LINEA_CHECK(!cols[0].empty(), "[plot_metrics] '{}' has a header but no rows", csv_path);
  size_t xcol = size_t(std::find(names.begin(), names.end(), "step") - names.begin());
  if (xcol == names.size()) xcol = 0;
  const std::string run = fs::path(csv_path).parent_path().filename().string();
  std::vector<std::string> written;
  for (const auto& [key, file, label] : {std::tuple<std::string, std::string, std::string>{"loss", "loss.png", "loss"},
                                         {"acc", "accuracy.png", "accuracy"}}) {
    LinePlot p{.title = fmt::format("{}: {}", run, label), .xlabel = names[xcol], .ylabel = label, .series = {}};
    for (size_t c = 0; c < names.size(); ++c)
      if (names[c].find(key) != std::string::npos) p.series.push_back({names[c], cols[xcol], cols[c]});
    if (p.series.empty()) continue;
    const std::string out = (fs::path(out_dir) / file).string();
    line_plot(out, p);
    written.push_back(out);
  }
  LINEA_CHECK(!written.empty(), "[plot_metrics] '{}' has no loss or accuracy column (columns: {})", csv_path, header);
  return written;
}

std::string plot_metrics_command(const std::string& run_dir) {
  return fmt::format("{} {}", data::sibling_program("plot_metrics"), run_dir);
}

}  // namespace linea::plot
