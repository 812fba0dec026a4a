// float32 matmul under MatmulPrecision::BF16 on the CPU (tensor/cpu/gemm_bf16.h): the AVX512-BF16
// kernel and its fallback against a float64 product of the bf16-rounded operands, every layout and
// edge size of the blocking, and the op (which rounds products of at least kBf16MinProduct) and its
// gradients under AutocastGuard.
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "gemm_start.h"
#include "helpers.h"
#include "linea/tensor/cpu/gemm_bf16.h"

using namespace linea;
using linea::cpu::round_to_bf16;

namespace {

// Leading dimensions 3 past the row; multiples of 1/4096, so many values are exact in bf16 and
// many are not (and a few are exact ties).
struct Operand : testing::GemmOperand {
  Operand(bool t, int64_t r, int64_t c, uint32_t seed) : GemmOperand(t, r, c, seed, 3, 4096.0f) {}
};

// c = rounded(a)·rounded(b) in float64, and the bound sum_k |a_ik b_kj| for the tolerance.
void reference(const Operand& a, const Operand& b, std::vector<double>& c, std::vector<double>& mag, bool round) {
  const int64_t M = a.rows, K = a.cols, N = b.cols;
  c.assign(size_t(M * N), 0.0);
  mag.assign(size_t(M * N), 0.0);
  for (int64_t i = 0; i < M; ++i)
    for (int64_t k = 0; k < K; ++k) {
      const double x = round ? round_to_bf16(a.at(i, k)) : a.at(i, k);
      for (int64_t j = 0; j < N; ++j) {
        const double y = round ? round_to_bf16(b.at(k, j)) : b.at(k, j);
        c[i * N + j] += x * y;
        mag[i * N + j] += std::abs(x * y);
      }
    }
}

using Gemm = void (*)(bool, bool, int64_t, int64_t, int64_t, const float*, int64_t, const float*, int64_t, float*,
                      int64_t, const cpu::GemmAddend<float>&);

using Start = testing::GemmStart;

// Runs gemm on one shape and layout; checks it against the rounded reference to float32 summation
// error, and that it is *not* the unrounded product (the operands really were rounded).
void check_gemm(Gemm gemm, bool ta, bool tb, int64_t M, int64_t N, int64_t K, Start start = Start::None) {
  CAPTURE(int(start));
  CAPTURE(ta);
  CAPTURE(tb);
  CAPTURE(M);
  CAPTURE(N);
  CAPTURE(K);
  const Operand a(ta, M, K, uint32_t(M * 31 + K)), b(tb, K, N, uint32_t(N * 17 + K + 5));
  const int64_t ldc = N + 2;
  std::vector<float> c(size_t(M * ldc), 7.0f);  // the padding columns must stay 7
  const testing::GemmStartValues sv(start, M, N, c, ldc);
  gemm(ta, tb, M, N, K, a.v.data(), a.ld, b.v.data(), b.ld, c.data(), ldc, sv.addend(c.data(), ldc));
  std::vector<double> ref, mag, exact, exact_mag;
  reference(a, b, ref, mag, true);
  reference(a, b, exact, exact_mag, false);
  const double eps = std::numeric_limits<float>::epsilon();
  double worst = 0, off_exact = 0;
  for (int64_t i = 0; i < M; ++i) {
    for (int64_t j = 0; j < N; ++j) {
      const float s0 = sv.value(i, j);
      const double got = double(c[i * ldc + j]) - double(s0);
      const double tol = 2 * eps * std::sqrt(double(K)) * (mag[i * N + j] + std::abs(double(s0))) + 1e-30;
      worst = std::max(worst, std::abs(got - ref[i * N + j]) / tol);
      off_exact = std::max(off_exact, std::abs(got - exact[i * N + j]) / tol);
    }
    for (int64_t j = N; j < ldc; ++j) REQUIRE(c[i * ldc + j] == 7.0f);
    for (int64_t j = 0; j < N; ++j) REQUIRE(sv.r_unwritten(i, j));
  }
  CHECK(worst <= 1.0);
  if (M * N * K >= 64) CHECK(off_exact > 1.0);
}

void check_all_layouts(Gemm gemm) {
  // Sizes around the blocking: MR = 12 rows, NR = 32 columns, KC = 256 deep, MC = 120, NC = 512;
  // odd K pads a pair with zero.
  const int64_t ms[] = {1, 11, 12, 13, 121, 250};
  const int64_t ns[] = {1, 15, 16, 17, 33, 64, 530};
  const int64_t ks[] = {1, 2, 3, 31, 256, 257, 600};
  for (bool ta : {false, true})
    for (bool tb : {false, true})
      for (int64_t m : ms)
        for (int64_t n : ns)
          for (int64_t k : ks)
            if (m * n * k <= 4'000'000) check_gemm(gemm, ta, tb, m, n, k);
  // Every start, in one K block (K = 5) and added once across several (K = 257, 600), on row and
  // column tails.
  for (bool ta : {false, true})
    for (bool tb : {false, true})
      for (Start start : {Start::Accumulate, Start::Residual, Start::Bias, Start::ResidualBias})
        for (int64_t k : {5, 257, 600}) check_gemm(gemm, ta, tb, 13, 33, k, start);
}

Tensor randn32(Shape shape, uint64_t seed) {
  Generator g(seed);
  return randn(std::move(shape), g, DType::Float32);
}

// a·b in float64 from the bf16-rounded values of a and b (float32 tensors of any layout).
Tensor rounded_product(const Tensor& a, const Tensor& b) {
  auto round = [](const Tensor& t) {
    std::vector<double> v = t.to_vector();
    for (double& x : v) x = round_to_bf16(float(x));
    return from_vector(v, t.shape());
  };
  return matmul(round(a), round(b));
}

}  // namespace

