// Reductions and softmax: values against plain loops, gradients of ties and masks, stability, errors.
// Their float64 gradchecks are registry cases (check/ops_reduce.cpp), run by ctest check_gradcheck.
#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <set>

#include "helpers.h"

using namespace linea;
using linea::testing::allclose;
using linea::testing::randn64;

namespace {

const double kInf = std::numeric_limits<double>::infinity();

// Reference reduction by plain loops: folds every element of x into the output slot of its kept
// indices with `fold(acc, value, index_along_reduced_dims)`, then applies `finish` to each slot.
// Returns a float64 tensor of the keepdim=false shape.
Tensor ref_reduce(const Tensor& x, std::vector<int64_t> dims, double init,
                  const std::function<double(double, double, int64_t)>& fold,
                  const std::function<double(double)>& finish = [](double a) { return a; }) {
  const int64_t nd = x.dim();
  std::set<int64_t> red;
  for (int64_t d : dims) red.insert(d < 0 ? d + nd : d);
  if (dims.empty())
    for (int64_t d = 0; d < nd; ++d) red.insert(d);
  Shape out_shape;
  for (int64_t d = 0; d < nd; ++d)
    if (!red.count(d)) out_shape.push_back(x.shape()[d]);
  std::vector<double> acc(numel(out_shape), init);
  std::vector<double> v = x.to_vector();
  Shape idx(nd, 0);
  for (size_t e = 0; e < v.size(); ++e) {
    int64_t o = 0, r = 0;
    for (int64_t d = 0; d < nd; ++d) {
      if (red.count(d)) r = r * x.shape()[d] + idx[d];
      else o = o * x.shape()[d] + idx[d];
    }
    acc[o] = fold(acc[o], v[e], r);
    for (int64_t d = nd - 1; d >= 0 && ++idx[d] == x.shape()[d]; --d) idx[d] = 0;
  }
  for (double& a : acc) a = finish(a);
  return from_vector(acc, out_shape);
}

const auto kAdd = [](double a, double v, int64_t) { return a + v; };
const auto kMax = [](double a, double v, int64_t) { return std::max(a, v); };
const auto kMin = [](double a, double v, int64_t) { return std::min(a, v); };

Tensor randn32(Shape shape, uint64_t seed) {
  Generator g(seed);
  return randn(std::move(shape), g, DType::Float32);
}

// The dim lists most tests sweep over for a 3-d input: single dims, adjacent pairs, a
// non-adjacent pair (given out of order and negative), and everything.
const std::vector<std::vector<int64_t>> kDimSets = {{}, {0}, {1}, {2}, {0, 1}, {1, 2}, {2, 0}, {-1, 0}, {0, 1, 2}};

}  // namespace

TEST_CASE("sum over any dims matches plain loops, with keepdim shapes") {
  Tensor x = randn32({3, 4, 5}, 1);
  for (const auto& dims : kDimSets) {
    CAPTURE(fmt::format("{}", fmt::join(dims, ",")));
    Tensor ref = ref_reduce(x, dims, 0.0, kAdd);
    Tensor s = sum(x, dims);
    CHECK(s.dtype() == DType::Float32);
    CHECK(allclose(s, ref, 1e-5, 1e-5));
    Tensor k = sum(x, dims, /*keepdim=*/true);
    CHECK(k.dim() == 3);
    CHECK(allclose(k.reshape(ref.shape()), ref, 1e-5, 1e-5));
  }
  CHECK(sum(x, {0, 2}, true).shape() == Shape{1, 4, 1});
  CHECK(sum(x).shape() == Shape{});
}

TEST_CASE("sum of non-contiguous views") {
  Tensor base = randn32({4, 6, 5}, 2);
  Tensor p = base.permute({2, 0, 1});            // [5, 4, 6]
  Tensor sl = base.slice(1, 0, 6, 2);            // [4, 3, 5], stride 2 along dim 1
  for (const auto& dims : kDimSets) {
    CHECK(allclose(sum(p, dims), ref_reduce(p, dims, 0.0, kAdd), 1e-5, 1e-5));
    CHECK(allclose(sum(sl, dims), ref_reduce(sl, dims, 0.0, kAdd), 1e-5, 1e-5));
  }
}

