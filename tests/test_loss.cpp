// Losses: the fused cross_entropy against log_softmax + gather composed from primitive ops,
// forward and backward, stability, errors; mse_loss. Their float64 gradchecks are registry cases
// (check/ops_nn.cpp), run by ctest check_gradcheck.
#include <cmath>
#include <limits>
#include <vector>

#include "helpers.h"

using namespace linea;
using linea::testing::allclose;
using linea::testing::randn64;
using nn::CrossEntropyOptions;
using nn::Reduction;

namespace {

// Per-row loss composed from primitives: (1 - eps) * (-logp[t]) + eps * mean_c(-logp), and 0 on
// ignored rows. Returns float64 values, one per row.
std::vector<double> composed_rows(const Tensor& logits, const std::vector<int64_t>& t, int64_t ignore, double eps) {
  const int64_t C = logits.size(-1);
  Tensor lp = log_softmax(logits.to(float64).reshape({-1, C}), -1);
  std::vector<int64_t> safe(t);
  for (int64_t& v : safe) v = v == ignore ? 0 : v;
  Tensor idx = from_vector(safe, {static_cast<int64_t>(safe.size()), 1});
  std::vector<double> nll = (-gather(lp, 1, idx)).to_vector();
  std::vector<double> smooth = (-mean(lp, {1})).to_vector();
  std::vector<double> out(t.size());
  for (size_t r = 0; r < t.size(); ++r) out[r] = t[r] == ignore ? 0.0 : (1 - eps) * nll[r] + eps * smooth[r];
  return out;
}

}  // namespace

TEST_CASE("cross_entropy values equal the composed log_softmax/gather computation") {
  Tensor x = randn64({2, 3, 5}, 1, false);
  const std::vector<int64_t> t = {4, 0, -100, 2, 3, 1};
  Tensor tt = from_vector(t, {2, 3});
  for (double eps : {0.0, 0.1, 1.0}) {
    CAPTURE(eps);
    std::vector<double> ref = composed_rows(x, t, -100, eps);
    double sum = 0;
    for (double v : ref) sum += v;
    Tensor none = nn::cross_entropy(x, tt, {.label_smoothing = eps, .reduction = Reduction::None});
    CHECK(none.shape() == Shape{2, 3});
    CHECK(allclose(none.reshape({-1}), from_vector(ref), 1e-12, 1e-12));
    CHECK(none.at({0, 2}) == 0.0);  // the ignored row
    CHECK(nn::cross_entropy(x, tt, {.label_smoothing = eps, .reduction = Reduction::Sum}).item() ==
          doctest::Approx(sum).epsilon(1e-13));
    Tensor m = nn::cross_entropy(x, tt, {.label_smoothing = eps});
    CHECK(m.dim() == 0);
    CHECK(m.item() == doctest::Approx(sum / 5).epsilon(1e-13));  // 5 rows are not ignored
  }
  // A custom ignore_index, a 1-d logits vector (one row, 0-d target), and float32.
  CHECK(nn::cross_entropy(x, from_vector<int64_t>({4, 0, 7, 2, 3, 1}, {2, 3}), {.ignore_index = 7}).item() ==
        doctest::Approx(nn::cross_entropy(x, tt).item()).epsilon(1e-13));
  Tensor row = x.select(0, 1).select(0, 2);
  CHECK(nn::cross_entropy(row, scalar(1, int64)).item() ==
        doctest::Approx(composed_rows(row.unsqueeze(0), {1}, -100, 0)[0]).epsilon(1e-13));
  CHECK(nn::cross_entropy(x.to(float32), tt).dtype() == float32);
  CHECK(nn::cross_entropy(x.to(float32), tt).item() == doctest::Approx(nn::cross_entropy(x, tt).item()).epsilon(1e-6));
}

// Its float64 gradchecks (every reduction, smoothing, ignore_index, transposed and 3-d logits)
// are registry cases (check/ops_nn.cpp), run by ctest check_gradcheck.
TEST_CASE("cross_entropy's fused backward equals the backward of the composed computation") {
  Tensor t = from_vector<int64_t>({5, -100, 0, 3}, {4});
  Tensor a = randn64({4, 6}, 5), b = a.detach().clone().requires_grad_();
  nn::cross_entropy(a, t, {.label_smoothing = 0.3}).backward();
  Tensor lp = log_softmax(b, -1);
  Tensor nll = -gather(lp, 1, from_vector<int64_t>({5, 0, 0, 3}, {4, 1})).squeeze(1);
  Tensor per_row = 0.7 * nll + 0.3 * (-mean(lp, {1}));
  (sum(per_row * from_vector<double>({1, 0, 1, 1})) / 3.0).backward();
  CHECK(allclose(a.grad(), b.grad(), 1e-14, 1e-12));
}

