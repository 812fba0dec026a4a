// The direct gemm on AVX2 + FMA: 8 lanes, a 6x16 tile of C in 12 ymm registers (Zen 2/3 and
// Haswell-class CPUs). This file alone is compiled with -mavx2 -mfma (CMakeLists.txt);
// gemm_direct.cpp calls it only where the CPU has both.
#include <immintrin.h>

#include "linea/tensor/cpu/gemm_direct_kernel.h"
#include "linea/tensor/cpu/transpose8x8.h"

namespace linea::cpu {

namespace {
struct Vec256 {
  using reg = __m256;
  using mask = __m256i;  // lane i on when its sign bit is set (vmaskmovps)
  static constexpr int W = 8;
  static reg zero() { return _mm256_setzero_ps(); }
  static reg load(const float* p) { return _mm256_loadu_ps(p); }
  static reg load(const float* p, mask m) { return _mm256_maskload_ps(p, m); }
  static reg set1(float x) { return _mm256_set1_ps(x); }
  static reg fma(reg a, reg b, reg c) { return _mm256_fmadd_ps(a, b, c); }
  static reg add(reg a, reg b) { return _mm256_add_ps(a, b); }
  static void store(float* p, reg v) { _mm256_storeu_ps(p, v); }
  static void store(float* p, mask m, reg v) { _mm256_maskstore_ps(p, m, v); }
  static mask tail_mask(int n) {  // lanes 0..n-1: n > lane index
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  }
  static void transpose8(const float* s, int64_t lds, float* d, int64_t ldd) { transpose8x8(s, lds, d, ldd); }
};
}  // namespace

void gemm_direct_avx2(bool ta, bool tb, int64_t M, int64_t N, int64_t K, const float* a, int64_t lda,
                      const float* b, int64_t ldb, float* c, int64_t ldc, const float* r, int64_t ldr,
                      const float* bias, float* bp, double* a_sums) {
  direct_kernel::gemm<Vec256, 2>(ta, tb, M, N, K, a, lda, b, ldb, c, ldc, r, ldr, bias, bp, a_sums);
}

}  // namespace linea::cpu