TEST_CASE("float32 sums accumulate in double: long rows and long columns stay accurate") {
  // 4M copies of 0.1f: a float accumulator drifts by ~1e-2 relative; double is exact to ~1e-9.
  const int64_t n = 4'000'000;
  Tensor x = full({n}, 0.1, DType::Float32);
  const double expect = n * static_cast<double>(0.1f);
  CHECK(std::abs(sum(x).item() - expect) / expect < 1e-7);
  Tensor cols = full({n / 4, 4}, 0.1, DType::Float32);  // a column reduction (inner = 4)
  for (double v : sum(cols, {0}).to_vector()) CHECK(std::abs(v - expect / 4) / (expect / 4) < 1e-7);
  Tensor rows = full({2, n / 2}, 0.1, DType::Float32);  // two long rows (split over threads)
  for (double v : sum(rows, {1}).to_vector()) CHECK(std::abs(v - expect / 2) / (expect / 2) < 1e-7);
}

TEST_CASE("sum of integers and bools counts in int64") {
  Tensor b = from_vector<uint8_t>({1, 0, 1, 1, 0, 1}, {2, 3});
  Tensor s = sum(b, {1});
  CHECK(s.dtype() == DType::Int64);
  CHECK(s.to_vector() == std::vector<double>{2, 2});
  Tensor i = from_vector<int64_t>({5, -2, 7, 1}, {2, 2});
  CHECK(sum(i).item() == 11);
}

TEST_CASE("mean and var match plain loops") {
  Tensor x = randn32({3, 4, 5}, 3);
  for (const auto& dims : kDimSets) {
    Tensor cnt = ref_reduce(x, dims, 0.0, [](double a, double, int64_t) { return a + 1; });
    const double n = cnt.to_vector()[0];
    Tensor m = ref_reduce(x, dims, 0.0, kAdd, [n](double a) { return a / n; });
    CHECK(allclose(mean(x, dims), m, 1e-5, 1e-5));
    // Variance from the definition: sum (x - mean)^2 / (n - correction), mean by a loop.
    Tensor dev = x.to(DType::Float64) - mean(x.to(DType::Float64), dims, true);
    for (int64_t corr : {0, 1}) {
      Tensor v = ref_reduce(dev * dev, dims, 0.0, kAdd, [&](double a) { return a / (n - corr); });
      CHECK(allclose(var(x, dims, false, corr), v, 1e-5, 1e-4));
    }
  }
  // Two-pass variance survives a large offset that would cancel in E[x^2] - E[x]^2.
  Tensor big = from_vector<float>({10000.5f, 10001.5f, 10002.5f, 10003.5f});
  CHECK(var(big, {}, false, 0).item() == doctest::Approx(1.25).epsilon(1e-6));
}

TEST_CASE("max, min and argmax match plain loops") {
  Tensor x = randn32({3, 4, 5}, 4);
  for (const auto& dims : kDimSets) {
    CHECK(allclose(max(x, dims), ref_reduce(x, dims, -kInf, kMax), 0, 0));
    CHECK(allclose(min(x, dims), ref_reduce(x, dims, kInf, kMin), 0, 0));
  }
  for (int64_t d : {0, 1, 2}) {
    // Reference argmax: the index along d of the first maximum.
    Tensor m = ref_reduce(x, {d}, -kInf, kMax);
    Tensor am = argmax(x, d);
    CHECK(am.dtype() == DType::Int64);
    CHECK(am.shape() == m.shape());
    // The value at each returned index must be the max.
    auto mv = m.to_vector(), iv = am.to_vector();
    for (size_t o = 0; o < mv.size(); ++o) {
      Shape kept_idx;
      int64_t rem = static_cast<int64_t>(o);
      for (int64_t k = m.dim() - 1; k >= 0; --k) {
        kept_idx.insert(kept_idx.begin(), rem % m.shape()[k]);
        rem /= m.shape()[k];
      }
      kept_idx.insert(kept_idx.begin() + d, static_cast<int64_t>(iv[o]));
      CHECK(x.at({kept_idx[0], kept_idx[1], kept_idx[2]}) == mv[o]);
    }
  }
  CHECK(argmax(x, 1, true).shape() == Shape{3, 1, 5});
}

