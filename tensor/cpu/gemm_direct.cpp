// The direct float32 gemm (gemm_direct.h): C in registers, A broadcast from where it lies, B's
// rows loaded in place. Blocked over K only, so that a block of B's rows stays in L1 while every
// tile of C's rows walks it.
#include "linea/tensor/cpu/gemm_direct.h"

#include <immintrin.h>

#include <algorithm>
#include <array>
#include <vector>

// GCC 12's AVX-512 headers trip -Wmaybe-uninitialized on their own _mm512_undefined_*() (GCC bug 105593).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

#define LINEA_DIRECT_TARGET __attribute__((target("avx512f")))

namespace linea::cpu {

namespace {

constexpr int MR = 6, NV = 4;  // a tile of C: up to 6 rows x 4 zmm (64 columns), 24 accumulators
constexpr int64_t NR = 16 * NV;
constexpr int64_t KC = 128;  // B's block: 128 rows x 64 columns = 32 KB

// C[0..R, 0..16V] (=, or += when accumulate) = Σ_k a(i, k)·b[k][j] over kc steps, with a(i, k)
// at a[i*ai + k*ak]. The lanes of the last vector past C's edge are masked off by `tail`.
template <int R, int V>
LINEA_DIRECT_TARGET void tile(int64_t kc, const float* a, int64_t ai, int64_t ak, const float* b, int64_t ldb,
                              float* c, int64_t ldc, __mmask16 tail, bool accumulate) {
  __m512 acc[R][V];
#pragma GCC unroll 6
  for (int i = 0; i < R; ++i)
#pragma GCC unroll 4
    for (int v = 0; v < V; ++v) acc[i][v] = _mm512_setzero_ps();
  for (int64_t k = 0; k < kc; ++k, a += ak, b += ldb) {
    __m512 bv[V];
#pragma GCC unroll 4
    for (int v = 0; v < V; ++v)
      bv[v] = v == V - 1 ? _mm512_maskz_loadu_ps(tail, b + 16 * v) : _mm512_loadu_ps(b + 16 * v);
#pragma GCC unroll 6
    for (int i = 0; i < R; ++i) {
      const __m512 x = _mm512_set1_ps(a[i * ai]);
#pragma GCC unroll 4
      for (int v = 0; v < V; ++v) acc[i][v] = _mm512_fmadd_ps(x, bv[v], acc[i][v]);
    }
  }
#pragma GCC unroll 6
  for (int i = 0; i < R; ++i, c += ldc)
#pragma GCC unroll 4
    for (int v = 0; v < V; ++v) {
      const __mmask16 m = v == V - 1 ? tail : __mmask16(0xFFFF);
      if (accumulate) acc[i][v] = _mm512_add_ps(acc[i][v], _mm512_maskz_loadu_ps(m, c + 16 * v));
      _mm512_mask_storeu_ps(c + 16 * v, m, acc[i][v]);
    }
}

using TileFn = void (*)(int64_t, const float*, int64_t, int64_t, const float*, int64_t, float*, int64_t, __mmask16,
                        bool);

template <int R>
constexpr std::array<TileFn, NV> row_of_tiles() {
  return {tile<R, 1>, tile<R, 2>, tile<R, 3>, tile<R, 4>};
}

// kTiles[R - 1][V - 1] = tile<R, V>
constexpr std::array<std::array<TileFn, NV>, MR> kTiles = {row_of_tiles<1>(), row_of_tiles<2>(), row_of_tiles<3>(),
                                                           row_of_tiles<4>(), row_of_tiles<5>(), row_of_tiles<6>()};

}  // namespace

bool has_direct_gemm() {
  static const bool yes = __builtin_cpu_supports("avx512f");
  return yes;
}

// Measured at one thread against cblas_sgemm on the same operands: 1.15-1.45x OpenBLAS on the models'
// weight gradients and 1.1-1.4x on their [8192, C] x [C, N] products up to N = 256; slower from
// N = 512 (C's tile row outgrows what one pass over A pays for) and on tiny products whose
// transposed operand costs more to copy or broadcast than the product itself.
bool direct_gemm_pays(bool ta, bool tb, int64_t M, int64_t N, int64_t K) {
  if (!has_direct_gemm() || N > 256) return false;
  if (tb) return M >= 512;             // the copy of B's block is shared by many rows
  if (ta) return K >= 256 && M <= 256;  // weight gradients: a small output, a long K
  return true;
}

void gemm_direct(bool ta, bool tb, int64_t M, int64_t N, int64_t K, const float* a, int64_t lda, const float* b,
                 int64_t ldb, float* c, int64_t ldc) {
  thread_local std::vector<float> bt;  // a transposed b's block, row-major; kept, so no allocation per call
  const int64_t ai = ta ? 1 : lda, ak = ta ? lda : 1;
  for (int64_t pc = 0; pc < K; pc += KC) {
    const int64_t kc = std::min(KC, K - pc);
    const float* bb = b + pc * ldb;
    int64_t ldbb = ldb;
    if (tb) {  // b(k, j) at b[j*ldb + k]
      bt.resize(std::max(bt.size(), size_t(kc * N)));
      for (int64_t j = 0; j < N; ++j)
        for (int64_t k = 0; k < kc; ++k) bt[k * N + j] = b[j * ldb + pc + k];
      bb = bt.data();
      ldbb = N;
    }
    for (int64_t jc = 0; jc < N; jc += NR) {
      const int64_t nr = std::min(NR, N - jc), v = (nr + 15) / 16, last = nr - 16 * (v - 1);
      const __mmask16 tail = last == 16 ? __mmask16(0xFFFF) : __mmask16((1u << last) - 1);
      for (int64_t ic = 0; ic < M; ic += MR) {
        const int64_t mr = std::min<int64_t>(MR, M - ic);
        kTiles[mr - 1][v - 1](kc, a + ic * ai + pc * ak, ai, ak, bb + jc, ldbb, c + ic * ldc + jc, ldc, tail, pc > 0);
      }
    }
  }
}

}  // namespace linea::cpu
