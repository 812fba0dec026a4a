// Joining and indexing: cat, stack, index_select, gather, scatter_add, embedding, one_hot.
// Forward values are checked against plain loops over at(). Their float64 gradchecks are registry cases (check/ops_shape.cpp), run by ctest check_gradcheck.
#include "helpers.h"

using namespace linea;
using linea::testing::allclose;
using linea::testing::randn64;

namespace {

Tensor idx64(std::vector<int64_t> v, Shape shape = {}) { return from_vector(v, shape); }

// A float64 leaf that is not contiguous: the transpose of a [cols, rows] tensor.
Tensor transposed_leaf(int64_t rows, int64_t cols, uint64_t seed) {
  Tensor t = randn64({cols, rows}, seed, false).t().detach();
  t.requires_grad_();
  return t;
}

}  // namespace

TEST_CASE("cat and stack values") {
  Tensor a = randn64({2, 3}, 1, false), b = randn64({2, 2}, 2, false);
  Tensor c = cat({a, b}, -1);
  REQUIRE(c.shape() == Shape{2, 5});
  for (int64_t i = 0; i < 2; ++i)
    for (int64_t j = 0; j < 5; ++j) CHECK(c.at({i, j}) == (j < 3 ? a.at({i, j}) : b.at({i, j - 3})));

  Tensor at = a.t();  // non-contiguous input
  Tensor r = cat({at, b.t(), at}, 0);
  REQUIRE(r.shape() == Shape{8, 2});
  for (int64_t j = 0; j < 2; ++j) {
    CHECK(r.at({1, j}) == a.at({j, 1}));
    CHECK(r.at({4, j}) == b.at({j, 1}));
    CHECK(r.at({7, j}) == a.at({j, 2}));
  }
  CHECK(cat({a}, 0).to_vector() == a.to_vector());

  Tensor s = stack({a, a * 2.0, a * 3.0}, 1);
  REQUIRE(s.shape() == Shape{2, 3, 3});
  for (int64_t i = 0; i < 2; ++i)
    for (int64_t k = 0; k < 3; ++k)
      for (int64_t j = 0; j < 3; ++j) CHECK(s.at({i, k, j}) == doctest::Approx(a.at({i, j}) * (k + 1)));
  CHECK(stack({a, b.narrow(1, 0, 1).expand({2, 3})}, -1).shape() == Shape{2, 3, 2});
}

TEST_CASE("index_select values, strided input, repeated indices") {
  Tensor x = transposed_leaf(4, 3, 3).detach();  // (4, 3), strides (1, 4)
  Tensor idx = idx64({3, 0, 3, 1});
  Tensor r0 = index_select(x, 0, idx);
  REQUIRE(r0.shape() == Shape{4, 3});
  for (int64_t i = 0; i < 4; ++i)
    for (int64_t j = 0; j < 3; ++j) CHECK(r0.at({i, j}) == x.at({idx.to_vector_as<int64_t>()[i], j}));
  Tensor r1 = index_select(x, -1, idx64({2, 2}));
  REQUIRE(r1.shape() == Shape{4, 2});
  for (int64_t i = 0; i < 4; ++i) CHECK(r1.at({i, 1}) == x.at({i, 2}));

  Tensor xi = arange(12).view({3, 4});  // int64 values
  CHECK(index_select(xi, 1, idx64({3, 0})).to_vector() == std::vector<double>{3, 0, 7, 4, 11, 8});
  CHECK(index_select(xi, 0, idx64({}, {0})).shape() == Shape{0, 4});
}

TEST_CASE("index_add: many repeated indices accumulate, contiguous and strided paths") {
  // Large enough that the kernel splits the work over threads.
  const int64_t vocab = 300, d = 200, n = 4096;
  Generator gen(4);
  Tensor idx = randint(0, vocab, {n}, gen);
  Tensor src = randn({n, d}, gen, float64);
  std::vector<int64_t> iv = idx.to_vector_as<int64_t>();
  std::vector<double> sv = src.to_vector();

  Tensor out = zeros({vocab, d}, float64);  // rows: one long run per index (the embedding path)
  backend(Device::cpu()).index_add(out, 0, idx, src);
  std::vector<double> want(vocab * d, 0.0);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < d; ++j) want[iv[i] * d + j] += sv[i * d + j];
  CHECK(allclose(out, from_vector(want, {vocab, d}), 1e-9));

  Tensor out1 = zeros({d, vocab}, float64);  // along dim 1, from a transposed source: strided runs
  backend(Device::cpu()).index_add(out1, 1, idx, src.t());
  CHECK(allclose(out1, from_vector(want, {vocab, d}).t(), 1e-9));
}