TEST_CASE("long column reductions, split over rows, match plain loops and keep the first argmax") {
  // 40000 rows of 3 columns: fewer column blocks than threads, so the rows are split into chunks.
  Tensor x = randn32({40000, 3}, 9);
  CHECK(allclose(sum(x, {0}), ref_reduce(x, {0}, 0, kAdd), 1e-6, 1e-5));
  CHECK(allclose(max(x, {0}), ref_reduce(x, {0}, -kInf, kMax), 0, 0));
  CHECK(allclose(min(x, {0}), ref_reduce(x, {0}, kInf, kMin), 0, 0));
  const auto exp_add = [](double a, double v, int64_t) { return a + std::exp(v); };
  CHECK(allclose(logsumexp(x, {0}), ref_reduce(x, {0}, 0, exp_add, [](double a) { return std::log(a); }), 1e-6, 1e-6));
  const std::vector<double> m = max(x, {0}).to_vector(), am = argmax(x, 0).to_vector();
  for (int64_t c = 0; c < 3; ++c) CHECK(x.at({static_cast<int64_t>(am[c]), c}) == m[c]);
  CHECK(argmax(zeros({40000, 3}), 0).to_vector() == std::vector<double>{0, 0, 0});  // ties: the first row
}

TEST_CASE("argmax returns the first index on ties; max propagates NaN") {
  Tensor t = from_vector<float>({1, 3, 3, 0, 2, 2, 2, -1}, {2, 4});
  CHECK(argmax(t, 1).to_vector() == std::vector<double>{1, 0});
  Tensor c = from_vector<float>({5, 1, 5, 1}, {2, 2});  // column ties
  CHECK(argmax(c, 0).to_vector() == std::vector<double>{0, 0});
  // A long row split over threads still finds the first of equal maxima.
  Tensor long_row = zeros({300000});
  CHECK(argmax(long_row, 0).item() == 0);
  Tensor nan = from_vector<float>({1, NAN, 3});
  CHECK(std::isnan(max(nan).item()));
}

TEST_CASE("logsumexp matches plain loops and is stable") {
  Tensor x = randn32({3, 4, 5}, 5);
  for (const auto& dims : kDimSets) {
    Tensor ref = ref_reduce(exp(x.to(DType::Float64)), dims, 0.0, kAdd, [](double a) { return std::log(a); });
    CHECK(allclose(logsumexp(x, dims), ref, 1e-5, 1e-5));
  }
  // Values ~1e4 overflow exp() without the max shift.
  Tensor big = from_vector<float>({10000, 10001, 9999}, {1, 3});
  const double expect = 10001 + std::log(std::exp(-1.0) + 1 + std::exp(-2.0));
  CHECK(logsumexp(big, {1}).item() == doctest::Approx(expect).epsilon(1e-6));
  Tensor big_col = from_vector<double>({10000, 10001, 9999}, {3, 1});  // column path
  CHECK(logsumexp(big_col, {0}).item() == doctest::Approx(expect).epsilon(1e-12));
  // A row of -inf (fully masked) gives -inf, not NaN; -inf entries elsewhere contribute 0.
  Tensor masked = from_vector<float>({-INFINITY, -INFINITY, 0, -INFINITY}, {2, 2});
  auto v = logsumexp(masked, {1}).to_vector();
  CHECK(v[0] == -kInf);
  CHECK(v[1] == doctest::Approx(0.0));
  auto vc = logsumexp(masked, {0}).to_vector();
  CHECK(vc[0] == doctest::Approx(0.0));
  CHECK(vc[1] == -kInf);
}

TEST_CASE("softmax and log_softmax match plain loops along any dim") {
  Tensor x = randn32({3, 4, 5}, 6);
  for (int64_t d : {0, 1, 2, -1}) {
    Tensor xd = x.to(DType::Float64);
    Tensor ref = exp(xd) / sum(exp(xd), {d}, true);  // fine for N(0,1) inputs
    CHECK(allclose(softmax(x, d), ref, 1e-6, 1e-5));
    CHECK(allclose(log_softmax(x, d), log(ref), 1e-5, 1e-5));
    CHECK(softmax(x, d).is_contiguous());
  }
  Tensor p = x.permute({2, 0, 1});  // non-contiguous input
  CHECK(allclose(softmax(p, 1), softmax(p.contiguous(), 1), 0, 0));
}