TEST_CASE("round_to_bf16: nearest, ties to even, specials") {
  CHECK(round_to_bf16(1.0f) == 1.0f);
  CHECK(round_to_bf16(1.0f + 0x1p-8f) == 1.0f);                 // tie, 1.0 is even
  CHECK(round_to_bf16(1.0f + 3 * 0x1p-8f) == 1.0f + 0x1p-6f);   // tie, rounds up to even
  CHECK(round_to_bf16(1.0f + 0x1p-8f + 0x1p-20f) == 1.0f + 0x1p-7f);
  CHECK(round_to_bf16(-3.0f) == -3.0f);
  CHECK(std::isinf(round_to_bf16(std::numeric_limits<float>::max())));  // rounds past the largest bf16
  CHECK(std::isinf(round_to_bf16(std::numeric_limits<float>::infinity())));
  CHECK(std::isnan(round_to_bf16(std::numeric_limits<float>::quiet_NaN())));
  float snan;
  const uint32_t bits = 0x7f800001u;  // a NaN whose payload sits below bf16's mantissa
  std::memcpy(&snan, &bits, 4);
  CHECK(std::isnan(round_to_bf16(snan)));
}

TEST_CASE("gemm_bf16: the kernel (or its fallback here) against the rounded float64 product") {
  if (!cpu::has_bf16_kernel()) MESSAGE("this CPU has no AVX512-BF16: gemm_bf16 takes the fallback");
  check_all_layouts(&cpu::gemm_bf16);
}

TEST_CASE("gemm_bf16: the fallback (rounded copies + sgemm) against the rounded float64 product") {
  check_all_layouts(&cpu::gemm_bf16_rounded_sgemm);
}