TEST_CASE("gather and scatter_add values") {
  Tensor x = randn64({3, 4}, 5, false);
  Tensor idx = idx64({0, 2, 2, 1, 0, 0}, {2, 3});  // smaller than x off dim
  Tensor g1 = gather(x, 1, idx);
  REQUIRE(g1.shape() == Shape{2, 3});
  std::vector<int64_t> iv = idx.to_vector_as<int64_t>();
  for (int64_t i = 0; i < 2; ++i)
    for (int64_t j = 0; j < 3; ++j) {
      int64_t k = iv[i * 3 + j];
      CHECK(g1.at({i, j}) == x.at({i, k}));
      CHECK(gather(x, 0, idx).at({i, j}) == x.at({k, j}));
    }
  CHECK(gather(x.t(), 0, idx).at({1, 2}) == x.at({2, 0}));  // strided x: x.t()[idx[1][2]][2]

  Tensor src = randn64({2, 3}, 6, false);
  Tensor s = scatter_add(x, 0, idx, src);
  std::vector<double> want = x.to_vector();
  std::vector<double> sv = src.to_vector();
  for (int64_t i = 0; i < 2; ++i)
    for (int64_t j = 0; j < 3; ++j) want[iv[i * 3 + j] * 4 + j] += sv[i * 3 + j];
  CHECK(allclose(s, from_vector(want, {3, 4}), 1e-12));
  CHECK(x.to_vector() != s.to_vector());  // out of place: x untouched
  CHECK(allclose(x, randn64({3, 4}, 5, false), 0));
}

TEST_CASE("embedding values and accumulated gradient of repeated tokens") {
  Tensor w = randn64({5, 3}, 7);
  Tensor idx = idx64({1, 1, 4, 1}, {2, 2});
  Tensor e = embedding(w, idx);
  REQUIRE(e.shape() == Shape{2, 2, 3});
  for (int64_t j = 0; j < 3; ++j) {
    CHECK(e.at({0, 1, j}) == w.at({1, j}));
    CHECK(e.at({1, 0, j}) == w.at({4, j}));
  }
  sum(e).backward();
  std::vector<double> want(15, 0.0);
  for (int64_t j = 0; j < 3; ++j) {
    want[1 * 3 + j] = 3;  // token 1 appears three times
    want[4 * 3 + j] = 1;
  }
  CHECK(w.grad().to_vector() == want);
}

TEST_CASE("one_hot values") {
  Tensor idx = idx64({2, 0, 1, 2}, {2, 2});
  Tensor h = one_hot(idx, 3);
  REQUIRE(h.shape() == Shape{2, 2, 3});
  CHECK(h.dtype() == DType::Int64);
  CHECK(h.to_vector() == std::vector<double>{0, 0, 1, 1, 0, 0, 0, 1, 0, 0, 0, 1});
  Tensor f = one_hot(idx64({1}), 4, float32);
  CHECK(f.dtype() == DType::Float32);
  CHECK(f.to_vector() == std::vector<double>{0, 1, 0, 0});
  CHECK(one_hot(idx64({2, 1}).expand({3, 2}), 3).at({2, 0, 2}) == 1.0);  // strided index
}

