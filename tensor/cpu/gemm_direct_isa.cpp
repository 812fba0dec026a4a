// The direct gemm's kernel in this ISA's copy (isa_begin.h): gemm_direct_kernel.h's template over
// the ISA's vectors. AVX-512F: 16 lanes, a 6x64 tile of C in 24 zmm registers. AVX2 + FMA: 8 lanes,
// a 6x16 tile in 12 ymm (Zen 2/3 and Haswell-class CPUs). The generic copy has no kernel:
// gemm_direct.cpp takes it only where the ISA that runs has one.
#include <immintrin.h>

#include "linea/tensor/cpu/isa_begin.h"
#include "linea/tensor/cpu/gemm_direct_kernel.h"
#if defined(LINEA_ISA_AVX512) || defined(LINEA_ISA_AVX2)
#include "linea/tensor/cpu/transpose8x8.h"
#endif

// GCC 12's AVX-512 headers trip -Wmaybe-uninitialized on their own _mm512_undefined_*() (GCC bug 105593).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

namespace linea::cpu::inline LINEA_ISA_NS {

#if defined(LINEA_ISA_AVX512)
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

void gemm_direct_kernel(bool ta, bool tb, int64_t M, int64_t N, int64_t K, const float* a, int64_t lda,
                        const float* b, int64_t ldb, float* c, int64_t ldc, const float* r, int64_t ldr,
                        const float* bias, float* bp, double* a_sums) {
  direct_kernel::gemm<Vec512, 4>(ta, tb, M, N, K, a, lda, b, ldb, c, ldc, r, ldr, bias, bp, a_sums);
}
#elif defined(LINEA_ISA_AVX2)
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

void gemm_direct_kernel(bool ta, bool tb, int64_t M, int64_t N, int64_t K, const float* a, int64_t lda,
                        const float* b, int64_t ldb, float* c, int64_t ldc, const float* r, int64_t ldr,
                        const float* bias, float* bp, double* a_sums) {
  direct_kernel::gemm<Vec256, 2>(ta, tb, M, N, K, a, lda, b, ldb, c, ldc, r, ldr, bias, bp, a_sums);
}
#endif

}  // namespace linea::cpu::inline LINEA_ISA_NS

#include "linea/tensor/cpu/isa_end.h"
