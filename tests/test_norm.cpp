// layer_norm / rms_norm: the fused kernels against the same maths composed from primitive ops
// (forward and backward), stability on large and constant rows, threading, errors.
// Their float64 gradchecks are registry cases (check/ops_nn.cpp), run by ctest check_gradcheck.
#include <cmath>

#include "helpers.h"

using namespace linea;
using linea::testing::allclose;
using linea::testing::randn64;

namespace {

// The references: the textbook formulas from elementwise ops and reductions (autograd backward).
Tensor layer_norm_ref(const Tensor& x, const Tensor& w, const Tensor& b, double eps) {
  Tensor mu = mean(x, {-1}, true);
  Tensor xc = x - mu;
  Tensor y = xc * rsqrt(mean(xc * xc, {-1}, true) + eps);
  if (w.defined()) y = y * w;
  if (b.defined()) y = y + b;
  return y;
}

Tensor rms_norm_ref(const Tensor& x, const Tensor& w, double eps) {
  Tensor y = x * rsqrt(mean(x * x, {-1}, true) + eps);
  return w.defined() ? y * w : y;
}

// Forward values and the gradients of sum(u * y) for every input, fused vs reference.
void check_against_reference(const std::function<Tensor(const std::vector<Tensor>&)>& fused,
                             const std::function<Tensor(const std::vector<Tensor>&)>& ref,
                             const std::vector<Tensor>& inputs, double tol) {
  Tensor y1 = fused(inputs);
  Tensor u = randn64(y1.shape(), 99, false);
  sum(y1 * u).backward();
  std::vector<Tensor> g1;
  for (Tensor t : inputs) {
    g1.push_back(t.grad());
    t.zero_grad();
  }
  Tensor y2 = ref(inputs);
  sum(y2 * u).backward();
  CHECK(allclose(y1, y2, tol, tol));
  for (size_t i = 0; i < inputs.size(); ++i) {
    INFO("input " << i);
    CHECK(allclose(g1[i], inputs[i].grad(), tol, tol));
    Tensor(inputs[i]).zero_grad();
  }
}

}  // namespace

TEST_CASE("layer_norm equals the composed formula, forward and backward (float64, 1e-12)") {
  Tensor x = randn64({3, 5, 16}, 1), w = randn64({16}, 2), b = randn64({16}, 3);
  check_against_reference([](const auto& in) { return layer_norm(in[0], in[1], in[2], 1e-5); },
                          [](const auto& in) { return layer_norm_ref(in[0], in[1], in[2], 1e-5); }, {x, w, b}, 1e-12);
  // without the affine part, and with only one of weight / bias
  check_against_reference([](const auto& in) { return layer_norm(in[0]); },
                          [](const auto& in) { return layer_norm_ref(in[0], Tensor(), Tensor(), 1e-5); }, {x}, 1e-12);
  check_against_reference([](const auto& in) { return layer_norm(in[0], Tensor(), in[1]); },
                          [](const auto& in) { return layer_norm_ref(in[0], Tensor(), in[1], 1e-5); }, {x, b}, 1e-12);
}

TEST_CASE("rms_norm equals the composed formula, forward and backward (float64, 1e-12)") {
  Tensor x = randn64({4, 7, 12}, 4), w = randn64({12}, 5);
  check_against_reference([](const auto& in) { return rms_norm(in[0], in[1], 1e-6); },
                          [](const auto& in) { return rms_norm_ref(in[0], in[1], 1e-6); }, {x, w}, 1e-12);
  check_against_reference([](const auto& in) { return rms_norm(in[0]); },
                          [](const auto& in) { return rms_norm_ref(in[0], Tensor(), 1e-6); }, {x}, 1e-12);
}

