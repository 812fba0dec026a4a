// Convolution, pooling, batch norm and channel dropout (nn/functional/conv.h, nn/conv.h):
// values against naive loops in float64, the transposed convolution as conv2d's adjoint, the
// modules' parameters, buffers and modes, and the errors. Gradients: the op registry's gradchecks
// (check/ops_nn.cpp).
#include <cmath>
#include <limits>

#include "helpers.h"

using namespace linea;
using linea::testing::allclose;
using linea::testing::randn64;
namespace F = linea::nn::functional;

namespace {

struct Geo {
  F::Size2 stride, padding, dilation;
  int64_t groups;
};

// conv2d by its definition: out[n, o, oh, ow] = b[o] + Σ_{c in o's group, i, j} x[n, c, ih, iw] w[o, c', i, j].
Tensor naive_conv2d(const Tensor& x, const Tensor& w, const Tensor& b, const Geo& g) {
  const int64_t N = x.size(0), C = x.size(1), H = x.size(2), W = x.size(3);
  const int64_t O = w.size(0), Cg = w.size(1), KH = w.size(2), KW = w.size(3), Og = O / g.groups;
  const int64_t Ho = (H + 2 * g.padding.h - g.dilation.h * (KH - 1) - 1) / g.stride.h + 1;
  const int64_t Wo = (W + 2 * g.padding.w - g.dilation.w * (KW - 1) - 1) / g.stride.w + 1;
  const auto xv = x.to_vector(), wv = w.to_vector(), bv = b.to_vector();
  std::vector<double> out(size_t(N * O * Ho * Wo));
  for (int64_t n = 0; n < N; ++n)
    for (int64_t o = 0; o < O; ++o)
      for (int64_t oh = 0; oh < Ho; ++oh)
        for (int64_t ow = 0; ow < Wo; ++ow) {
          double s = bv[size_t(o)];
          for (int64_t c = 0; c < Cg; ++c)
            for (int64_t i = 0; i < KH; ++i)
              for (int64_t j = 0; j < KW; ++j) {
                const int64_t ih = oh * g.stride.h - g.padding.h + i * g.dilation.h;
                const int64_t iw = ow * g.stride.w - g.padding.w + j * g.dilation.w;
                if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
                const int64_t ci = o / Og * Cg + c;
                s += xv[size_t(((n * C + ci) * H + ih) * W + iw)] * wv[size_t(((o * Cg + c) * KH + i) * KW + j)];
              }
          out[size_t(((n * O + o) * Ho + oh) * Wo + ow)] = s;
        }
  return from_vector(out, {N, O, Ho, Wo});
}

// Pooling by its definition; padded places are -inf (max) or 0 counted in the mean (avg).
Tensor naive_pool(const Tensor& x, int64_t k, int64_t s, int64_t p, bool take_max) {
  const int64_t N = x.size(0), C = x.size(1), H = x.size(2), W = x.size(3);
  const int64_t Ho = (H + 2 * p - k) / s + 1, Wo = (W + 2 * p - k) / s + 1;
  const auto xv = x.to_vector();
  std::vector<double> out;
  for (int64_t nc = 0; nc < N * C; ++nc)
    for (int64_t oh = 0; oh < Ho; ++oh)
      for (int64_t ow = 0; ow < Wo; ++ow) {
        double best = -std::numeric_limits<double>::infinity(), sum = 0;
        for (int64_t i = 0; i < k; ++i)
          for (int64_t j = 0; j < k; ++j) {
            const int64_t ih = oh * s - p + i, iw = ow * s - p + j;
            if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
            best = std::max(best, xv[size_t((nc * H + ih) * W + iw)]);
            sum += xv[size_t((nc * H + ih) * W + iw)];
          }
        out.push_back(take_max ? best : sum / double(k * k));
      }
  return from_vector(out, {N, C, Ho, Wo});
}

double dot(const Tensor& a, const Tensor& b) { return sum(a * b).item(); }

const Geo kGeos[] = {{1, 0, 1, 1},        {2, 1, 1, 1},          {{2, 3}, {1, 0}, 1, 1},
                     {1, 2, 2, 1},        {{1, 2}, 1, {2, 1}, 2}, {2, 1, 1, 4},
                     {3, {0, 2}, {2, 3}, 2}};

}  // namespace

