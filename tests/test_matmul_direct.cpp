// The direct float32 gemm (tensor/cpu/gemm_direct.h) against a float64 product: every layout,
// every tile height (1-6 rows) and vector tail of its blocking, K across its blocks, padded leading
// dimensions, storing or adding to c, for each kernel the ISA that runs has (AVX2, and AVX-512
// where it runs); each ISA's policy of where matmul takes it; and matmul on such products.
#include <cmath>
#include <vector>

#include "gemm_start.h"
#include "helpers.h"
#include "linea/tensor/cpu/gemm_direct.h"
#include "linea/tensor/cpu_isa.h"

using namespace linea;

namespace {

// Leading dimensions 5 past the row; values in [-2.5, 2.5].
struct Operand : testing::GemmOperand {
  Operand(bool t, int64_t r, int64_t c, uint32_t seed) : GemmOperand(t, r, c, seed, 5, 4000.0f) {}
};

using Start = testing::GemmStart;

void check_direct(cpu::DirectIsa isa, bool ta, bool tb, int64_t M, int64_t N, int64_t K, Start start = Start::None) {
  CAPTURE(int(isa));
  CAPTURE(int(start));
  CAPTURE(ta);
  CAPTURE(tb);
  CAPTURE(M);
  CAPTURE(N);
  CAPTURE(K);
  const Operand a(ta, M, K, uint32_t(M * 131 + K)), b(tb, K, N, uint32_t(N * 71 + K + 1));
  const int64_t ldc = N + 2;  // C's padding must stay untouched
  std::vector<float> c(size_t(M * ldc), -7.0f);
  const testing::GemmStartValues sv(start, M, N, c, ldc);
  cpu::gemm_direct(ta, tb, M, N, K, a.v.data(), a.ld, b.v.data(), b.ld, c.data(), ldc, sv.addend(c.data(), ldc), isa);
  double worst = 0;
  for (int64_t i = 0; i < M; ++i) {
    for (int64_t j = 0; j < N; ++j) {
      double ref = double(sv.value(i, j)), mag = std::abs(ref);
      for (int64_t k = 0; k < K; ++k) {
        ref += double(a.at(i, k)) * double(b.at(k, j));
        mag += std::abs(double(a.at(i, k)) * double(b.at(k, j)));
      }
      // float32 sums: each partial sum rounds once, so |error| <= K * eps * sum |terms|.
      worst = std::max(worst, std::abs(double(c[i * ldc + j]) - ref) / (mag * double(K) * 6e-8 + 1e-30));
      REQUIRE(sv.r_unwritten(i, j));
    }
    for (int64_t j = N; j < ldc; ++j) REQUIRE(c[i * ldc + j] == -7.0f);
  }
  CHECK(worst <= 1.0);
}

}  // namespace

TEST_CASE("gemm_direct: every layout, tile height, vector tail and K block against float64") {
  if (!cpu::has_direct_gemm()) {
    MESSAGE("skipped: this CPU has neither AVX2 + FMA nor AVX-512F, so matmul never takes the direct kernel");
    return;
  }
  std::vector<cpu::DirectIsa> isas{cpu::DirectIsa::Avx2};
  if (cpu::direct_gemm_isa() == cpu::DirectIsa::Avx512) isas.push_back(cpu::DirectIsa::Avx512);
  else MESSAGE("this CPU has no AVX-512F: only the AVX2 kernel is checked");
  for (cpu::DirectIsa isa : isas)
    for (bool ta : {false, true})
      for (bool tb : {false, true}) {
        for (int64_t M : {1, 2, 3, 4, 5, 6, 7, 13}) check_direct(isa, ta, tb, M, 20, 9);
        for (int64_t N : {1, 7, 8, 9, 15, 16, 17, 33, 63, 64, 65, 130}) check_direct(isa, ta, tb, 8, N, 11);
        for (int64_t K : {1, 127, 128, 129, 255, 256, 257, 300, 600}) check_direct(isa, ta, tb, 7, 40, K);
        check_direct(isa, ta, tb, 64, 64, 1000);  // a weight gradient's shape, smaller K
        check_direct(isa, ta, tb, 16, 17, 16);    // an MHLA block product
        // Every start, across K blocks (the first adds it, the others add into c), with a masked and
        // with a full last vector.
        for (Start start : {Start::Accumulate, Start::Residual, Start::Bias, Start::ResidualBias})
          for (int64_t N : {17, 32})
            for (int64_t M : {1, 6, 13})
              for (int64_t K : {5, 129, 257}) check_direct(isa, ta, tb, M, N, K, start);
      }
}