TEST_CASE("matmul under AutocastGuard(BF16) on the CPU: rounded products, float32 otherwise") {
  // Every product here has at least kBf16MinProduct = 64^3 multiply-adds per matrix.
  const Tensor a = randn32({3, 90, 70}, 1), b = randn32({70, 50}, 2), w = randn32({50, 70}, 3);
  const Tensor bb = randn32({3, 70, 50}, 4);
  REQUIRE(90 * 70 * 50 >= cpu::kBf16MinProduct);
  Tensor full = matmul(a, b), bf;
  {
    AutocastGuard bf16;
    bf = matmul(a, b);
    // the layouts matmul passes: folded batch, transposed view, batched, batched transposed
    CHECK(linea::testing::allclose(bf, rounded_product(a, b), 1e-4, 1e-5));
    CHECK(linea::testing::allclose(matmul(a, w.t()), rounded_product(a, w.t()), 1e-4, 1e-5));
    CHECK(linea::testing::allclose(matmul(a, bb), rounded_product(a, bb), 1e-4, 1e-5));
    const Tensor at = a.transpose(1, 2).contiguous().transpose(1, 2);  // column-major matrices
    CHECK(linea::testing::allclose(matmul(at, bb), rounded_product(a, bb), 1e-4, 1e-5));
    CHECK(!linea::testing::allclose(bf, full, 1e-4, 1e-4));  // it did round
    // float64 never rounds
    const Tensor a64 = a.to(DType::Float64), b64 = b.to(DType::Float64);
    CHECK(linea::testing::allclose(matmul(a64, b64), full, 1e-4, 1e-5));
    // a weight gradient's layout with K much the longest side: split over K between threads (where
    // there are several), each thread's partial product rounded the same way; with a residual and
    // a bias through Backend::gemm, which thread 0 adds
    const Tensor g = randn32({4096, 40}, 7), x = randn32({4096, 48}, 8);
    const Tensor dw_ref = rounded_product(g.t(), x);
    CHECK(linea::testing::allclose(matmul(g.t(), x), dw_ref, 1e-4, 1e-3));
    const Tensor res = randn32({1, 40, 48}, 9), bias = randn32({48}, 10), out = empty({1, 40, 48});
    backend(Device::cpu()).gemm(g.t().unsqueeze(0), x.unsqueeze(0), out, bias, res);
    CHECK(linea::testing::allclose(out, dw_ref.unsqueeze(0) + res.to(DType::Float64) + bias.to(DType::Float64), 1e-4,
                                   1e-3));
    // products at most kBf16MinColumns wide stay float32: a patch embedding's weight gradient
    const Tensor x16 = randn32({4096, cpu::kBf16MinColumns}, 11);
    CHECK(linea::testing::allclose(matmul(g.t(), x16), matmul(g.t().to(DType::Float64), x16.to(DType::Float64)), 1e-5,
                                   1e-4));
    CHECK(!linea::testing::allclose(matmul(g.t(), x16), rounded_product(g.t(), x16), 1e-5, 1e-4));
    // products under kBf16MinProduct stay float32: MHLA's per-block matrices
    const Tensor qs = randn32({512, 16, 16}, 5), ss = randn32({512, 16, 17}, 6);
    CHECK(linea::testing::allclose(matmul(qs, ss), matmul(qs.to(DType::Float64), ss.to(DType::Float64)), 1e-4, 1e-5));
  }
  CHECK(matmul_precision() == MatmulPrecision::Highest);
  CHECK(linea::testing::allclose(matmul(a, b), full, 0, 0));  // back to float32, bit for bit
  CHECK(linea::testing::allclose(full, matmul(a.to(DType::Float64), b.to(DType::Float64)), 1e-4, 1e-5));
}

TEST_CASE("matmul under AutocastGuard(BF16): gradients close to float32's") {
  Tensor a = randn32({96, 80}, 5).requires_grad_(), b = randn32({80, 72}, 6).requires_grad_();
  auto grads = [&] {
    a.zero_grad();
    b.zero_grad();
    const Tensor y = matmul(a, b);
    sum(y * y).backward();
    return std::pair{a.grad(), b.grad()};
  };
  const auto [ga, gb] = grads();
  std::pair<Tensor, Tensor> g16;
  {
    AutocastGuard bf16;
    g16 = grads();
  }
  // Each bf16 operand is off by ~2^-9 relative (rms); through two products the gradients' relative
  // (Frobenius) error is a few 1e-3. Measured here: see the MESSAGE.
  auto rel = [](const Tensor& x, const Tensor& y) {
    auto vx = x.to_vector(), vy = y.to_vector();
    double d = 0, n = 0;
    for (size_t i = 0; i < vx.size(); ++i) d += (vx[i] - vy[i]) * (vx[i] - vy[i]), n += vy[i] * vy[i];
    return std::sqrt(d / n);
  };
  MESSAGE("relative gradient error under bf16: a " << rel(g16.first, ga) << ", b " << rel(g16.second, gb));
  CHECK(rel(g16.first, ga) < 1e-2);
  CHECK(rel(g16.second, gb) < 1e-2);
  CHECK(rel(g16.first, ga) > 1e-4);  // the products did round
}
