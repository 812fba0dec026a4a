// Creation functions, seeded random numbers, wrapping host memory, and element access.
#include <algorithm>
#include <cmath>
#include <numeric>

#include "helpers.h"

using namespace linea;

namespace {

double mean_of(const std::vector<double>& v) { return std::accumulate(v.begin(), v.end(), 0.0) / v.size(); }

double var_of(const std::vector<double>& v) {
  const double m = mean_of(v);
  double s = 0;
  for (double x : v) s += (x - m) * (x - m);
  return s / (v.size() - 1);
}

}  // namespace

TEST_CASE("zeros / ones / full / scalar and the *_like forms") {
  Tensor z = zeros({2, 3});
  CHECK(z.shape() == Shape{2, 3});
  CHECK(z.dtype() == float32);
  CHECK(z.is_contiguous());
  CHECK(z.to_vector() == std::vector<double>(6, 0.0));
  CHECK(ones({4}, float64).to_vector() == std::vector<double>(4, 1.0));
  CHECK(full({2, 2}, 2.5, float64).to_vector() == std::vector<double>(4, 2.5));
  CHECK(full({3}, 7, int64).to_vector() == std::vector<double>{7, 7, 7});

  Tensor s = scalar(3.25, float64);
  CHECK(s.dim() == 0);
  CHECK(s.numel() == 1);
  CHECK(s.item() == 3.25);

  Tensor base = full({3, 1}, 9.0, int64);
  for (const Tensor& t : {zeros_like(base), ones_like(base), full_like(base, 4), empty_like(base)}) {
    CHECK(t.shape() == base.shape());
    CHECK(t.dtype() == int64);
  }
  CHECK(ones_like(base).to_vector() == std::vector<double>(3, 1.0));
  CHECK(full_like(base, 4).to_vector() == std::vector<double>(3, 4.0));

  CHECK(zeros({0, 5}).numel() == 0);
  CHECK(zeros({0, 5}).to_vector().empty());
}

TEST_CASE("arange: both forms") {
  Tensor a = arange(5);
  CHECK(a.dtype() == int64);
  CHECK(a.to_vector() == std::vector<double>{0, 1, 2, 3, 4});
  CHECK(arange(0).numel() == 0);

  Tensor b = arange(1.0, 2.0, 0.25, float64);
  CHECK(b.to_vector() == std::vector<double>{1.0, 1.25, 1.5, 1.75});  // end excluded
  CHECK(arange(5.0, 0.0, -2.0, float64).to_vector() == std::vector<double>{5, 3, 1});
  CHECK(arange(0.0, 1.0, 0.3).numel() == 4);  // ceil(1 / 0.3): 0, 0.3, 0.6, 0.9
  CHECK(arange(2.0, 1.0, 1.0).numel() == 0);  // wrong direction: empty, not an error

  CHECK_THROWS_WITH_AS(arange(0.0, 1.0, 0.0), doctest::Contains("[arange]"), Error);
  CHECK_THROWS_WITH_AS(arange(0.0, INFINITY, 1.0), doctest::Contains("[arange]"), Error);
}

TEST_CASE("linspace and eye") {
  CHECK(linspace(0, 1, 5, float64).to_vector() == std::vector<double>{0, 0.25, 0.5, 0.75, 1.0});
  Tensor l = linspace(-1, 3, 7, float64);
  CHECK(l.at({0}) == -1.0);
  CHECK(l.at({-1}) == 3.0);  // the end is exact, not start + 6 * step
  CHECK(linspace(2, 9, 1, float64).to_vector() == std::vector<double>{2});
  CHECK(linspace(2, 9, 0).numel() == 0);
  CHECK_THROWS_WITH_AS(linspace(0, 1, -1), doctest::Contains("[linspace]"), Error);

  Tensor e = eye(3, float64);
  CHECK(e.shape() == Shape{3, 3});
  CHECK(e.to_vector() == std::vector<double>{1, 0, 0, 0, 1, 0, 0, 0, 1});
}