TEST_CASE("conv2d matches the 7-loop definition for every geometry") {
  uint64_t seed = 1;
  for (size_t geo = 0; geo < std::size(kGeos); ++geo) {
    const Geo& g = kGeos[geo];
    CAPTURE(geo);
    const Tensor x = randn64({2, 4, 9, 8}, seed++, false), w = randn64({8, 4 / g.groups, 3, 2}, seed++, false);
    const Tensor b = randn64({8}, seed++, false);
    CHECK(allclose(F::conv2d(x, w, b, g.stride, g.padding, g.dilation, g.groups), naive_conv2d(x, w, b, g), 1e-12));
  }
  // float32, a 5x5 LeNet kernel: the same values to float32 rounding
  const Tensor x = randn64({2, 3, 12, 12}, 50, false), w = randn64({6, 3, 5, 5}, 51, false);
  const Tensor b = randn64({6}, 52, false);
  CHECK(allclose(F::conv2d(x.to(float32), w.to(float32), b.to(float32), 1, 2).to(float64),
                 naive_conv2d(x, w, b, {1, 2, 1, 1}), 1e-4, 1e-4));
}

TEST_CASE("conv_transpose2d is conv2d's adjoint: <conv(x), y> = <x, conv_transpose(y)>") {
  uint64_t seed = 100;
  for (size_t geo = 0; geo < std::size(kGeos); ++geo) {
    const Geo& g = kGeos[geo];
    CAPTURE(geo);
    const Tensor x = randn64({2, 4, 9, 8}, seed++, false), w = randn64({8, 4 / g.groups, 3, 2}, seed++, false);
    const Tensor cx = F::conv2d(x, w, Tensor(), g.stride, g.padding, g.dilation, g.groups);
    const Tensor y = randn64(cx.shape(), seed++, false);
    // output_padding: the rows conv2d's rounding down dropped, so that the shapes come back
    const F::Size2 op{9 - ((cx.size(2) - 1) * g.stride.h - 2 * g.padding.h + g.dilation.h * 2 + 1),
                      8 - ((cx.size(3) - 1) * g.stride.w - 2 * g.padding.w + g.dilation.w * 1 + 1)};
    const Tensor ty = F::conv_transpose2d(y, w, Tensor(), g.stride, g.padding, op, g.groups, g.dilation);
    REQUIRE(ty.shape() == x.shape());
    CHECK(dot(cx, y) == doctest::Approx(dot(x, ty)).epsilon(1e-12));
  }
  // the bias is added to every output element
  const Tensor y = randn64({1, 2, 3, 3}, 7, false), w = randn64({2, 3, 2, 2}, 8, false), b = randn64({3}, 9, false);
  CHECK(allclose(F::conv_transpose2d(y, w, b, 2) - F::conv_transpose2d(y, w, Tensor(), 2),
                 b.view({1, 3, 1, 1}).expand({1, 3, 6, 6}), 1e-12));
}

TEST_CASE("max_pool2d and avg_pool2d match naive loops, padded and overlapping") {
  const Tensor x = randn64({2, 3, 7, 6}, 11, false);
  for (const auto& [k, s, p] : {std::tuple{2, 2, 0}, std::tuple{3, 2, 1}, std::tuple{3, 1, 1}, std::tuple{2, 1, 1}}) {
    INFO("kernel ", k, " stride ", s, " padding ", p);
    CHECK(allclose(F::max_pool2d(x, k, s, p), naive_pool(x, k, s, p, true), 1e-12));
    CHECK(allclose(F::avg_pool2d(x, k, s, p), naive_pool(x, k, s, p, false), 1e-12));
  }
  CHECK(F::max_pool2d(x, 2).shape() == Shape{2, 3, 3, 3});  // stride defaults to the kernel
}

