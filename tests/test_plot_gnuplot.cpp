// Pictures through gnuplot (examples/data/plot.h): heatmaps carry a title, axis labels, a colour
// bar and panel labels; line_plot writes a PNG of the size asked for with every line distinct;
// plot_metrics turns a run's metrics.csv into loss and accuracy curves; bad input is a clear
// error. Skips (exit 77) when gnuplot is not installed.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>

#include "data/plot.h"
#include "helpers.h"
#include "png_header.h"

using namespace linea;
namespace plot = linea::plot;
namespace fs = std::filesystem;

TEST_CASE("line_plot: two series on a log-x axis -> a valid PNG of the requested size") {
  testing::TempDir tmp("plot_gnuplot");
  const std::string path = tmp.file("rank \"quoted\".png");  // a quote in the path must survive
  plot::line_plot(path, {.title = "rank vs N",
                         .xlabel = "N",
                         .ylabel = "rank",
                         .logx = true,
                         .series = {{"linear", {64, 128, 256}, {16, 16, 16}}, {"softmax", {64, 128, 256}, {64, 128, NAN}}},
                         .width = 640,
                         .height = 360});
  const testing::PngHeader h = testing::read_png_header(path);
  CHECK(h.valid);
  CHECK(h.width == 640);
  CHECK(h.height == 360);
  // Readable by others, as any file the user writes (the temp file it is drawn into is 0600).
  CHECK((fs::status(path).permissions() & fs::perms::others_read) != fs::perms::none);
}

TEST_CASE("plot_metrics: a vit_fmnist-style metrics.csv -> loss.png and accuracy.png") {
  testing::TempDir tmp("plot_gnuplot");
  testing::write_bytes(tmp.file("metrics.csv"),
                       "epoch,step,train_loss,train_acc,test_loss,test_acc,seconds\n"
                       "1,469,1.10,0.70,0.60,0.79,50.1\n2,938,0.80,0.82,0.50,0.84,100.3\n");
  const std::vector<std::string> files = plot::plot_metrics(tmp.file("metrics.csv"), tmp.dir.string());
  REQUIRE(files.size() == 2);
  CHECK(files[0] == tmp.file("loss.png"));
  CHECK(files[1] == tmp.file("accuracy.png"));
  for (const std::string& f : files) {
    const testing::PngHeader h = testing::read_png_header(f);
    CHECK(h.valid);
    CHECK(h.width == 800);
    CHECK(h.height == 500);
  }
  // char_lm's columns have losses but no accuracy: only loss.png.
  testing::write_bytes(tmp.file("lm.csv"), "step,lr,train_loss,val_loss,val_bpc,seconds\n500,1e-3,2.1,2.2,3.1,20\n");
  fs::remove(tmp.file("accuracy.png"));
  CHECK(plot::plot_metrics(tmp.file("lm.csv"), tmp.dir.string()) == std::vector<std::string>{tmp.file("loss.png")});
  CHECK(!fs::exists(tmp.file("accuracy.png")));
  // An output folder that does not exist yet is created.
  const std::string sub = tmp.file("plots/lm");
  CHECK(plot::plot_metrics(tmp.file("lm.csv"), sub) == std::vector<std::string>{sub + "/loss.png"});
  CHECK(testing::read_png_header(sub + "/loss.png").valid);
}

