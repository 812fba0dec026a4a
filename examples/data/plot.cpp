// Heatmaps through libpng, line plots through gnuplot (data/plot.h).
#include "data/plot.h"
#include "data/output_paths.h"
#include "data/run_files.h"

#include <algorithm>
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

#ifdef LINEA_HAVE_PNG
#include <png.h>
#endif

namespace linea::plot {

namespace fs = std::filesystem;

bool png_available() {
#ifdef LINEA_HAVE_PNG
  return true;
#else
  return false;
#endif
}

bool gnuplot_available() { return std::system("command -v gnuplot > /dev/null 2>&1") == 0; }

// ---------------------------------------------------------------- heatmaps

std::array<uint8_t, 3> viridis(double t) {
  // matplotlib's viridis sampled at 9 evenly spaced points; linear interpolation in between.
  static constexpr uint8_t k[9][3] = {{68, 1, 84},    {71, 44, 122},  {59, 81, 139},   {44, 113, 142}, {33, 144, 141},
                                      {39, 173, 129}, {92, 200, 99},  {170, 220, 50},  {253, 231, 37}};
  t = std::isnan(t) ? 0 : std::clamp(t, 0.0, 1.0) * 8;
  const int i = std::min(int(t), 7);
  const double f = t - i;
  std::array<uint8_t, 3> c{};
  for (int ch = 0; ch < 3; ++ch) c[ch] = uint8_t(std::lround(k[i][ch] + f * (k[i + 1][ch] - k[i][ch])));
  return c;
}

void write_heatmap_png(const std::string& path, const std::vector<Tensor>& maps, ColorScale scale,
                       HeatmapLayout layout) {
  LINEA_CHECK(!maps.empty(), "[write_heatmap_png] no maps to write to '{}'", path);
  LINEA_CHECK(layout.pixel >= 1 && layout.gap >= 0, "[write_heatmap_png] pixel {} must be >= 1 and gap {} >= 0",
              layout.pixel, layout.gap);
  const bool ok_scale = scale.log ? (scale.vmin > 0 && scale.vmax > scale.vmin) : scale.vmax > scale.vmin;
  LINEA_CHECK(ok_scale, "[write_heatmap_png] colour scale [{}, {}]{} is empty{}", scale.vmin, scale.vmax,
              scale.log ? " (log)" : "", scale.log ? " or not positive" : "");
  const Shape shape = maps[0].shape();
  for (const Tensor& m : maps)
    LINEA_CHECK(m.dim() == 2 && m.shape() == shape && is_floating(m.dtype()) && m.device().is_cpu(),
                "[write_heatmap_png] maps must be 2-D float CPU tensors of one shape; got {} {} on {} next to {}",
                shape_str(m.shape()), m.dtype(), m.device(), shape_str(shape));
  const int64_t rows = shape[0], cols = shape[1], count = int64_t(maps.size());
  const int64_t height = rows * layout.pixel, width = count * cols * layout.pixel + (count - 1) * layout.gap;
  LINEA_CHECK(height > 0 && width > 0 && height <= 16384 && width <= 65536,
              "[write_heatmap_png] a {}x{} pixel image for '{}' is empty or too large", width, height, path);
#ifdef LINEA_HAVE_PNG
  const double lo = scale.log ? std::log10(scale.vmin) : scale.vmin;
  const double hi = scale.log ? std::log10(scale.vmax) : scale.vmax;
  std::vector<uint8_t> rgb(size_t(width * height * 3), 255);  // white gaps
  for (int64_t m = 0; m < count; ++m) {
    const std::vector<double> v = maps[m].to_vector();
    const int64_t x0 = m * (cols * layout.pixel + layout.gap);
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < cols; ++c) {
        double x = v[r * cols + c];
        if (scale.log) x = x > 0 ? std::log10(x) : lo;
        const std::array<uint8_t, 3> col = viridis((x - lo) / (hi - lo));
        for (int64_t py = 0; py < layout.pixel; ++py)
          for (int64_t px = 0; px < layout.pixel; ++px) {
            uint8_t* p = &rgb[size_t(((r * layout.pixel + py) * width + x0 + c * layout.pixel + px) * 3)];
            std::copy(col.begin(), col.end(), p);
          }
      }
  }
  // libpng's simplified API: one call writes the whole image, and reports failure in `message`.
  png_image img{};
  img.version = PNG_IMAGE_VERSION;
  img.width = png_uint_32(width);
  img.height = png_uint_32(height);
  img.format = PNG_FORMAT_RGB;
  const bool written = png_image_write_to_file(&img, path.c_str(), 0, rgb.data(), 0, nullptr) != 0;
  const std::string why = img.message;
  png_image_free(&img);
  LINEA_CHECK(written, "[write_heatmap_png] cannot write '{}': {}", path, why);
#else
  throw Error(fmt::format("[write_heatmap_png] cannot write '{}': linea was configured without libpng "
                          "(install libpng-dev, e.g. scripts/setup.sh, and re-run cmake)",
                          path));
#endif
}

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
    plots += fmt::format("{}$d{} using 1:2 with {} lw 2{} title {}", i ? ", " : "", i,
                         thinned ? "lines" : "linespoints", thinned ? "" : " pt 7 ps 0.8", quoted(s.name));
  }
  // noenhanced: names such as train_loss print as written, not with "_l" as a subscript.
  gp += fmt::format("set terminal pngcairo size {},{} noenhanced font \"sans,11\"\nset output {}\n", plot.width,
                    plot.height, quoted(output));
  gp += fmt::format("set title {}\nset xlabel {}\nset ylabel {}\n", quoted(plot.title), quoted(plot.xlabel),
                    quoted(plot.ylabel));
  gp += "set grid\nset key outside right top\n";
  if (plot.logx) gp += "set logscale x 2\n";
  if (plot.logy) gp += "set logscale y 2\n";
  return gp + "plot " + plots + "\nunset output\n";
}

void line_plot(const std::string& png_path, const LinePlot& plot) {
  check_plot(png_path, plot);
  LINEA_CHECK(gnuplot_available(), "[line_plot] cannot draw '{}': gnuplot is not installed "
              "(apt-get install gnuplot-nox, or scripts/setup.sh)", png_path);
  std::string tmp = fmt::format("{}.tmp.{}.XXXXXX", png_path, ::getpid());  // write_file_atomically's temp name
  const int fd = ::mkstemp(tmp.data());
  LINEA_CHECK(fd >= 0, "[line_plot] cannot write '{}': {}", png_path, std::strerror(errno));
  ::fchmod(fd, 0644);  // mkstemp's 0600 would carry over to the PNG
  ::close(fd);
  const std::string script_text = gnuplot_script(tmp, plot);
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
    throw Error(fmt::format("[line_plot] cannot draw '{}': {}", png_path, why));
  }
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