TEST_CASE("tril_mask / triu_mask") {
  Tensor lo = tril_mask(2, 3);
  CHECK(lo.dtype() == boolean);
  CHECK(lo.to_vector() == std::vector<double>{1, 0, 0, 1, 1, 0});
  CHECK(triu_mask(2, 3, 1).to_vector() == std::vector<double>{0, 1, 1, 0, 0, 1});
}

TEST_CASE("randn / rand / randint: ranges and moments") {
  Generator g(123);
  const int64_t n = 200000;

  auto normal = randn({n}, g, float64).to_vector();
  CHECK(std::abs(mean_of(normal)) < 0.01);        // sd of the mean: 1/sqrt(n) ~ 0.0022
  CHECK(std::abs(var_of(normal) - 1.0) < 0.02);
  int64_t beyond_2sd = std::count_if(normal.begin(), normal.end(), [](double x) { return std::abs(x) > 2; });
  CHECK(std::abs(static_cast<double>(beyond_2sd) / n - 0.0455) < 0.003);

  auto uniform = rand({n}, g).to_vector();
  CHECK(*std::min_element(uniform.begin(), uniform.end()) >= 0.0);
  CHECK(*std::max_element(uniform.begin(), uniform.end()) < 1.0);
  CHECK(std::abs(mean_of(uniform) - 0.5) < 0.005);
  CHECK(std::abs(var_of(uniform) - 1.0 / 12) < 0.002);

  Tensor ri = randint(-3, 4, {n}, g);
  CHECK(ri.dtype() == int64);
  auto ints = ri.to_vector();
  std::vector<int64_t> counts(7, 0);
  int64_t out_of_range = 0;
  for (double v : ints) {
    if (v >= -3 && v < 4 && v == std::floor(v)) ++counts[static_cast<int64_t>(v) + 3];
    else ++out_of_range;
  }
  CHECK(out_of_range == 0);
  for (int64_t c : counts) CHECK(std::abs(static_cast<double>(c) / n - 1.0 / 7) < 0.005);  // every value, evenly

  CHECK(randn({2, 3}, g, float32).dtype() == float32);
  CHECK(randint(0, 10, {2}, g, float64).dtype() == float64);
}

TEST_CASE("seeded generators reproduce; different seeds differ") {
  Generator a(7), b(7), c(8);
  CHECK(randn({100}, a).to_vector() == randn({100}, b).to_vector());
  CHECK(rand({100}, a).to_vector() == rand({100}, b).to_vector());
  CHECK(randint(0, 1000, {100}, a).to_vector() == randint(0, 1000, {100}, b).to_vector());

  Generator a2(7);
  CHECK(randn({100}, a2).to_vector() != randn({100}, c).to_vector());

  // The global generator reseeds.
  manual_seed(99);
  auto first = randn({50}).to_vector();
  manual_seed(99);
  CHECK(randn({50}).to_vector() == first);

  // manual_seed on a used generator restarts its sequence.
  Generator d(5);
  auto d1 = rand({10}, d).to_vector();
  d.manual_seed(5);
  CHECK(rand({10}, d).to_vector() == d1);
}

TEST_CASE("random creation: error paths") {
  Generator g(1);
  CHECK_THROWS_WITH_AS(randn({2}, g, int64), doctest::Contains("[randn]"), Error);
  CHECK_THROWS_WITH_AS(rand({2}, g, boolean), doctest::Contains("[rand]"), Error);
  CHECK_THROWS_WITH_AS(randint(3, 3, {2}, g), doctest::Contains("[randint]"), Error);
  CHECK_THROWS_WITH_AS(randint(5, 1, {2}, g), doctest::Contains("[randint]"), Error);
  CHECK_THROWS_WITH_AS(zeros({2, -1}), doctest::Contains("[empty]"), Error);
}

