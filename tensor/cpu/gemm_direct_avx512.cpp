// The direct gemm on AVX-512F: 16 lanes, a 6x64 tile of C in 24 zmm registers. This file alone is
// compiled with -mavx512f (CMakeLists.txt); gemm_direct.cpp calls it only where the CPU has it.
#include <immintrin.h>

#include "linea/tensor/cpu/gemm_direct_kernel.h"
#include "linea/tensor/cpu/transpose8x8.h"

// GCC 12's AVX-512 headers trip -Wmaybe-uninitialized on their own _mm512_undefined_*() (GCC bug 105593).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

namespace linea::cpu {

namespace {
struct Vec512 {
  using reg = __m512;
  using mask = __mmask16;
  static constexpr int W = 16;
  static reg zero() { return _mm512_setzero_ps(); }
  static reg load(const float* p) { return _mm512_loadu_ps(p); }
  static reg load(const float* p, mask m) { return _mm512_maskz_loadu_ps(m, p); }
  static reg set1(float x) { return _mm512_set1_ps(x); }
  static reg fma(reg a, reg b, reg c) { return _mm512_fmadd_ps(a, b, c); }
  static reg add(reg a, reg b) { return _mm512_add_ps(a, b); }
  static void store(float* p, reg v) { _mm512_storeu_ps(p, v); }
  static void store(float* p, mask m, reg v) { _mm512_mask_storeu_ps(p, m, v); }
  static mask tail_mask(int n) { return n == 16 ? mask(0xFFFF) : mask((1u << n) - 1); }
  static void transpose8(const float* s, int64_t lds, float* d, int64_t ldd) { transpose8x8(s, lds, d, ldd); }
};
}  // namespace

void gemm_direct_avx512(bool ta, bool tb, int64_t M, int64_t N, int64_t K, const float* a, int64_t lda,
                        const float* b, int64_t ldb, float* c, int64_t ldc, const float* r, int64_t ldr,
                        const float* bias, float* bp, double* a_sums) {
  direct_kernel::gemm<Vec512, 4>(ta, tb, M, N, K, a, lda, b, ldb, c, ldc, r, ldr, bias, bp, a_sums);
}

}  // namespace linea::cpu