TEST_CASE("many rows: the threaded kernels (per-thread dweight partials) match the reference") {
  // 4096 x 64 = 262144 elements: above the parallel grain, so rows are split over threads.
  Tensor x = randn64({64, 64, 64}, 10), w = randn64({64}, 11), b = randn64({64}, 12);
  check_against_reference([](const auto& in) { return layer_norm(in[0], in[1], in[2], 1e-5); },
                          [](const auto& in) { return layer_norm_ref(in[0], in[1], in[2], 1e-5); }, {x, w, b}, 1e-10);
  check_against_reference([](const auto& in) { return rms_norm(in[0], in[1], 1e-6); },
                          [](const auto& in) { return rms_norm_ref(in[0], in[1], 1e-6); }, {x, w}, 1e-10);
}

// x as the [B, H, N, e] heads of a [B, N, H·e] tensor (the causal MHLA's out_norm): the kernels run on
// the rows where they lie, so the output keeps x's layout (merging the heads after is a view) and
// holds the bits of the same rows normalised from a contiguous copy; the gradients match too.
TEST_CASE("layer_norm / rms_norm of a heads view: x's layout kept, the contiguous copy's values") {
  Tensor base = randn64({3, 5, 4, 8}, 21), w = randn64({8}, 22), b = randn64({8}, 23);
  for (bool rms : {false, true}) {
    INFO((rms ? "rms_norm" : "layer_norm"));
    auto norm = [&](const Tensor& x) { return rms ? rms_norm(x, w) : layer_norm(x, w, b); };
    Tensor x = base.transpose(1, 2);  // [3, 4, 5, 8], rows 32 floats apart in N
    Tensor y = norm(x);
    CHECK(y.strides() == x.strides());
    CHECK(y.transpose(1, 2).is_contiguous());
    Tensor xc = base.detach().transpose(1, 2).contiguous().requires_grad_();
    Tensor yc = norm(xc);
    CHECK(y.to_vector() == yc.to_vector());
    Tensor u = randn64({3, 4, 5, 8}, 24, false);
    sum(y * u).backward();
    Tensor gx = base.grad().clone(), gw = w.grad().clone();
    base.zero_grad();
    w.zero_grad();
    if (!rms) b.zero_grad();
    sum(yc * u).backward();
    CHECK(gx.transpose(1, 2).to_vector() == xc.grad().to_vector());
    CHECK(allclose(gw, w.grad(), 1e-12, 1e-12));
    w.zero_grad();
    if (!rms) b.zero_grad();
  }
}

TEST_CASE("float32: close to the float64 result, and bitwise reproducible") {
  Tensor x64 = randn64({256, 128}, 13, false) * 3.0 + 1.0, w64 = randn64({128}, 14, false);
  Tensor x = x64.to(float32).requires_grad_(), w = w64.to(float32).requires_grad_();
  Tensor y = layer_norm(x, w, Tensor());
  CHECK(allclose(y.to(float64), layer_norm_ref(x64, w64, Tensor(), 1e-5), 1e-5, 1e-5));
  Tensor u = randn64({256, 128}, 15, false).to(float32);
  sum(y * u).backward();
  Tensor gx = x.grad().clone(), gw = w.grad().clone();
  x.zero_grad();
  w.zero_grad();
  sum(layer_norm(x, w, Tensor()) * u).backward();
  CHECK(x.grad().to_vector() == gx.to_vector());
  CHECK(w.grad().to_vector() == gw.to_vector());
}