TEST_CASE("softmax is stable for large logits and masked (-inf) entries") {
  Tensor big = from_vector<float>({10000, 10001, 9999, 10000}, {1, 4});
  const double z = 2 * std::exp(-1.0) + 1 + std::exp(-2.0);
  auto s = softmax(big).to_vector();
  CHECK(s[1] == doctest::Approx(1 / z).epsilon(1e-5));
  CHECK(s[2] == doctest::Approx(std::exp(-2.0) / z).epsilon(1e-5));
  auto ls = log_softmax(big).to_vector();
  CHECK(ls[1] == doctest::Approx(-std::log(z)).epsilon(1e-5));
  // Equal large logits: uniform, log_softmax = -log(n) exactly-ish, no inf/NaN.
  Tensor eq_big = full({2, 8}, 3e4, DType::Float32);
  for (double v : log_softmax(eq_big, 1).to_vector()) CHECK(v == doctest::Approx(-std::log(8.0)).epsilon(1e-6));
  for (double v : softmax(eq_big, 0).to_vector()) CHECK(v == doctest::Approx(0.5));
  // Masked entries get probability 0 (log-prob -inf); the rest renormalise.
  Tensor masked = from_vector<float>({1, -INFINITY, 1, -INFINITY});
  CHECK(softmax(masked, 0).to_vector() == std::vector<double>{0.5, 0, 0.5, 0});
  auto lm = log_softmax(masked, 0).to_vector();
  CHECK(lm[0] == doctest::Approx(-std::log(2.0)));
  CHECK(lm[1] == -kInf);
}

TEST_CASE("max/min gradient is split evenly between tied elements") {
  Tensor x = from_vector<double>({1, 4, 4, 2, 0, 0}, {2, 3}).requires_grad_();
  max(x, {1}).backward(from_vector<double>({1, 1}));
  CHECK(x.grad().to_vector() == std::vector<double>{0, 0.5, 0.5, 1, 0, 0});
  x.zero_grad();
  min(x).backward();
  CHECK(x.grad().to_vector() == std::vector<double>{0, 0, 0, 0, 0.5, 0.5});
}

TEST_CASE("reduction errors are clear linea::Errors") {
  Tensor x = randn32({3, 4}, 15);
  CHECK_THROWS_WITH_AS(sum(x, {0, 0}), doctest::Contains("[sum]"), linea::Error);
  CHECK_THROWS_WITH_AS(sum(x, {1, -1}), doctest::Contains("more than once"), linea::Error);
  CHECK_THROWS_WITH_AS(sum(x, {2}), doctest::Contains("[sum]"), linea::Error);
  CHECK_THROWS_WITH_AS(mean(x, {-3}), doctest::Contains("[mean]"), linea::Error);
  CHECK_THROWS_WITH_AS(var(x, {5}), doctest::Contains("[var]"), linea::Error);
  CHECK_THROWS_WITH_AS(logsumexp(x, {0, 0}), doctest::Contains("[logsumexp]"), linea::Error);
  CHECK_THROWS_WITH_AS(argmax(x, 2), doctest::Contains("[argmax]"), linea::Error);
  CHECK_THROWS_WITH_AS(softmax(x, 2), doctest::Contains("[softmax]"), linea::Error);
  CHECK_THROWS_WITH_AS(log_softmax(x, -3), doctest::Contains("[log_softmax]"), linea::Error);
  Tensor e = zeros({3, 0});
  CHECK_THROWS_WITH_AS(max(e, {1}), doctest::Contains("[max]"), linea::Error);
  CHECK_THROWS_WITH_AS(min(e), doctest::Contains("[min]"), linea::Error);
  CHECK_THROWS_WITH_AS(argmax(e, 1), doctest::Contains("size 0"), linea::Error);
  CHECK(max(e, {0}).shape() == Shape{0});            // reducing a non-empty dim of an empty tensor is fine
  CHECK(sum(e, {1}).to_vector() == std::vector<double>{0, 0, 0});  // an empty sum is 0
  Tensor i = from_vector<int64_t>({1, 2, 3});
  CHECK_THROWS_WITH_AS(mean(i), doctest::Contains("[mean]"), linea::Error);
  CHECK_THROWS_WITH_AS(var(i), doctest::Contains("[var]"), linea::Error);
  CHECK_THROWS_WITH_AS(logsumexp(i, {0}), doctest::Contains("[logsumexp]"), linea::Error);
  CHECK_THROWS_WITH_AS(softmax(i), doctest::Contains("[softmax]"), linea::Error);
}
