// Heatmaps through libpng (examples/data/plot.h): the file is a valid PNG of the promised size,
// with the colours of the scale. Skips (exit 77) when linea was configured without libpng.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cstdio>

#include "data/plot.h"
#include "helpers.h"
#include "png_header.h"

#ifdef LINEA_HAVE_PNG
#include <png.h>
#endif

using namespace linea;
namespace plot = linea::plot;

#ifdef LINEA_HAVE_PNG
namespace {

// Decodes a PNG with libpng into RGB bytes; width and height from its header.
std::vector<uint8_t> read_rgb(const std::string& path, uint32_t& width, uint32_t& height) {
  png_image img{};
  img.version = PNG_IMAGE_VERSION;
  REQUIRE(png_image_begin_read_from_file(&img, path.c_str()) != 0);
  img.format = PNG_FORMAT_RGB;
  width = img.width, height = img.height;
  std::vector<uint8_t> rgb(PNG_IMAGE_SIZE(img));
  REQUIRE(png_image_finish_read(&img, nullptr, rgb.data(), 0, nullptr) != 0);
  return rgb;
}

}  // namespace

TEST_CASE("write_heatmap_png: three 5x7 maps, 3-pixel cells, 2-pixel gaps -> a valid 67x15 PNG") {
  testing::TempDir tmp("plot_png");
  const std::string path = tmp.file("maps.png");
  // Map 0 is all vmin, map 1 all vmax, map 2 a column ramp from vmin to vmax.
  std::vector<double> ramp(35);
  for (int r = 0; r < 5; ++r)
    for (int c = 0; c < 7; ++c) ramp[r * 7 + c] = c / 6.0;
  plot::write_heatmap_png(path, {zeros({5, 7}, float64), ones({5, 7}), from_vector(ramp, {5, 7})}, {0, 1},
                          {.pixel = 3, .gap = 2});
  const testing::PngHeader h = testing::read_png_header(path);
  CHECK(h.valid);
  CHECK(h.width == 67);
  CHECK(h.height == 15);
  uint32_t w = 0, hgt = 0;
  const std::vector<uint8_t> rgb = read_rgb(path, w, hgt);
  REQUIRE(w == 67);
  REQUIRE(hgt == 15);
  auto pixel = [&](uint32_t x, uint32_t y) {
    const uint8_t* p = &rgb[(y * w + x) * 3];
    return std::array<uint8_t, 3>{p[0], p[1], p[2]};
  };
  CHECK(pixel(0, 0) == plot::viridis(0));     // map 0: vmin is viridis' dark end
  CHECK(pixel(20, 14) == plot::viridis(0));   // its last pixel
  CHECK(pixel(21, 7) == std::array<uint8_t, 3>{255, 255, 255});  // the first gap
  CHECK(pixel(23, 0) == plot::viridis(1));    // map 1: vmax
  CHECK(pixel(46, 0) == plot::viridis(0));    // map 2, column 0
  CHECK(pixel(66, 14) == plot::viridis(1));   // map 2, column 6
  CHECK(pixel(46 + 9, 5) == plot::viridis(0.5));  // map 2, column 3 = 1/2
  CHECK(plot::viridis(0) == std::array<uint8_t, 3>{68, 1, 84});
  CHECK(plot::viridis(1) == std::array<uint8_t, 3>{253, 231, 37});
}

TEST_CASE("write_heatmap_png: a log scale puts 1e-2 halfway between 1e-4 and 1; values <= 0 get vmin's colour") {
  testing::TempDir tmp("plot_png");
  const std::string path = tmp.file("log.png");
  plot::write_heatmap_png(path, {from_vector(std::vector<double>{1e-2, 0, 1, -5}, {1, 4})}, {1e-4, 1, true});
  uint32_t w = 0, h = 0;
  const std::vector<uint8_t> rgb = read_rgb(path, w, h);
  REQUIRE((w == 4 && h == 1));
  CHECK(std::array<uint8_t, 3>{rgb[0], rgb[1], rgb[2]} == plot::viridis(0.5));
  CHECK(std::array<uint8_t, 3>{rgb[3], rgb[4], rgb[5]} == plot::viridis(0));
  CHECK(std::array<uint8_t, 3>{rgb[6], rgb[7], rgb[8]} == plot::viridis(1));
  CHECK(std::array<uint8_t, 3>{rgb[9], rgb[10], rgb[11]} == plot::viridis(0));
}

TEST_CASE("write_heatmap_png: bad input is a linea::Error naming the problem") {
  testing::TempDir tmp("plot_png");
  const std::string path = tmp.file("bad.png");
  CHECK_THROWS_WITH_AS(plot::write_heatmap_png(path, {}, {0, 1}), doctest::Contains("no maps"), Error);
  CHECK_THROWS_WITH_AS(plot::write_heatmap_png(path, {zeros({2, 2}), zeros({2, 3})}, {0, 1}),
                       doctest::Contains("(2, 3) float32 on cpu next to (2, 2)"), Error);
  CHECK_THROWS_WITH_AS(plot::write_heatmap_png(path, {zeros({2, 2, 2})}, {0, 1}), doctest::Contains("2-D"), Error);
  CHECK_THROWS_WITH_AS(plot::write_heatmap_png(path, {zeros({2, 2})}, {1, 1}), doctest::Contains("is empty"), Error);
  CHECK_THROWS_WITH_AS(plot::write_heatmap_png(path, {zeros({2, 2})}, {0, 1, true}), doctest::Contains("not positive"),
                       Error);
  CHECK_THROWS_WITH_AS(plot::write_heatmap_png(tmp.file("no/such/dir/x.png"), {zeros({2, 2})}, {0, 1}),
                       doctest::Contains("cannot write"), Error);
}
#endif

int main(int argc, char** argv) {
  if (!plot::png_available()) {
    std::printf("SKIPPED: linea was configured without libpng (apt-get install libpng-dev, re-run cmake)\n");
    return 77;
  }
  doctest::Context ctx(argc, argv);
  return ctx.run();
}