TEST_CASE("cross_entropy is stable for logits ~1e4 in float32") {
  Generator g(6);
  Tensor x = randn({8, 50}, g) * 1e4;  // float32
  Tensor t = randint(0, 50, {8}, g);
  Tensor x64 = x.to(float64);
  std::vector<double> ref = composed_rows(x64, t.to_vector_as<int64_t>(), -100, 0.1);
  Tensor got = nn::cross_entropy(x, t, {.label_smoothing = 0.1, .reduction = Reduction::None});
  CHECK(allclose(got.to(float64), from_vector(ref), 1e-2, 1e-6));  // losses are ~1e4: ~1 ulp of float32
  // A margin of 2e4: exp(-2e4) underflows to 0, yet the loss is exact.
  Tensor y = from_vector<float>({1e4f, 0.0f, -1e4f}, {1, 3}).requires_grad_();
  Tensor l = nn::cross_entropy(y, from_vector<int64_t>({2}, {1}));
  CHECK(l.item() == 2e4);
  l.backward();
  CHECK(y.grad().to_vector() == std::vector<double>{1, 0, -1});
  // Masked (-inf) logits: probability 0, finite loss (and infinite with smoothing, as in PyTorch).
  const float ninf = -std::numeric_limits<float>::infinity();
  Tensor masked = from_vector<float>({0.5f, ninf, -0.5f, ninf}, {1, 4});
  CHECK(nn::cross_entropy(masked, from_vector<int64_t>({0}, {1})).item() ==
        doctest::Approx(std::log(1 + std::exp(-1.0))).epsilon(1e-6));
  CHECK(std::isinf(nn::cross_entropy(masked, from_vector<int64_t>({0}, {1}), {.label_smoothing = 0.1}).item()));
  // Gradients stay finite and each row of (softmax - one_hot) sums to 0.
  Tensor xg = x.detach().requires_grad_();
  nn::cross_entropy(xg, t, {.label_smoothing = 0.1}).backward();
  Tensor rows = sum(xg.grad().to(float64), {1});
  CHECK(allclose(rows, zeros({8}, float64), 1e-7, 0));
}

TEST_CASE("cross_entropy: every target ignored") {
  Tensor x = randn64({2, 3}, 7);
  Tensor t = from_vector<int64_t>({-100, -100}, {2});
  CHECK(std::isnan(nn::cross_entropy(x, t).item()));  // mean over nothing, as in PyTorch
  Tensor s = nn::cross_entropy(x, t, {.reduction = Reduction::Sum});
  CHECK(s.item() == 0.0);
  s.backward();
  CHECK(x.grad().to_vector() == std::vector<double>(6, 0.0));
}

TEST_CASE("cross_entropy: the range check skips ignored rows and names the first bad target") {
  Tensor x = randn64({2, 3, 5}, 9, false);  // 6 rows of 5 classes
  // ignore_index may lie outside [0, C): those rows are not checked (nor counted).
  CHECK(std::isfinite(nn::cross_entropy(x, from_vector<int64_t>({-7, 0, 4, -7, 1, 2}, {2, 3}), {.ignore_index = -7})
                          .item()));
  CHECK_THROWS_WITH_AS(
      nn::cross_entropy(x, from_vector<int64_t>({-100, 0, 4, 9, 5, 2}, {2, 3})),
      doctest::Contains("target 9 at flat index 3 is out of range for C = 5 classes "
                        "(valid: 0..4, or ignore_index -100)"),
      Error);
  CHECK_THROWS_WITH_AS(nn::cross_entropy(x, from_vector<int64_t>({0, 0, 4, 1, 1, -100}, {2, 3}), {.ignore_index = 4}),
                       doctest::Contains("target -100 at flat index 5"), Error);
}

TEST_CASE("cross_entropy errors") {
  Tensor x = randn64({3, 5}, 8, false);
  CHECK_THROWS_WITH_AS(nn::cross_entropy(x, from_vector<int64_t>({0, 5, 1}, {3})),
                       doctest::Contains("target 5 at flat index 1 is out of range for C = 5"), Error);
  CHECK_THROWS_WITH_AS(nn::cross_entropy(x, from_vector<int64_t>({0, -1, 1}, {3})),
                       doctest::Contains("[cross_entropy] target -1"), Error);
  CHECK_THROWS_WITH_AS(nn::cross_entropy(x, from_vector<int64_t>({0, 1}, {2})),
                       doctest::Contains("[cross_entropy] targets of shape (2,) do not match logits of shape (3, 5)"),
                       Error);
  CHECK_THROWS_WITH_AS(nn::cross_entropy(x, from_vector<double>({0, 1, 2}, {3})),
                       doctest::Contains("[cross_entropy] expects floating logits and int64 targets"), Error);
  CHECK_THROWS_WITH_AS(nn::cross_entropy(x.to(int64), from_vector<int64_t>({0, 1, 2}, {3})),
                       doctest::Contains("[cross_entropy]"), Error);
  CHECK_THROWS_WITH_AS(nn::cross_entropy(x, from_vector<int64_t>({0, 1, 2}, {3}), {.label_smoothing = 1.5}),
                       doctest::Contains("[cross_entropy] label_smoothing must be in [0, 1]"), Error);
  CHECK_THROWS_WITH_AS(nn::cross_entropy(scalar(1.0, float64), scalar(0, int64)),
                       doctest::Contains("[cross_entropy] logits must be [..., C]"), Error);
}

TEST_CASE("mse_loss values and errors") {
  Tensor p = randn64({3, 4}, 9), q = randn64({3, 4}, 10);
  std::vector<double> a = p.to_vector(), b = q.to_vector(), sq(a.size());
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i) s += sq[i] = (a[i] - b[i]) * (a[i] - b[i]);
  CHECK(nn::mse_loss(p, q).item() == doctest::Approx(s / 12).epsilon(1e-14));
  CHECK(nn::mse_loss(p, q, Reduction::Sum).item() == doctest::Approx(s).epsilon(1e-14));
  CHECK(allclose(nn::mse_loss(p, q, Reduction::None), from_vector(sq, {3, 4}), 1e-15, 1e-14));
  CHECK_THROWS_WITH_AS(nn::mse_loss(p, q.t()),
                       doctest::Contains("[mse_loss] pred of shape (3, 4) and target of shape (4, 3)"), Error);
  CHECK_THROWS_WITH_AS(nn::mse_loss(p, q.to(float32)), doctest::Contains("[mse_loss]"), Error);
}
