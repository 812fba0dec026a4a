// Line plots through gnuplot (examples/data/plot.h): line_plot writes a PNG of the size asked for,
// plot_metrics turns a run's metrics.csv into loss and accuracy curves, and bad input is a clear
// error. Skips (exit 77) when gnuplot is not installed.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

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
                       doctest::Contains("gnuplot failed"), Error);
}

int main(int argc, char** argv) {
  if (!plot::gnuplot_available()) {
    std::printf("SKIPPED: gnuplot is not installed (apt-get install gnuplot-nox): the line-plot tests did not run\n");
    return 77;
  }
  doctest::Context ctx(argc, argv);
  return ctx.run();
}
