// The attention lab's measurements (examples/data/attention_stats.h) on matrices whose answers are
// known: the rank of constructed low-rank matrices, the entropy of uniform and one-hot rows, and
// the rank bounds of linear attention and of MHLA with W = I (block-diagonal maps).
#include <cmath>

#include "data/attention_stats.h"
#include "helpers.h"

using namespace linea;
using namespace linea::data;
namespace F = linea::nn::functional;
using linea::testing::randn64;

TEST_CASE("singular_values: a diagonal and a rectangular matrix give their known values, largest first") {
  const std::vector<double> d = singular_values(from_vector(std::vector<double>{0, 0, 2, 0, 3, 0, 1e-9, 0, 0}, {3, 3}));
  REQUIRE(d.size() == 3);
  CHECK(d[0] == doctest::Approx(3).epsilon(1e-14));
  CHECK(d[1] == doctest::Approx(2).epsilon(1e-14));
  CHECK(d[2] == doctest::Approx(1e-9).epsilon(1e-6));
  // [[3, 0, 0], [0, 0, 4]] (2×3): singular values 4 and 3.
  const std::vector<double> r = singular_values(from_vector(std::vector<float>{3, 0, 0, 0, 0, 4}, {2, 3}));
  REQUIRE(r.size() == 2);
  CHECK(r[0] == doctest::Approx(4).epsilon(1e-6));
  CHECK(r[1] == doctest::Approx(3).epsilon(1e-6));
}

TEST_CASE("numerical_rank: U·Vᵀ of rank r, the identity, zero, and the threshold's cut") {
  for (int64_t r : {1, 3, 7}) {
    const Tensor a = matmul(randn64({20, r}, 10 + r, false), randn64({r, 24}, 20 + r, false));
    CHECK(numerical_rank(a, 1e-10) == r);
    CHECK(numerical_rank(a.transpose(0, 1), 1e-10) == r);  // non-contiguous view
  }
  CHECK(numerical_rank(eye(9, float64), 1e-10) == 9);
  CHECK(numerical_rank(zeros({4, 5}, float64), 1e-10) == 0);
  const Tensor diag = from_vector(std::vector<double>{1, 0, 0, 0, 1e-3, 0, 0, 0, 1e-9}, {3, 3});
  CHECK(numerical_rank(diag, 1e-6) == 2);
  CHECK(numerical_rank(diag, 1e-12) == 3);
  CHECK(numerical_rank(diag, 1e-2) == 1);
  CHECK_THROWS_WITH_AS(numerical_rank(diag, 1.5), doctest::Contains("[numerical_rank] rel_tol"), Error);
  CHECK_THROWS_WITH_AS(singular_values(zeros({2, 2, 2})), doctest::Contains("[singular_values] expected a 2-D"), Error);
  CHECK_THROWS_WITH_AS(singular_values(from_vector(std::vector<double>{NAN, 1, 1, 1}, {2, 2})),
                       doctest::Contains("[singular_values] LAPACK dgesdd failed"), Error);
}

TEST_CASE("entropy_ratio: uniform rows give 1, one-hot rows 0, half of four keys 1/2") {
  CHECK(entropy_ratio(full({6, 8}, 0.125, float64)) == doctest::Approx(1).epsilon(1e-12));
  CHECK(entropy_ratio(full({6, 8}, 3.0, float64)) == doctest::Approx(1).epsilon(1e-12));  // rows are normalised
  CHECK(entropy_ratio(eye(7, float64)) == doctest::Approx(0));
  // p = (1/2, 1/2, 0, 0): H = log 2 = log 4 / 2.
  CHECK(entropy_ratio(from_vector(std::vector<double>{1, 1, 0, 0, 0, 0, 2, 2}, {2, 4})) ==
        doctest::Approx(0.5).epsilon(1e-12));
  // A zero row has no distribution: skipped, not counted as 0 or 1.
  CHECK(entropy_ratio(from_vector(std::vector<double>{1, 1, 0, 0, 0, 0, 0, 0}, {2, 4})) ==
        doctest::Approx(0.5).epsilon(1e-12));
}

TEST_CASE("entropy_ratio, causal: row t over keys 0..t; uniform there gives 1, the diagonal 0") {
  const int64_t n = 9;
  Tensor lower = tril(ones({n, n}, float64));  // row t: t + 1 equal weights
  CHECK(entropy_ratio(lower, true) == doctest::Approx(1).epsilon(1e-12));
  CHECK(entropy_ratio(eye(n, float64), true) == doctest::Approx(0));
  // Read as non-causal, the same rows are not uniform over all n keys.
  CHECK(entropy_ratio(lower, false) < 0.9);
  CHECK_THROWS_WITH_AS(entropy_ratio(ones({3, 3}, float64), true), doctest::Contains("above the diagonal"), Error);
  CHECK_THROWS_WITH_AS(entropy_ratio(full({2, 2}, -1.0, float64)), doctest::Contains("must be >= 0"), Error);
  CHECK_THROWS_WITH_AS(entropy_ratio(zeros({3, 3}, float64)), doctest::Contains("no row"), Error);
  CHECK_THROWS_WITH_AS(entropy_ratio(ones({2, 3}, float64), true), doctest::Contains("must be square"), Error);
}

TEST_CASE("attention maps: linear attention has rank <= d; MHLA with W = I reaches Σ_b min(n_b, d)") {
  const int64_t N = 48, d = 5;
  const Tensor q = randn64({1, 1, N, d}, 1, false), k = randn64({1, 1, N, d}, 2, false);
  auto map = [&](F::AttentionKind kind, const Tensor& mix, int64_t block_len) {
    return F::attention_matrix(kind, q, k, mix, {.block_len = block_len}).select(0, 0).select(0, 0);
  };
  CHECK(numerical_rank(map(F::AttentionKind::Linear, Tensor(), 0), 1e-10) == d);
  CHECK(numerical_rank(map(F::AttentionKind::Softmax, Tensor(), 0), 1e-10) == N);
  // W = I keeps only the diagonal blocks φ(Q_b)φ(K_b)ᵀ, each of rank min(n_b, d).
  for (int64_t block_len : {3, 4, 6, 8, 16}) {
    const int64_t M = N / block_len;
    CAPTURE(block_len);
    CHECK(numerical_rank(map(F::AttentionKind::MHLA, eye(M, float64), block_len), 1e-10) ==
          M * std::min(block_len, d));
  }
}