TEST_CASE("Conv2d and ConvTranspose2d: options, parameter shapes, PyTorch's default init") {
  manual_seed(3);
  nn::Conv2d conv(nn::Conv2dOptions(4, 6, {3, 5}).stride(2).padding(1).groups(2));
  CHECK(conv.weight.shape() == Shape{6, 2, 3, 5});
  CHECK(conv.bias.shape() == Shape{6});
  const double bound = 1 / std::sqrt(2.0 * 3 * 5);
  CHECK(max(abs(conv.weight)).item() <= bound);
  CHECK(max(abs(conv.weight)).item() > 0.8 * bound);  // U(-bound, bound), not something narrower
  CHECK(max(abs(conv.bias)).item() <= bound);
  CHECK(conv.options().stride() == F::Size2{2, 2});
  CHECK(conv.forward(randn({1, 4, 9, 9})).shape() == Shape{1, 6, 5, 4});
  CHECK(nn::Conv2d(nn::Conv2dOptions(1, 2, 3).bias(false)).named_parameters().size() == 1);

  nn::ConvTranspose2d up(nn::ConvTranspose2dOptions(6, 4, 4).stride(2).padding(1));
  CHECK(up.weight.shape() == Shape{6, 4, 4, 4});
  CHECK(max(abs(up.weight)).item() <= 1 / std::sqrt(4.0 * 16));
  CHECK(up.forward(randn({1, 6, 7, 7})).shape() == Shape{1, 4, 14, 14});
  CHECK_THROWS_WITH_AS(nn::Conv2d(nn::Conv2dOptions(3, 4, 3).groups(2)), doctest::Contains("[Conv2d]"), Error);
}

TEST_CASE("the modules' gradients reach the input and every parameter (float64 gradcheck)") {
  manual_seed(5);
  auto check = [](nn::Module& m, const Tensor& x) {
    nn::to(m, float64);
    std::vector<Tensor> inputs{x};
    for (const Tensor& p : m.parameters()) inputs.push_back(p);
    CHECK_GRADCHECK([&m](const std::vector<Tensor>& in) { return m.forward(in[0]); }, inputs);
  };
  nn::Conv2d conv(nn::Conv2dOptions(4, 6, 3).stride(2).padding(1).groups(2));
  check(conv, randn64({2, 4, 5, 5}, 1));
  nn::ConvTranspose2d up(nn::ConvTranspose2dOptions(4, 2, 3).stride(2).padding(1).output_padding(1));
  check(up, randn64({1, 4, 3, 3}, 2));
  nn::BatchNorm2d bn(3);
  check(bn, randn64({2, 3, 2, 3}, 3));
}

TEST_CASE("BatchNorm2d: batch statistics and running updates in training, running statistics in eval") {
  nn::BatchNorm2d bn(nn::BatchNorm2dOptions(3).momentum(0.2));
  nn::to(bn, float64);
  const Tensor x = randn64({4, 3, 5, 2}, 21, false) * 3.0 + 1.0;
  const Tensor y = bn.forward(x);
  // each channel of the output: mean 0, population variance 1 (eps aside)
  CHECK(allclose(mean(y, {0, 2, 3}), zeros({3}, float64), 1e-12));
  CHECK(allclose(var(y, {0, 2, 3}, false, 0), ones({3}, float64), 1e-5));
  const Tensor m = mean(x, {0, 2, 3}), v = var(x, {0, 2, 3});  // v unbiased, as PyTorch's running_var
  CHECK(allclose(bn.running_mean, m * 0.2, 1e-12));
  CHECK(allclose(bn.running_var, v * 0.2 + 0.8, 1e-12));
  CHECK(bn.num_batches_tracked.item() == 1);
  const nn::StateDict sd = bn.state_dict();
  for (const char* k : {"weight", "bias", "running_mean", "running_var", "num_batches_tracked"}) CHECK(sd.count(k) == 1);

  bn.eval();
  const Tensor z = bn.forward(x);
  CHECK(allclose(z, (x - bn.running_mean.view({1, 3, 1, 1})) / sqrt(bn.running_var.view({1, 3, 1, 1}) + 1e-5),
                 1e-12));
  CHECK(bn.num_batches_tracked.item() == 1);  // eval counts nothing and moves nothing
  CHECK(allclose(bn.running_mean, m * 0.2, 1e-12));

  // a fresh module loads the running statistics from the state dict
  nn::BatchNorm2d other(3);
  nn::to(other, float64);
  other.load_state_dict(sd);
  CHECK(allclose(other.running_var, v * 0.2 + 0.8, 1e-12));
  CHECK(other.num_batches_tracked.item() == 1);
  CHECK_THROWS_WITH_AS(bn.forward(randn64({2, 4, 3, 3}, 1, false)), doctest::Contains("[BatchNorm2d]"), Error);
  bn.train();
  CHECK_THROWS_WITH_AS(F::batch_norm(randn64({1, 3, 1, 1}, 1, false), Tensor(), Tensor(), Tensor(), Tensor(), true),
                       doctest::Contains("more than one value per channel"), Error);
}