TEST_CASE("joining and indexing errors name the op") {
  Tensor a = randn64({2, 3}, 20, false), x = randn64({5, 3}, 21, false);
  CHECK_THROWS_WITH_AS(cat({}, 0), doctest::Contains("[cat] expects a non-empty list"), linea::Error);
  CHECK_THROWS_WITH_AS(stack({}, 0), doctest::Contains("[stack]"), linea::Error);
  CHECK_THROWS_WITH_AS(cat({a, randn64({3, 3}, 22, false)}, 1), doctest::Contains("[cat]"), linea::Error);
  CHECK_THROWS_WITH_AS(cat({a, randn64({2, 3, 1}, 22, false)}, 0), doctest::Contains("[cat]"), linea::Error);
  CHECK_THROWS_WITH_AS(cat({a, a.to(float32)}, 0), doctest::Contains("[cat] tensor 1 is float32"), linea::Error);
  CHECK_THROWS_WITH_AS(cat({a, a}, 2), doctest::Contains("[cat]"), linea::Error);
  CHECK_THROWS_WITH_AS(cat({scalar(1.0)}, 0), doctest::Contains("[cat]"), linea::Error);
  CHECK_THROWS_WITH_AS(cat({a, Tensor()}, 0), doctest::Contains("[cat]"), linea::Error);
  CHECK_THROWS_WITH_AS(stack({a, a.t()}, 0), doctest::Contains("[stack]"), linea::Error);
  CHECK_THROWS_WITH_AS(stack({a, a.to(float32)}, 0), doctest::Contains("[stack]"), linea::Error);

  CHECK_THROWS_WITH_AS(index_select(x, 0, idx64({1, 7})),
                       doctest::Contains("[index_select] index 7 out of range for dim 0 of size 5"), linea::Error);
  CHECK_THROWS_WITH_AS(index_select(x, 1, idx64({-1})), doctest::Contains("[index_select] index -1"), linea::Error);
  CHECK_THROWS_WITH_AS(index_select(x, 0, from_vector<double>({1.0})), doctest::Contains("[index_select] index must "
                       "be int64"), linea::Error);
  CHECK_THROWS_WITH_AS(index_select(x, 0, idx64({1, 2}, {1, 2})), doctest::Contains("[index_select]"), linea::Error);
  CHECK_THROWS_WITH_AS(index_select(x, 2, idx64({0})), doctest::Contains("[index_select]"), linea::Error);
  CHECK_THROWS_WITH_AS(index_select(ones({3}, boolean), 0, idx64({0})), doctest::Contains("[index_select]"),
                       linea::Error);

  Tensor gi = idx64({0, 2, 2, 1, 0, 0}, {2, 3});
  CHECK_THROWS_WITH_AS(gather(x, 1, idx64({0, 3}, {1, 2})), doctest::Contains("[gather] index 3 out of range"),
                       linea::Error);
  CHECK_THROWS_WITH_AS(gather(x, 1, idx64({0, 1})), doctest::Contains("[gather]"), linea::Error);
  CHECK_THROWS_WITH_AS(gather(x, 0, gi.to(float64)), doctest::Contains("[gather]"), linea::Error);
  CHECK_THROWS_WITH_AS(gather(a, 0, idx64({0, 0, 0, 0}, {1, 4})), doctest::Contains("[gather]"), linea::Error);
  CHECK_THROWS_WITH_AS(scatter_add(x, 0, gi, randn64({3, 3}, 23, false)), doctest::Contains("[scatter_add]"),
                       linea::Error);
  CHECK_THROWS_WITH_AS(scatter_add(x, 0, gi, randn64({2, 3}, 23, false).to(float32)),
                       doctest::Contains("[scatter_add]"), linea::Error);
  CHECK_THROWS_WITH_AS(scatter_add(x, 1, idx64({0, 4, 2, 1, 0, 0}, {2, 3}), randn64({2, 3}, 23, false)),
                       doctest::Contains("[scatter_add] index 4 out of range for dim 1 of size 3"), linea::Error);

  CHECK_THROWS_WITH_AS(embedding(x, idx64({0, 5})), doctest::Contains("[embedding]"), linea::Error);
  CHECK_THROWS_WITH_AS(embedding(x, idx64({0, 5})), doctest::Contains("index 5 out of range"), linea::Error);
  CHECK_THROWS_WITH_AS(embedding(x.flatten(), idx64({0})), doctest::Contains("[embedding]"), linea::Error);
  CHECK_THROWS_WITH_AS(embedding(x, from_vector<double>({0.0})), doctest::Contains("[embedding]"), linea::Error);

  CHECK_THROWS_WITH_AS(one_hot(idx64({0, 3}), 3), doctest::Contains("[one_hot]"), linea::Error);
  CHECK_THROWS_WITH_AS(one_hot(idx64({-1}), 3), doctest::Contains("[one_hot]"), linea::Error);
  CHECK_THROWS_WITH_AS(one_hot(idx64({0}), 0), doctest::Contains("[one_hot]"), linea::Error);
  CHECK_THROWS_WITH_AS(one_hot(from_vector<double>({0.0}), 3), doctest::Contains("[one_hot]"), linea::Error);
}