TEST_CASE("gemm_direct: a kernel the ISA that runs does not have is refused, not executed") {
  const CpuIsaGuard avx2(CpuIsa::Avx2);  // at most AVX2, whatever the CPU
  float x = 1, y = 0;
  CHECK_THROWS_WITH_AS(cpu::gemm_direct(false, false, 1, 1, 1, &x, 1, &x, 1, &y, 1, {}, cpu::DirectIsa::Avx512),
                       doctest::Contains("[gemm_direct] the AVX-512 kernel does not run under cpu_isa() = "), Error);
  CHECK(y == 0);
}

TEST_CASE("gemm_direct: a's sums are refused unless a is read transposed") {
  if (!cpu::has_direct_gemm()) return;  // no kernel to ask
  float x = 1, y = 0;
  double sums = 0;
  const cpu::DirectIsa isa = cpu::direct_gemm_isa();
  CHECK_THROWS_WITH_AS(cpu::gemm_direct(false, false, 1, 1, 1, &x, 1, &x, 1, &y, 1, {}, isa, &sums),
                       doctest::Contains("transposed"), Error);
  CHECK(sums == 0);
}

// Each ISA's own policy (direct_gemm_pays: where its kernel was measured faster than OpenBLAS),
// asked under every ISA this CPU runs.
TEST_CASE("gemm_direct: each ISA's policy of where the direct kernel pays") {
  struct Case {
    bool ta, tb;
    int64_t M, N, K;
    bool avx2, avx512;  // the policy's answer under each kernel; generic has none
  };
  const Case cases[] = {
      {false, false, 1024, 1024, 1024, false, false},  // OpenBLAS's: N > 512
      // MHLA's untransposed block products: AVX2 (on AVX-512 OpenBLAS's small-matrix kernels are faster)
      {false, false, 16, 17, 16, true, false},
      {true, false, 48, 40, 512, false, true},  // a short weight gradient: AVX-512 only
      // Small products with B read transposed (attention's and MHLA's tiles); on AVX-512 not when A
      // has fewer than 16 rows and fewer rows than B has columns (B's copy shared by too few rows).
      {false, true, 16, 16, 16, true, true},
      {false, true, 16, 32, 32, true, true},
      {false, true, 4, 32, 32, true, false},
      // The ViT's layers, one thread's half: forward, input gradient, weight gradient's half of K.
      {false, true, 4096, 192, 64, true, true},
      {false, false, 4096, 64, 192, true, true},
      {true, false, 192, 64, 4096, true, true},
      // The char-GPT's MLP output, K = 512 on both; K = 1024 on AVX-512 only.
      {false, true, 384, 128, 512, true, true},
      {false, true, 384, 128, 1024, false, true},
      // Its wide layers (one thread's half of the rows) on both; its weight gradients (half of K)
      // on AVX-512 only.
      {false, true, 384, 512, 128, true, true},
      {false, false, 384, 512, 128, true, true},
      {true, false, 512, 128, 384, false, true},
      {true, false, 128, 512, 384, false, true},
      {false, true, 384, 1024, 128, false, false},
  };
  for (CpuIsa isa : {CpuIsa::Generic, CpuIsa::Avx2, CpuIsa::Avx512}) {
    if (isa > detected_cpu_isa()) continue;
    const CpuIsaGuard cap(isa);
    for (const Case& c : cases) {
      const bool expected = isa == CpuIsa::Avx512 ? c.avx512 : isa == CpuIsa::Avx2 ? c.avx2 : false;
      INFO(std::string(cpu_isa_name(isa)), ": ta ", c.ta, " tb ", c.tb, " [", c.M, ", ", c.N, ", ", c.K, "]");
      CHECK(cpu::direct_gemm_pays(c.ta, c.tb, c.M, c.N, c.K) == expected);
    }
  }
}