TEST_CASE("from_vector copies; from_blob wraps without copying") {
  std::vector<float> v = {1, 2, 3, 4, 5, 6};
  Tensor t = from_vector(v, {2, 3});
  CHECK(t.shape() == Shape{2, 3});
  CHECK(t.dtype() == float32);
  CHECK(t.data<float>() != v.data());
  v[0] = 100;  // the tensor has its own copy
  CHECK(t.at({0, 0}) == 1.0);
  CHECK(from_vector(std::vector<int64_t>{4, 5, 6}).shape() == Shape{3});  // 1-d by default
  CHECK(from_vector(std::vector<double>{2.5}).dim() == 0);                // one value: a scalar
  CHECK(from_vector(std::vector<uint8_t>{1, 255}).to_vector() == std::vector<double>{1, 255});
  CHECK_THROWS_WITH_AS(from_vector(v, {4, 2}), doctest::Contains("[from_vector]"), Error);

  std::vector<double> buf = {1, 2, 3, 4};
  Tensor b = from_blob(buf.data(), {2, 2}, float64);
  CHECK(b.data_ptr() == buf.data());
  CHECK(b.is_contiguous());
  buf[3] = 40;  // writes show through: same memory
  CHECK(b.at({1, 1}) == 40.0);
  b.data<double>()[0] = -1;
  CHECK(buf[0] == -1);

  bool freed = false;
  {
    auto* owned = new int64_t[3]{7, 8, 9};
    Tensor o = from_blob(owned, {3}, int64, [&](void* p) {
      delete[] static_cast<int64_t*>(p);
      freed = true;
    });
    Tensor view = o.as_strided({2}, {1}, 1);  // a view keeps the memory alive
    o = Tensor();
    CHECK_FALSE(freed);
    CHECK(view.to_vector() == std::vector<double>{8, 9});
  }
  CHECK(freed);
}

TEST_CASE("item / at / to_vector") {
  Tensor t = from_vector(std::vector<double>{0, 1, 2, 3, 4, 5}, {2, 3});
  CHECK(t.at({1, 2}) == 5.0);
  CHECK(t.at({-1, -3}) == 3.0);
  CHECK(t.to_vector() == std::vector<double>{0, 1, 2, 3, 4, 5});
  CHECK(t.to_vector_as<int64_t>() == std::vector<int64_t>{0, 1, 2, 3, 4, 5});
  CHECK(scalar(4.5).item() == 4.5);
  CHECK(from_vector(std::vector<double>{8}, {1, 1}).item() == 8.0);

  // A transposed view (strides swapped): at and to_vector follow the view, not the storage.
  Tensor tt = t.as_strided({3, 2}, {1, 3}, 0);
  CHECK(tt.at({2, 0}) == 2.0);
  CHECK(tt.to_vector() == std::vector<double>{0, 3, 1, 4, 2, 5});
  // A view with an offset.
  CHECK(t.as_strided({2}, {3}, 1).to_vector() == std::vector<double>{1, 4});

  CHECK_THROWS_WITH_AS(t.item(), doctest::Contains("[item]"), Error);
  CHECK_THROWS_WITH_AS(t.at({2, 0}), doctest::Contains("[at]"), Error);
  CHECK_THROWS_WITH_AS(t.at({0, -4}), doctest::Contains("[at]"), Error);
  CHECK_THROWS_WITH_AS(t.at({0}), doctest::Contains("[at]"), Error);
  CHECK_THROWS_WITH_AS(t.data<float>(), doctest::Contains("[data]"), Error);
  CHECK_THROWS_WITH_AS(t.as_strided({3, 3}, {3, 1}, 0), doctest::Contains("[as_strided]"), Error);
  CHECK_THROWS_WITH_AS(Tensor().shape(), doctest::Contains("undefined"), Error);
}

TEST_CASE("a generator's saved state replays the same numbers") {
  linea::Generator g(123);
  g.normal();  // leaves a cached Box-Muller spare, which the state must carry too
  auto st = g.state();
  std::vector<double> a, b;
  for (int i = 0; i < 5; ++i) a.push_back(g.normal() + g.uniform());
  linea::Generator h(999);
  h.set_state(st);
  for (int i = 0; i < 5; ++i) b.push_back(h.normal() + h.uniform());
  CHECK(a == b);
}