TEST_CASE("plot_metrics and line_plot: bad input is a linea::Error naming the file and the problem") {
  testing::TempDir tmp("plot_gnuplot");
  const std::string dir = tmp.dir.string();
  CHECK_THROWS_WITH_AS(plot::plot_metrics(tmp.file("missing.csv"), dir), doctest::Contains("cannot read"), Error);
  testing::write_bytes(tmp.file("empty.csv"), "");
  CHECK_THROWS_WITH_AS(plot::plot_metrics(tmp.file("empty.csv"), dir), doctest::Contains("no header"), Error);
  testing::write_bytes(tmp.file("ragged.csv"), "step,loss\n1,2,3\n");
  CHECK_THROWS_WITH_AS(plot::plot_metrics(tmp.file("ragged.csv"), dir), doctest::Contains("line 2 has 3 cells"), Error);
  testing::write_bytes(tmp.file("text.csv"), "step,loss\n1,abc\n");
  CHECK_THROWS_WITH_AS(plot::plot_metrics(tmp.file("text.csv"), dir), doctest::Contains("'abc' is not a number"),
                       Error);
  testing::write_bytes(tmp.file("other.csv"), "step,lr\n1,0.1\n");
  CHECK_THROWS_WITH_AS(plot::plot_metrics(tmp.file("other.csv"), dir), doctest::Contains("no loss or accuracy"),
                       Error);
  CHECK_THROWS_WITH_AS(plot::line_plot(tmp.file("x.png"), {.series = {{"a", {1, 2}, {1}}}}),
                       doctest::Contains("series 'a' has 2 x and 1 y"), Error);
  CHECK_THROWS_WITH_AS(plot::line_plot(tmp.file("no/such/dir/x.png"), {.series = {{"a", {1}, {1}}}}),
                       doctest::Contains("cannot write"), Error);
  // An output folder that cannot be made: a linea::Error naming it, before any drawing.
  testing::write_bytes(tmp.file("lm.csv"), "step,train_loss\n1,2\n");
  testing::write_bytes(tmp.file("a_file"), "");
  const std::string not_dir = "'" + tmp.file("a_file") + "' exists and is not a directory";
  CHECK_THROWS_WITH_AS(plot::plot_metrics(tmp.file("lm.csv"), tmp.file("a_file")), doctest::Contains(not_dir.c_str()),
                       Error);
  const std::string below_file = "output folder '" + tmp.file("a_file/sub") + "': cannot create";
  CHECK_THROWS_WITH_AS(plot::plot_metrics(tmp.file("lm.csv"), tmp.file("a_file/sub")),
                       doctest::Contains(below_file.c_str()), Error);
}

TEST_CASE("line_plot: a failed drawing leaves no PNG, neither empty nor partial, and no temp file") {
  testing::TempDir tmp("plot_gnuplot");
  // gnuplot opens its output, then refuses a log axis over x <= 0.
  const plot::LinePlot bad{.logx = true, .series = {{"a", {-1, -2}, {1, 2}}}};
  CHECK_THROWS_WITH_AS(plot::line_plot(tmp.file("bad.png"), bad), doctest::Contains("gnuplot failed"), Error);
  CHECK(fs::is_empty(tmp.dir));
  // A PNG already there survives a failed redraw whole.
  plot::line_plot(tmp.file("bad.png"), {.series = {{"a", {1, 2}, {1, 2}}}});
  const std::string before = testing::read_bytes(tmp.file("bad.png"));
  CHECK_THROWS_AS(plot::line_plot(tmp.file("bad.png"), bad), Error);
  CHECK(testing::read_bytes(tmp.file("bad.png")) == before);
  CHECK(std::distance(fs::directory_iterator(tmp.dir), fs::directory_iterator()) == 1);
}

TEST_CASE("heatmap_script: title, axis labels, colour bar with its label and log scale, a labelled panel per map") {
  std::vector<double> causal = {1, NAN, NAN, 0.5, 0.5, NAN, 0.2, 0, 0.8};  // NaN: masked
  const plot::HeatmapPlot p{.title = "softmax, layer 0",
                            .caption = "model: char_lm --attn softmax",
                            .cblabel = "weight (log)",
                            .vmin = 1e-3,
                            .log = true,
                            .maps = {from_vector(causal, {3, 3}), ones({3, 3}, float64)},
                            .labels = {"head 0", "mean of heads"}};
  const std::string gp = plot::heatmap_script("out.png", p);
  auto has = [&](const char* line) {
    INFO(line);
    CHECK(gp.find(line) != std::string::npos);
  };
  has("set multiplot title \"softmax, layer 0\"");
  has("set xlabel \"key index\"");
  has("set ylabel \"query index\"");
  has("set cblabel \"weight (log)\"");
  has("set cbrange [0.001:1]");
  has("set logscale cb");
  has("set palette defined");
  has("set colorbox user");  // one bar, beside the last panel
  has("set title \"head 0\"");
  has("set title \"mean of heads\"");
  has("\"model: char_lm --attn softmax\"");
  has("set yrange [2.5:-0.5]");  // query 0 at the top
  has("$m1 matrix with image");
  has("1 NaN NaN\n0.5 0.5 NaN\n0.2 0.001 0.8\n");  // masked stays NaN, 0 is raised to vmin
  const plot::PixelSize size = plot::heatmap_size(p);
  CHECK(size.width > 2 * p.panel);
  CHECK(size.height > p.panel);
}