TEST_CASE("gemm_direct: matmul takes it where it pays and gets the float64 product") {
  Generator gen(3);
  // dW = dYᵀ·X for [512, 48] activations: a transposed A, K = 512.
  const Tensor dy = randn({512, 48}, gen), x = randn({512, 40}, gen);
  CHECK(testing::allclose(matmul(dy.t(), x).to(DType::Float64),
                          matmul(dy.to(DType::Float64).t(), x.to(DType::Float64)), 2e-4, 1e-5));
  // The char-GPT's MLP, [768, 128]·[512, 128]ᵀ and its weight gradient [768, 128]ᵀ·[768, 512]
  // (split over K where the direct kernel takes each thread's half).
  const Tensor h = randn({768, 128}, gen), w1 = randn({512, 128}, gen), g = randn({768, 512}, gen);
  CHECK(testing::allclose(matmul(h, w1.t()).to(DType::Float64),
                          matmul(h.to(DType::Float64), w1.to(DType::Float64).t()), 1e-4, 1e-4));
  CHECK(testing::allclose(matmul(h.t(), g).to(DType::Float64),
                          matmul(h.to(DType::Float64).t(), g.to(DType::Float64)), 1e-3, 1e-4));
  // A long weight gradient, [8192, 48]ᵀ·[8192, 40]: split over K between threads.
  const Tensor dy2 = randn({8192, 48}, gen), x2 = randn({8192, 40}, gen);
  CHECK(testing::allclose(matmul(dy2.t(), x2).to(DType::Float64),
                          matmul(dy2.to(DType::Float64).t(), x2.to(DType::Float64)), 1e-3, 1e-4));
  // The same as a linear layer's weight and bias gradients in one call: the column sums of g come
  // out of the product's pass over g (split over K); and through linear's backward.
  const Tensor dw = empty({48, 40}), dbias = empty({48});
  backend(Device::cpu()).linear_weight_grad(dy2, x2, dw, dbias);
  CHECK(testing::allclose(dw.to(DType::Float64), matmul(dy2.to(DType::Float64).t(), x2.to(DType::Float64)), 1e-3,
                          1e-4));
  CHECK(testing::allclose(dbias.to(DType::Float64), sum(dy2.to(DType::Float64), {0}), 1e-6, 1e-6));
  {
    const Tensor xl = x2.detach().requires_grad_(), wl = randn({48, 40}, gen).requires_grad_();
    const Tensor bl = randn({48}, gen).requires_grad_();
    sum(linear(xl, wl, bl) * dy2).backward();
    CHECK(testing::allclose(wl.grad().to(DType::Float64), matmul(dy2.to(DType::Float64).t(), x2.to(DType::Float64)),
                            1e-3, 1e-4));
    CHECK(testing::allclose(bl.grad().to(DType::Float64), sum(dy2.to(DType::Float64), {0}), 1e-6, 1e-6));
  }
  CHECK_THROWS_WITH_AS(backend(Device::cpu()).linear_weight_grad(dy2, x2, empty({40, 48}), dbias),
                       doctest::Contains("[linear_weight_grad] expected g [rows, out]"), Error);
  CHECK_THROWS_WITH_AS(backend(Device::cpu()).linear_weight_grad(dy2, x2, empty({48, 40}, DType::Float64), dbias),
                       doctest::Contains("[linear_weight_grad] dtype mismatch"), Error);
  const Tensor strided_x = randn({8192, 80}, gen).narrow(1, 0, 40);
  CHECK_THROWS_WITH_AS(backend(Device::cpu()).linear_weight_grad(dy2, strided_x, dw, dbias),
                       doctest::Contains("[linear_weight_grad] every operand must be contiguous"), Error);
  // A layer's forward with its bias, [2048, 64]·[96, 64]ᵀ + b: the bias fills c, the kernel adds.
  const Tensor xin = randn({2048, 64}, gen), w = randn({96, 64}, gen), bias = randn({96}, gen);
  CHECK(testing::allclose(linear(xin, w, bias).to(DType::Float64),
                          linear(xin.to(DType::Float64), w.to(DType::Float64), bias.to(DType::Float64)), 2e-4, 1e-5));
  // A batch of block products, [64, 16, 16] @ [64, 16, 17]: the batch loop calls it per matrix.
  const Tensor fq = randn({64, 16, 16}, gen), s = randn({64, 16, 17}, gen);
  CHECK(testing::allclose(matmul(fq, s).to(DType::Float64), matmul(fq.to(DType::Float64), s.to(DType::Float64)),
                          2e-4, 1e-5));
}
