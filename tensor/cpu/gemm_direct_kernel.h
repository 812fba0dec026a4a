// The direct gemm's kernel, written once over a vector type (gemm_direct.h says what it does and
// why). Instantiated only by gemm_direct_isa.cpp, in its AVX-512 and AVX2 copies, each with a
// traits struct `Vec`:
//   Vec::reg  the register type; Vec::W its lanes; Vec::mask a lane mask for a row's tail
//   zero(), load(p), load(p, m), set1(x), fma(a, b, c), add(a, b), store(p, v), store(p, m, v)
//   tail_mask(n): the first n lanes (1 <= n <= W)
//   transpose8(src, lds, dst, ldd): dst[j*ldd + i] = src[i*lds + j] for i, j < 8
#pragma once
#ifndef LINEA_ISA_NS
#error "a kernel header: include linea/tensor/cpu/isa_begin.h first"
#endif
#include "linea/tensor/cpu/gemm_direct.h"

namespace linea::cpu::inline LINEA_ISA_NS::direct_kernel {

constexpr int MR = 6;         // a tile of C: up to 6 rows x NV vectors
constexpr int64_t KC = kDirectKc;  // the deepest block of B's rows (kc_max)
constexpr int64_t MC = 120;   // A's block: its rows (under 128 KB) stay in L2 across every column strip

// Rows in a block of B: a strip of them (kc x NR floats) stays in L1 for every tile, 32 KB on
// AVX-512 at 128 rows, 16 KB on AVX2 at 256, where the deeper block lets a K <= 256 product pass
// over C once instead of twice. A weight gradient (A transposed, K long) keeps 128, where it runs
// faster. Measured: docs/benchmarks.md, "The direct GEMM's tiles and blocks".
template <class Vec>
constexpr int64_t kc_max(bool ta) {
  return ta || Vec::W > 8 ? 128 : KC;
}

// What a tile prefetches while its k loop runs, one line per step k < n (`line<V, VB>(k)`, V the
// tile's vectors per row, VB a vector's bytes):
// - Ahead: a weight gradient's next block of K, p + 64·k, into L2 for reading (in gemm below);
// - NextC: the next tile of C, for writing, row k / V and vector k % V. The first store to a line
//   not in cache waits for it to be read in; fetched a tile ahead, it is there, and a product with
//   C out of cache runs about as fast as with C in cache (measured: docs/benchmarks.md, "The direct
//   GEMM's tiles and blocks");
// - NoAhead: nothing. The tiny products (MHLA's, attention's) take it, so that their loops carry
//   neither the test nor the argument.
struct Ahead {
  static constexpr bool prefetches = true;
  const char* p = nullptr;
  int64_t n = 0;
  template <int V, int VB>
  void line(int64_t k) const {
    __builtin_prefetch(p + 64 * k, 0, 2);
  }
};
struct NextC {
  static constexpr bool prefetches = true;
  char* p = nullptr;
  int64_t ld = 0;  // bytes between C's rows
  int64_t n = 0;
  template <int V, int VB>
  void line(int64_t k) const {
    __builtin_prefetch(p + k / V * ld + k % V * VB, 1, 3);
  }
};
struct NoAhead {
  static constexpr bool prefetches = false;
};

// C[0..R, 0..V·W] = Σ_k a(i, k)·b[k][j] over kc steps, plus r[i*ldr + j] where r is not null (r == c
// accumulates) and bias[j] where bias is not null, added to the sum as one value r + bias (the
// rounding of a start value written into C before the product). With a(i, k) at a[i*ai + k*ak].
// Unless Full, the lanes of the last vector past C's edge are masked off by `tail`. A full tile
// uses no masked loads or stores: on Zen 3 a masked store (vmaskmovps) is microcoded, and masking
// every tile's last vector slows the attention kernels' tiles (measured: docs/benchmarks.md, "The
// direct GEMM's tiles and blocks").
template <class Vec, int R, int V, bool Full, class P>
void tile(int64_t kc, const float* a, int64_t ai, int64_t ak, const float* b, int64_t ldb, float* c, int64_t ldc,
          const float* r, int64_t ldr, const float* bias, typename Vec::mask tail, P ahead) {
  using reg = typename Vec::reg;
  constexpr int W = Vec::W;
  auto load = [&](const float* p, int v) {
    return Full || v < V - 1 ? Vec::load(p + W * v) : Vec::load(p + W * v, tail);
  };
  reg acc[R][V];
#pragma GCC unroll 6
  for (int i = 0; i < R; ++i)
#pragma GCC unroll 4
    for (int v = 0; v < V; ++v) acc[i][v] = Vec::zero();
  for (int64_t k = 0; k < kc; ++k, a += ak, b += ldb) {
    if constexpr (P::prefetches)
      if (k < ahead.n) ahead.template line<V, W * 4>(k);
    reg bv[V];
#pragma GCC unroll 4
    for (int v = 0; v < V; ++v) bv[v] = load(b, v);
#pragma GCC unroll 6
    for (int i = 0; i < R; ++i) {
      const reg x = Vec::set1(a[i * ai]);
#pragma GCC unroll 4
      for (int v = 0; v < V; ++v) acc[i][v] = Vec::fma(x, bv[v], acc[i][v]);
    }
  }
  // One test per tile, not per vector: the tiny products of MHLA and attention (K = 4..16) spend a
  // good part of their time here (measured: docs/benchmarks.md, "Small kernel details").
  if (bias) {
    reg bias_v[V];
#pragma GCC unroll 4
    for (int v = 0; v < V; ++v) bias_v[v] = load(bias, v);
#pragma GCC unroll 6
    for (int i = 0; i < R; ++i)
#pragma GCC unroll 4
      for (int v = 0; v < V; ++v)
        acc[i][v] = Vec::add(acc[i][v], r ? Vec::add(load(r + i * ldr, v), bias_v[v]) : bias_v[v]);
  } else if (r) {
#pragma GCC unroll 6
    for (int i = 0; i < R; ++i)
#pragma GCC unroll 4
      for (int v = 0; v < V; ++v) acc[i][v] = Vec::add(acc[i][v], load(r + i * ldr, v));
  }
#pragma GCC unroll 6
  for (int i = 0; i < R; ++i, c += ldc)
#pragma GCC unroll 4
    for (int v = 0; v < V; ++v) {
      if (Full || v < V - 1) Vec::store(c + W * v, acc[i][v]);
      else Vec::store(c + W * v, tail, acc[i][v]);
    }
}

template <class Vec, int R, int V, bool Full, class P>
void tile_rows(int64_t mr, int64_t kc, const float* a, int64_t ai, int64_t ak, const float* b, int64_t ldb, float* c,
               int64_t ldc, const float* r, int64_t ldr, const float* bias, typename Vec::mask tail, P ahead) {
  if constexpr (R > 1)
    if (mr < R) return tile_rows<Vec, R - 1, V, Full>(mr, kc, a, ai, ak, b, ldb, c, ldc, r, ldr, bias, tail, ahead);
  tile<Vec, R, V, Full>(kc, a, ai, ak, b, ldb, c, ldc, r, ldr, bias, tail, ahead);
}

// tile<Vec, mr, v, full> for 1 <= mr <= MR and 1 <= v <= NV.
template <class Vec, int NV, class P>
void tile_any(int64_t mr, int64_t v, bool full, int64_t kc, const float* a, int64_t ai, int64_t ak, const float* b,
              int64_t ldb, float* c, int64_t ldc, const float* r, int64_t ldr, const float* bias,
              typename Vec::mask tail, P ahead) {
  if constexpr (NV > 1)
    if (v < NV) return tile_any<Vec, NV - 1>(mr, v, full, kc, a, ai, ak, b, ldb, c, ldc, r, ldr, bias, tail, ahead);
  if (full) tile_rows<Vec, MR, NV, true>(mr, kc, a, ai, ak, b, ldb, c, ldc, r, ldr, bias, tail, ahead);
  else tile_rows<Vec, MR, NV, false>(mr, kc, a, ai, ak, b, ldb, c, ldc, r, ldr, bias, tail, ahead);
}

// B's block (kc rows from its row pc) packed as column strips of NR: strip s holds b(k, s·NR + j)
// at bp[s·kc·NR + k·NR + j] for j < its width. A tile then reads its strip's rows 64 contiguous
// bytes apart: read in place, rows N floats apart (2 KB at N = 512) fell into a few L1 sets and
// were reloaded from L2 by every tile. A transposed b (b(k, j) at b[j*ldb + k]) is transposed
// into the strips in 8x8 register blocks, the edges one element at a time.
template <class Vec, int NV>
void pack_b(bool tb, const float* b, int64_t ldb, int64_t pc, int64_t kc, int64_t N, float* bp) {
  constexpr int64_t NR = int64_t(Vec::W) * NV;
  for (int64_t jc = 0; jc < N; jc += NR) {
    float* strip = bp + jc * kc;  // (jc / NR) · kc · NR
    const int64_t nr = N - jc < NR ? N - jc : NR;
    if (!tb) {
      for (int64_t k = 0; k < kc; ++k)
        for (int64_t j = 0; j < nr; ++j) strip[k * NR + j] = b[(pc + k) * ldb + jc + j];
      continue;
    }
    const int64_t n8 = nr / 8 * 8, k8 = kc / 8 * 8;
    for (int64_t j = 0; j < n8; j += 8) {
      for (int64_t k = 0; k < k8; k += 8)
        Vec::transpose8(b + (jc + j) * ldb + pc + k, ldb, strip + k * NR + j, NR);
      for (int64_t jj = j; jj < j + 8; ++jj)
        for (int64_t k = k8; k < kc; ++k) strip[k * NR + jj] = b[(jc + jj) * ldb + pc + k];
    }
    for (int64_t j = n8; j < nr; ++j)
      for (int64_t k = 0; k < kc; ++k) strip[k * NR + j] = b[(jc + j) * ldb + pc + k];
  }
}

// A non-transposed B is read in place below this many rows of A (too few tiles share a strip to pay
// for its copy: MHLA's 16-row block products) and for a weight gradient (A transposed), whose B
// is the long operand streamed once, and packing it does not pay (measured: docs/benchmarks.md,
// "The direct GEMM's tiles and blocks").
constexpr int64_t kPackRows = 64;

// c[M,N] = a[M,K]·b[K,N] + r + bias as in gemm_direct. `bp` is scratch for KC·(N + NR) floats. The
// first block of K adds r and the bias; the blocks after it add into c. With ta and `a_sums`, also
// a_sums[i] += Σ_k a(i, k) in double (as the CPU's sums accumulate), each block of a summed right
// after its tiles read it, while it is still in cache.
template <class Vec, int NV>
void gemm(bool ta, bool tb, int64_t M, int64_t N, int64_t K, const float* a, int64_t lda, const float* b,
          int64_t ldb, float* c, int64_t ldc, const float* r, int64_t ldr, const float* bias, float* bp,
          double* a_sums) {
  constexpr int64_t NR = int64_t(Vec::W) * NV;
  const int64_t ai = ta ? 1 : lda, ak = ta ? lda : 1;
  const bool pack = tb || (!ta && M >= kPackRows);
  const int64_t kb = kc_max<Vec>(ta);
  for (int64_t pc = 0; pc < K; pc += kb) {
    const int64_t kc = K - pc < kb ? K - pc : kb;
    const float *rb = pc ? c : r, *bias_b = pc ? nullptr : bias;
    const int64_t ldrb = pc ? ldc : ldr;
    if (pack) pack_b<Vec, NV>(tb, b, ldb, pc, kc, N, bp);
    // A weight gradient reads a's and b's rows in place, each block of K once, and the first tile
    // of a block waits on memory for all of them: its tiles prefetch the next block's rows (one
    // contiguous run of each operand) into L2, a line per step, while this one computes.
    const int64_t next = ta && lda == M && ldb == N && pc + kb < K ? (K - pc - kb < kb ? K - pc - kb : kb) : 0;
    const int64_t a_lines = (next * M * 4 + 63) / 64, b_lines = (next * N * 4 + 63) / 64;
    const char *a_next = next ? reinterpret_cast<const char*>(a + (pc + kb) * lda) : nullptr,
               *b_next = next ? reinterpret_cast<const char*>(b + (pc + kb) * ldb) : nullptr;
    int64_t line = 0;  // the next line to prefetch, a's lines first
    // C is written from scratch by the first block only; the blocks after it find it in cache.
    const bool prefetch_c = pc == 0 && K >= 64 && M * N >= 64 * 64;
    for (int64_t mc = 0; mc < M; mc += MC) {
      const int64_t m1 = M - mc < MC ? M : mc + MC;
      for (int64_t jc = 0; jc < N; jc += NR) {
        const int64_t nr = N - jc < NR ? N - jc : NR, v = (nr + Vec::W - 1) / Vec::W;
        const int lanes = int(nr - Vec::W * (v - 1));
        const typename Vec::mask tail = Vec::tail_mask(lanes);
        const float* bs = pack ? bp + jc * kc : b + pc * ldb + jc;
        const int64_t lds = pack ? NR : ldb;
        for (int64_t ic = mc; ic < m1; ic += MR) {
          const int64_t mr = m1 - ic < MR ? m1 - ic : MR;
          const float *at = a + ic * ai + pc * ak, *rt = rb ? rb + ic * ldrb + jc : nullptr;
          const float* bt = bias_b ? bias_b + jc : nullptr;
          if (line < a_lines + b_lines) {
            const Ahead ahead = line < a_lines
                                    ? Ahead{a_next + 64 * line, a_lines - line < kc ? a_lines - line : kc}
                                    : Ahead{b_next + 64 * (line - a_lines),
                                            a_lines + b_lines - line < kc ? a_lines + b_lines - line : kc};
            line += ahead.n;
            tile_any<Vec, NV>(mr, v, lanes == Vec::W, kc, at, ai, ak, bs, lds, c + ic * ldc + jc, ldc, rt, ldrb, bt, tail,
                              ahead);
          } else if (prefetch_c) {
            // The next tile: down this strip, else the top of the next strip (or of the next block
            // of rows), taken as wide as this one.
            const int64_t in = ic + MR < m1 ? ic + MR : (jc + NR < N ? mc : m1);
            const int64_t jn = ic + MR < m1 ? jc : (jc + NR < N ? jc + NR : 0);
            const int64_t rows = M - in < MR ? M - in : MR;
            const NextC next_c{reinterpret_cast<char*>(c + in * ldc + jn), ldc * 4, rows > 0 ? rows * v : 0};
            tile_any<Vec, NV>(mr, v, lanes == Vec::W, kc, at, ai, ak, bs, lds, c + ic * ldc + jc, ldc, rt, ldrb, bt, tail,
                              next_c);
          } else {
            tile_any<Vec, NV>(mr, v, lanes == Vec::W, kc, at, ai, ak, bs, lds, c + ic * ldc + jc, ldc, rt, ldrb, bt, tail,
                              NoAhead{});
          }
        }
      }
    }
    if (ta && a_sums) {  // a(i, k) = a[k*lda + i]: the block's rows are contiguous in i
      // Eight rows per pass over a_sums, added to each sum in row order (the same bits as one row
      // at a time): a pass per row would store and reload every sum (measured:
      // docs/benchmarks.md, "Small kernel details").
      int64_t k = pc;
      for (; k + 8 <= pc + kc; k += 8) {
        const float* ak = a + k * lda;
        for (int64_t i = 0; i < M; ++i) {
          double s = a_sums[i];
#pragma GCC unroll 8
          for (int64_t r = 0; r < 8; ++r) s += double(ak[r * lda + i]);
          a_sums[i] = s;
        }
      }
      for (; k < pc + kc; ++k)
        for (int64_t i = 0; i < M; ++i) a_sums[i] += double(a[k * lda + i]);
    }
  }
}

}  // namespace linea::cpu::inline LINEA_ISA_NS::direct_kernel