TEST_CASE("heatmap_plot: a PNG of heatmap_size, atomically; bad input is a linea::Error naming the problem") {
  testing::TempDir tmp("plot_gnuplot");
  const plot::HeatmapPlot p{.title = "t", .maps = {eye(4, float64), ones({4, 4}) * 0.25}, .labels = {"a", "b"},
                            .panel = 100};
  plot::heatmap_plot(tmp.file("h.png"), p);
  const testing::PngHeader h = testing::read_png_header(tmp.file("h.png"));
  CHECK(h.valid);
  CHECK(int64_t(h.width) == plot::heatmap_size(p).width);
  CHECK(int64_t(h.height) == plot::heatmap_size(p).height);
  const std::string path = tmp.file("x.png");
  CHECK_THROWS_WITH_AS(plot::heatmap_plot(path, {}), doctest::Contains("no maps"), Error);
  CHECK_THROWS_WITH_AS(plot::heatmap_plot(path, {.maps = {zeros({2, 2}), zeros({2, 3})}}),
                       doctest::Contains("one shape"), Error);
  CHECK_THROWS_WITH_AS(plot::heatmap_plot(path, {.maps = {zeros({2, 2, 2})}}), doctest::Contains("2-D"), Error);
  CHECK_THROWS_WITH_AS(plot::heatmap_plot(path, {.vmin = 1, .vmax = 1, .maps = {zeros({2, 2})}}),
                       doctest::Contains("is empty"), Error);
  CHECK_THROWS_WITH_AS(plot::heatmap_plot(path, {.vmin = 0, .log = true, .maps = {zeros({2, 2})}}),
                       doctest::Contains("not positive"), Error);
  CHECK_THROWS_WITH_AS(plot::heatmap_plot(path, {.maps = {zeros({2, 2})}, .labels = {"a", "b"}}),
                       doctest::Contains("2 labels for 1 maps"), Error);
  CHECK_THROWS_WITH_AS(plot::heatmap_plot(tmp.file("no/such/dir/x.png"), {.maps = {zeros({2, 2})}}),
                       doctest::Contains("cannot write"), Error);
  CHECK(!fs::exists(path));
}

TEST_CASE("gnuplot_script: each series its own colour and marker, bounds dashed, the caption under the plot") {
  const std::vector<double> x = {64, 128};
  const std::string gp = plot::gnuplot_script(
      "out.png", {.title = "rank",
                  .caption = "entropy ratio: 1 = uniform, 0 = one-hot",
                  .series = {{"softmax", x, {64, 128}},
                             {"linear", x, {16, 16}},
                             {"linear bound", x, {16, 16}, 1, true}}});
  CHECK(gp.find("\"entropy ratio: 1 = uniform, 0 = one-hot\" at screen") != std::string::npos);
  const size_t a = gp.find("title \"softmax\""), b = gp.find("title \"linear\""), c = gp.find("title \"linear bound\"");
  REQUIRE(a != std::string::npos);
  REQUIRE(b != std::string::npos);
  REQUIRE(c != std::string::npos);
  auto style = [&](size_t at) { return gp.substr(gp.rfind("with", at), at - gp.rfind("with", at)); };
  CHECK(style(a) != style(b));  // colour and marker differ
  CHECK(style(b).find("pt ") != std::string::npos);
  CHECK(style(c).find("dt ") != std::string::npos);                  // the bound is dashed,
  CHECK(style(c).find("pt ") == std::string::npos);                  // without markers,
  CHECK(style(c).find("#d55e00") != std::string::npos);               // in its kind's colour
  CHECK(style(b).find("#d55e00") != std::string::npos);
}