TEST_CASE("stability: values ~1e4, constant rows") {
  // Rows of 1e4 + small noise: one-pass E[x^2] - E[x]^2 would lose every digit of the variance.
  Tensor noise = randn64({8, 32}, 16, false);
  Tensor x = (noise + 1e4).to(float32);
  Tensor y = layer_norm(x);
  Tensor expect = layer_norm_ref(x.to(float64), Tensor(), Tensor(), 1e-5);
  CHECK(allclose(y.to(float64), expect, 1e-4, 1e-4));
  // A constant row normalises to exactly 0 (then the bias), and its gradient is finite.
  Tensor c = full({3, 10}, 1e4, float32).requires_grad_();
  Tensor b = from_vector<float>({1, 2, 3, 4, 5, 6, 7, 8, 9, 10}).requires_grad_();
  Tensor yc = layer_norm(c, Tensor(), b);
  CHECK(yc.select(0, 1).to_vector() == b.to_vector());
  sum(yc * yc).backward();
  for (double v : c.grad().to_vector()) CHECK(std::isfinite(v));
  Tensor r = rms_norm(full({2, 8}, 3e4, float32));
  for (double v : r.to_vector()) CHECK(v == doctest::Approx(1.0).epsilon(1e-6));
  Tensor z = rms_norm(zeros({2, 8}));
  for (double v : z.to_vector()) CHECK(v == 0.0);
}

// The kernels may write dx over dy (autograd hands in a gradient nobody else holds): the same bits
// as into a separate dx, parameter gradients included, on row counts with a tail past the kernel's
// four-row groups and with the threaded partial sums.
TEST_CASE("layernorm / rmsnorm backward: dx written over dy gives the same bits") {
  Backend& cpu = backend(Device::cpu());
  for (DType dt : {DType::Float32, DType::Float64})
    for (const Shape& s : {Shape{37, 50}, Shape{768, 128}, Shape{5, 7}})
      for (const bool center : {true, false}) {
        CAPTURE(dtype_name(dt));
        CAPTURE(shape_str(s));
        CAPTURE(center);
        Generator gen(5);
        const int64_t rows = s[0], n = s[1];
        const Tensor x = randn(s, gen, dt), dy = randn(s, gen, dt), w = randn({n}, gen, dt), b = randn({n}, gen, dt);
        Tensor y = empty(s, dt), mean = empty({rows}, dt), rstd = empty({rows}, dt);
        Tensor dx = empty(s, dt), dw = empty({n}, dt), db = empty({n}, dt);
        Tensor g = dy.clone(), dw2 = empty({n}, dt), db2 = empty({n}, dt);
        if (center) {
          cpu.layernorm_forward(x, w, b, 1e-5, y, mean, rstd);
          cpu.layernorm_backward(dy, x, w, mean, rstd, dx, dw, db);
          cpu.layernorm_backward(g, x, w, mean, rstd, g, dw2, db2);
          CHECK(db2.to_vector() == db.to_vector());
        } else {
          cpu.rmsnorm_forward(x, w, 1e-5, y, rstd);
          cpu.rmsnorm_backward(dy, x, w, rstd, dx, dw);
          cpu.rmsnorm_backward(g, x, w, rstd, g, dw2);
        }
        CHECK(g.to_vector() == dx.to_vector());
        CHECK(dw2.to_vector() == dw.to_vector());
      }
}

TEST_CASE("layer_norm / rms_norm errors") {
  Tensor x = randn64({2, 4}, 17, false);
  CHECK_THROWS_WITH_AS(layer_norm(x, randn64({3}, 1, false)), doctest::Contains("[layer_norm] weight"), Error);
  CHECK_THROWS_WITH_AS(layer_norm(x, Tensor(), ones({4})), doctest::Contains("[layer_norm] bias"), Error);
  CHECK_THROWS_WITH_AS(layer_norm(x, Tensor(), Tensor(), -1.0), doctest::Contains("[layer_norm] eps"), Error);
  CHECK_THROWS_WITH_AS(layer_norm(arange(4)), doctest::Contains("[layer_norm]"), Error);
  CHECK_THROWS_WITH_AS(layer_norm(scalar(1.0)), doctest::Contains("[layer_norm]"), Error);
  CHECK_THROWS_WITH_AS(rms_norm(x, ones({4})), doctest::Contains("[rms_norm] weight"), Error);
  CHECK_THROWS_WITH_AS(rms_norm(x, ones({2}, float64)), doctest::Contains("[rms_norm] weight"), Error);
}