TEST_CASE("Dropout2d zeroes whole channels and scales the rest; eval is the identity") {
  nn::Dropout2d drop(0.5, 1234);
  const Tensor x = ones({8, 16, 3, 4}, float64);
  const Tensor y = drop.forward(x);
  const auto v = y.to_vector();
  int64_t dropped = 0;
  for (int64_t c = 0; c < 8 * 16; ++c) {
    const double first = v[size_t(c * 12)];
    CHECK((first == 0 || first == 2));
    for (int64_t e = 1; e < 12; ++e) CHECK(v[size_t(c * 12 + e)] == first);  // one draw per channel
    dropped += first == 0;
  }
  CHECK(dropped > 30);
  CHECK(dropped < 98);
  CHECK(drop.offset() == 8 * 16);  // the stream advances by one number per channel
  CHECK(drop.type_name() == "Dropout2d");
  nn::Dropout2d same(0.5, 1234);
  CHECK(allclose(same.forward(x), y, 0));
  drop.eval();
  CHECK(drop.forward(x).same(x));
  CHECK_THROWS_WITH_AS(drop.forward(ones({4, 4})), doctest::Contains("[Dropout2d]"), Error);
}

TEST_CASE("convolution errors name the op and the shapes") {
  const Tensor x = randn64({2, 4, 6, 6}, 1, false), w = randn64({8, 4, 3, 3}, 2, false);
  auto throws = [](auto f, const char* text) { CHECK_THROWS_WITH_AS(f(), doctest::Contains(text), Error); };
  throws([&] { return F::conv2d(x.view({8, 6, 6}), w); }, "[conv2d] expected input [N, C, H, W] float32 or float64, got (8, 6, 6)");
  throws([&] { return F::conv2d(x, randn64({8, 3, 3, 3}, 3, false)); }, "[conv2d] input (2, 4, 6, 6) has 4 channels but weight (8, 3, 3, 3)");
  throws([&] { return F::conv2d(x, randn64({8, 2, 3, 3}, 3, false), Tensor(), 1, 0, 1, 3); }, "[conv2d] groups 3 must be positive and divide");
  throws([&] { return F::conv2d(x, randn64({8, 4, 7, 3}, 3, false)); }, "the output size would be <= 0");
  throws([&] { return F::conv2d(x, w, Tensor(), 0); }, "[conv2d] kernel (3, 3), stride (0, 0)");
  throws([&] { return F::conv2d(x, w, randn64({4}, 3, false)); }, "[conv2d] bias must be (8,)");
  throws([&] { return F::conv2d(x, w.to(float32)); }, "[conv2d] weight must be float64 on cpu to match input (2, 4, 6, 6), got (8, 4, 3, 3) float32");
  throws([&] { return F::conv_transpose2d(x, randn64({3, 2, 3, 3}, 3, false)); }, "[conv_transpose2d] input (2, 4, 6, 6) has 4 channels");
  throws([&] { return F::conv_transpose2d(x, randn64({4, 2, 3, 3}, 3, false), Tensor(), 2, 0, 2); }, "[conv_transpose2d] output_padding (2, 2)");
  throws([&] { return F::max_pool2d(x, 2, 2, 2); }, "[max_pool2d] padding (2, 2) must be at most half the kernel (2, 2)");
  throws([&] { return F::avg_pool2d(x, 7); }, "[avg_pool2d] the window");
  throws([&] { return F::batch_norm(x, zeros({3}, float64), ones({3}, float64)); }, "[batch_norm] running_mean must be (4,)");
}