TEST_CASE("thin_series: at most 3 points per bucket, keeping each bucket's extremes and its gaps") {
  plot::Series s{"loss", {}, {}};
  for (int i = 0; i < 400000; ++i) s.x.push_back(i), s.y.push_back(1.0 + 1e-3 * (i % 7));
  s.y[123457] = 50;   // a spike up,
  s.y[300001] = -3;   // one down,
  s.y[200000] = NAN;  // and a gap, each among ~500 points of one bucket
  const plot::Series t = plot::thin_series(s, 800);
  CHECK(t.name == "loss");
  REQUIRE(t.x.size() == t.y.size());
  CHECK(t.x.size() <= 3 * 800);
  CHECK(t.x.size() >= 2 * 800);  // each bucket's min and max
  CHECK(std::is_sorted(t.x.begin(), t.x.end()));
  CHECK(std::find(t.y.begin(), t.y.end(), 50.0) != t.y.end());
  CHECK(std::find(t.y.begin(), t.y.end(), -3.0) != t.y.end());
  CHECK(std::count_if(t.y.begin(), t.y.end(), [](double y) { return std::isnan(y); }) == 1);
  CHECK(*std::max_element(t.x.begin(), t.x.end()) <= 399999);
  // Short series are drawn whole.
  const plot::Series short_one{"a", {1, 2, 3}, {3, NAN, 1}};
  const plot::Series kept = plot::thin_series(short_one, 1);
  CHECK(kept.x == short_one.x);
  CHECK_THROWS_WITH_AS(plot::thin_series(short_one, 0), doctest::Contains("buckets must be positive"), Error);
}

TEST_CASE("plot_metrics: 400k rows -> a script of a bounded number of points, and the PNGs") {
  testing::TempDir tmp("plot_gnuplot");
  std::string csv = "step,lr,train_loss,val_loss\n";
  // Noisy, as a real run's losses: drawing every point of such a zigzag takes gnuplot minutes.
  for (int64_t i = 1; i <= 400000; ++i)
    csv += fmt::format("{},0.001,{},{}\n", i, 2.0 + double(i * 7919 % 1000) * 1e-3, 2.1 + double(i % 997) * 1e-3);
  testing::write_bytes(tmp.file("metrics.csv"), csv);
  // What gnuplot gets for two 400k-point series: at most 3 points per pixel column each.
  std::vector<double> x(400000), y(400000, 1.0);
  for (size_t i = 0; i < x.size(); ++i) x[i] = double(i);
  const std::string script =
      plot::gnuplot_script("out.png", {.series = {{"train_loss", x, y}, {"val_loss", x, y}}, .width = 800});
  CHECK(std::count(script.begin(), script.end(), '\n') <= 2 * 3 * 800 + 30);
  CHECK(script.find("with lines lw 2 lc rgb \"#0072b2\" title \"train_loss\"") != std::string::npos);
  const std::vector<std::string> files = plot::plot_metrics(tmp.file("metrics.csv"), tmp.dir.string());
  CHECK(files == std::vector<std::string>{tmp.file("loss.png")});
  CHECK(testing::read_png_header(tmp.file("loss.png")).valid);
}

int main(int argc, char** argv) {
  if (!plot::gnuplot_available()) {
    std::printf("SKIPPED: gnuplot is not installed (apt-get install gnuplot-nox): the line-plot tests did not run\n");
    return 77;
  }
  doctest::Context ctx(argc, argv);
  return ctx.run();
}
