// The direct gemm's kernel, written once over a vector type (gemm_direct.h says what it does and
// why). Instantiated only by gemm_direct_avx512.cpp and gemm_direct_avx2.cpp (gemm_direct.cpp reads
// KC for the scratch size), each compiled for its own instruction set with a traits struct `Vec`:
//   Vec::reg  the register type; Vec::W its lanes; Vec::mask a lane mask for a row's tail
//   zero(), load(p), load(p, m), set1(x), fma(a, b, c), add(a, b), store(p, v), store(p, m, v)
//   tail_mask(n): the first n lanes (1 <= n <= W)
//   transpose8(src, lds, dst, ldd): dst[j*ldd + i] = src[i*lds + j] for i, j < 8
// Nothing else may be used here: a function from the standard library instantiated in one of those
// files could be emitted with its instructions and picked by the linker for the whole program.
#pragma once
#include <cstdint>

namespace linea::cpu::direct_kernel {

constexpr int MR = 6;         // a tile of C: up to 6 rows x NV vectors
constexpr int64_t KC = 128;   // B's block: 128 rows, so a block of B's rows stays in L1 for every tile
constexpr int64_t MC = 120;   // A's block: its rows (under 64 KB) stay in L2 across every column strip

// C[0..R, 0..V·W] (=, or += when accumulate) = Σ_k a(i, k)·b[k][j] over kc steps, with a(i, k)
// at a[i*ai + k*ak]. Unless Full, the lanes of the last vector past C's edge are masked off by
// `tail`. A full tile uses no masked loads or stores: on Zen 3 a masked store (vmaskmovps) is
// microcoded, and with every tile's last vector masked the attention kernels' 64x64x16 tiles ran
// 1.2x slower (session 15).
template <class Vec, int R, int V, bool Full>
void tile(int64_t kc, const float* a, int64_t ai, int64_t ak, const float* b, int64_t ldb, float* c, int64_t ldc,
          typename Vec::mask tail, bool accumulate) {
  using reg = typename Vec::reg;
  constexpr int W = Vec::W;
  reg acc[R][V];
#pragma GCC unroll 6
  for (int i = 0; i < R; ++i)
#pragma GCC unroll 4
    for (int v = 0; v < V; ++v) acc[i][v] = Vec::zero();
  for (int64_t k = 0; k < kc; ++k, a += ak, b += ldb) {
    reg bv[V];
#pragma GCC unroll 4
    for (int v = 0; v < V; ++v) bv[v] = Full || v < V - 1 ? Vec::load(b + W * v) : Vec::load(b + W * v, tail);
#pragma GCC unroll 6
    for (int i = 0; i < R; ++i) {
      const reg x = Vec::set1(a[i * ai]);
#pragma GCC unroll 4
      for (int v = 0; v < V; ++v) acc[i][v] = Vec::fma(x, bv[v], acc[i][v]);
    }
  }
#pragma GCC unroll 6
  for (int i = 0; i < R; ++i, c += ldc)
#pragma GCC unroll 4
    for (int v = 0; v < V; ++v) {
      if (Full || v < V - 1) {
        if (accumulate) acc[i][v] = Vec::add(acc[i][v], Vec::load(c + W * v));
        Vec::store(c + W * v, acc[i][v]);
      } else {
        if (accumulate) acc[i][v] = Vec::add(acc[i][v], Vec::load(c + W * v, tail));
        Vec::store(c + W * v, tail, acc[i][v]);
      }
    }
}

template <class Vec, int R, int V, bool Full>
void tile_rows(int64_t mr, int64_t kc, const float* a, int64_t ai, int64_t ak, const float* b, int64_t ldb, float* c,
               int64_t ldc, typename Vec::mask tail, bool accumulate) {
  if constexpr (R > 1)
    if (mr < R) return tile_rows<Vec, R - 1, V, Full>(mr, kc, a, ai, ak, b, ldb, c, ldc, tail, accumulate);
  tile<Vec, R, V, Full>(kc, a, ai, ak, b, ldb, c, ldc, tail, accumulate);
}

// tile<Vec, mr, v, full> for 1 <= mr <= MR and 1 <= v <= NV.
template <class Vec, int NV>
void tile_any(int64_t mr, int64_t v, bool full, int64_t kc, const float* a, int64_t ai, int64_t ak, const float* b,
              int64_t ldb, float* c, int64_t ldc, typename Vec::mask tail, bool accumulate) {
  if constexpr (NV > 1)
    if (v < NV) return tile_any<Vec, NV - 1>(mr, v, full, kc, a, ai, ak, b, ldb, c, ldc, tail, accumulate);
  if (full) tile_rows<Vec, MR, NV, true>(mr, kc, a, ai, ak, b, ldb, c, ldc, tail, accumulate);
  else tile_rows<Vec, MR, NV, false>(mr, kc, a, ai, ak, b, ldb, c, ldc, tail, accumulate);
}

// bt[k*N + j] = b(k, j) = b[j*ldb + k] for k < kc, j < N: 8x8 blocks in registers, the edges one
// element at a time.
template <class Vec>
void transpose_b(const float* b, int64_t ldb, int64_t kc, int64_t N, float* bt) {
  const int64_t n8 = N / 8 * 8, k8 = kc / 8 * 8;
  for (int64_t j = 0; j < n8; j += 8) {
    for (int64_t k = 0; k < k8; k += 8) Vec::transpose8(b + j * ldb + k, ldb, bt + k * N + j, N);
    for (int64_t jj = j; jj < j + 8; ++jj)
      for (int64_t k = k8; k < kc; ++k) bt[k * N + jj] = b[jj * ldb + k];
  }
  for (int64_t j = n8; j < N; ++j)
    for (int64_t k = 0; k < kc; ++k) bt[k * N + j] = b[j * ldb + k];
}

// c[M,N] (+)= a[M,K]·b[K,N] as in gemm_direct. `bt` is scratch for KC·N floats, used when tb.
template <class Vec, int NV>
void gemm(bool ta, bool tb, int64_t M, int64_t N, int64_t K, const float* a, int64_t lda, const float* b,
          int64_t ldb, float* c, int64_t ldc, bool accumulate, float* bt) {
  constexpr int64_t NR = int64_t(Vec::W) * NV;
  const int64_t ai = ta ? 1 : lda, ak = ta ? lda : 1;
  for (int64_t pc = 0; pc < K; pc += KC) {
    const int64_t kc = K - pc < KC ? K - pc : KC;
    const float* bb = b + pc * ldb;
    int64_t ldbb = ldb;
    if (tb) {  // b(k, j) at b[j*ldb + k]
      transpose_b<Vec>(b + pc, ldb, kc, N, bt);
      bb = bt;
      ldbb = N;
    }
    for (int64_t mc = 0; mc < M; mc += MC) {
      const int64_t m1 = M - mc < MC ? M : mc + MC;
      for (int64_t jc = 0; jc < N; jc += NR) {
        const int64_t nr = N - jc < NR ? N - jc : NR, v = (nr + Vec::W - 1) / Vec::W;
        const int lanes = int(nr - Vec::W * (v - 1));
        const typename Vec::mask tail = Vec::tail_mask(lanes);
        for (int64_t ic = mc; ic < m1; ic += MR) {
          const int64_t mr = m1 - ic < MR ? m1 - ic : MR;
          tile_any<Vec, NV>(mr, v, lanes == Vec::W, kc, a + ic * ai + pc * ak, ai, ak, bb + jc, ldbb,
                            c + ic * ldc + jc, ldc, tail, accumulate || pc > 0);
        }
      }
    }
  }
}

}  // namespace linea::cpu::direct_kernel
