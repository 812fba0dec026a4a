// bf16 gemm on AVX512-BF16, blocked like BLIS: for each KC-deep slab, B is packed once into
// NR-wide panels and A into MR-tall slivers, both as bf16 pairs; a 12x32 micro-kernel keeps its
// tile of C in 24 zmm registers while it walks the slab.
//
// vdpbf16ps multiplies bf16 *pairs*: lane j of the result gains a[2p]*b[2p][j] + a[2p+1]*b[2p+1][j].
// So the packed layouts hold, for each pair index p, a 32-bit word (k = 2p in the low half, 2p+1 in
// the high half; an odd K is padded with a zero): B as [panel][p][NR] (two zmm loads per p) and A,
// one word broadcast per row, as [sliver][row][KC/2] where A's rows are contiguous in k (each row
// converted with whole-vector loads and stores), else as [sliver][p][MR] (16 rows of one k pair
// interleaved at a time).
#include "linea/tensor/cpu/gemm_bf16.h"

#include <immintrin.h>

#include <algorithm>
#include <bit>
#include <vector>

#include "linea/tensor/cpu/blas.h"
#include "linea/tensor/cpu_isa.h"

// GCC 12's AVX-512 headers trip -Wmaybe-uninitialized on their own _mm512_undefined_*() (GCC bug 105593).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

#define LINEA_BF16_TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16")))

namespace linea::cpu {

namespace {

constexpr int MR = 12, NR = 32;
// L1 holds one B panel (KC/2 * NR words = 16 KB) and an A sliver (6 KB); L2 the packed blocks.
constexpr int64_t KC = 256, MC = 10 * MR, NC = 16 * NR, KP = KC / 2;

// x rounded to bf16, as the high half of a float32's bits. Branch-free, so rounding loops vectorise.
inline uint32_t bf16_high_bits(float x) {
  const uint32_t u = std::bit_cast<uint32_t>(x);
  const bool nan = (u & 0x7fffffffu) > 0x7f800000u;
  // NaN stays a quiet NaN; else round to nearest, ties to even
  return (nan ? u | 0x00400000u : u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u;
}

inline float rounded(float x) { return std::bit_cast<float>(bf16_high_bits(x)); }

// dst[q * stride] = the pair (src[2q], src[2q+1]) for the (n+1)/2 pairs of n contiguous floats.
LINEA_BF16_TARGET void pairs_strided(const float* src, int64_t n, uint32_t* dst, int64_t stride) {
  alignas(64) uint32_t w[16];
  for (int64_t k = 0; k < n; k += 32) {
    const int64_t left = std::min<int64_t>(32, n - k);
    const __mmask16 m0 = left >= 16 ? 0xFFFF : __mmask16((1u << left) - 1);
    const __mmask16 m1 = left <= 16 ? 0 : left >= 32 ? 0xFFFF : __mmask16((1u << (left - 16)) - 1);
    const __m512 lo = _mm512_maskz_loadu_ps(m0, src + k), hi = _mm512_maskz_loadu_ps(m1, src + k + 16);
    _mm512_store_si512(w, (__m512i)_mm512_cvtne2ps_pbh(hi, lo));  // 32 bf16 in order = 16 pairs
    for (int64_t q = 0; q < (left + 1) / 2; ++q) dst[(k / 2 + q) * stride] = w[q];
  }
}

// dst[r] = the pair (lo[r], hi[r]) for r < len (hi == nullptr: zeros), then zeros up to width ≤ 16.
LINEA_BF16_TARGET void pairs_interleaved(const float* lo, const float* hi, int len, uint32_t* dst, int width) {
  const __mmask16 m = len >= 16 ? 0xFFFF : __mmask16((1u << len) - 1);
  const __m256i l = (__m256i)_mm512_cvtneps_pbh(_mm512_maskz_loadu_ps(m, lo));
  const __m256i h = hi ? (__m256i)_mm512_cvtneps_pbh(_mm512_maskz_loadu_ps(m, hi)) : _mm256_setzero_si256();
  const __m512i w = _mm512_or_si512(_mm512_cvtepu16_epi32(l), _mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
  _mm512_mask_storeu_epi32(dst, width >= 16 ? 0xFFFF : __mmask16((1u << width) - 1), w);
}

// dst[q] = the pair (src[2q], src[2q+1]) for the (n+1)/2 pairs of n contiguous floats.
LINEA_BF16_TARGET void pairs_contiguous(const float* src, int64_t n, uint32_t* dst) {
  for (int64_t k = 0; k < n; k += 32) {
    const int64_t left = std::min<int64_t>(32, n - k), words = (left + 1) / 2;
    const __mmask16 m0 = left >= 16 ? 0xFFFF : __mmask16((1u << left) - 1);
    const __mmask16 m1 = left <= 16 ? 0 : left >= 32 ? 0xFFFF : __mmask16((1u << (left - 16)) - 1);
    const __m512 lo = _mm512_maskz_loadu_ps(m0, src + k), hi = _mm512_maskz_loadu_ps(m1, src + k + 16);
    _mm512_mask_storeu_epi32(dst + k / 2, words >= 16 ? 0xFFFF : __mmask16((1u << words) - 1),
                             (__m512i)_mm512_cvtne2ps_pbh(hi, lo));
  }
}

// Rows i0 .. i0+n (n <= MR), depth k0 .. k0+kc of a row-major A (element (i, k) at x[i*ld + k]) into
// one sliver [MR][KP]; rows past n are zero.
LINEA_BF16_TARGET void pack_a_rows(const float* x, int64_t ld, int64_t i0, int64_t n, int64_t k0, int64_t kc,
                                   uint32_t* dst) {
  const int64_t kp = (kc + 1) / 2;
  for (int64_t r = 0; r < MR; ++r, dst += KP)
    if (r < n) pairs_contiguous(x + (i0 + r) * ld + k0, kc, dst);
    else std::fill(dst, dst + kp, 0u);
}

// Rows i0 .. i0+n, depth k0 .. k0+kc of an operand into W-wide strips, [strip][p][W] (A's slivers:
// W = MR, B's panels: W = NR); rows past n are zero. Element (i, k) is at x[i*ld + k] when
// k_contiguous, else at x[k*ld + i].
template <int W>
LINEA_BF16_TARGET void pack(bool k_contiguous, const float* x, int64_t ld, int64_t i0, int64_t n, int64_t k0,
                            int64_t kc, uint32_t* dst) {
  const int64_t kp = (kc + 1) / 2;
  for (int64_t s = 0; s * W < n; ++s, dst += kp * W) {
    const int rows = int(std::min<int64_t>(W, n - s * W));
    const int64_t i = i0 + s * W;
    if (k_contiguous) {
      for (int r = 0; r < rows; ++r) pairs_strided(x + (i + r) * ld + k0, kc, dst + r, W);
      for (int r = rows; r < W; ++r)
        for (int64_t p = 0; p < kp; ++p) dst[p * W + r] = 0;
    } else {
      for (int64_t p = 0; p < kp; ++p) {
        const float* lo = x + (k0 + 2 * p) * ld + i;
        const float* hi = 2 * p + 1 < kc ? lo + ld : nullptr;
        for (int c = 0; c < W; c += 16)
          pairs_interleaved(lo + c, hi ? hi + c : nullptr, std::clamp(rows - c, 0, 16), dst + p * W + c,
                            std::min(16, W - c));
      }
    }
  }
}

// C[0..mr, 0..nr] = the product of one A sliver and one B panel, plus r (rows ldr apart; r = C
// accumulates) and the bias row where not null, added as the one value r + bias as in gemm_direct.
// The sliver's word (row i, pair p) is at A[i*AR + p*AP]: AR = KP, AP = 1 or AR = 1, AP = MR (see
// above). The stores are unrolled over all MR rows (each under i < mr), so that the accumulators
// stay in registers: with a loop to mr GCC stored all 24 to the stack first.
// While it runs, the kernel fetches for writing the first `ahead` lines of the next tile of C, two
// per row (row p / 2, half p % 2), as gemm_direct's tiles do (NextC in gemm_direct_kernel.h).
template <int AR, int AP>
LINEA_BF16_TARGET void micro_kernel(int64_t kp, const uint32_t* A, const uint32_t* B, float* C, int64_t ldc, int mr,
                                    int nr, const float* r, int64_t ldr, const float* bias, const char* next_c,
                                    int64_t ahead) {
  __m512 c0[MR], c1[MR];
#pragma GCC unroll 12
  for (int i = 0; i < MR; ++i) c0[i] = c1[i] = _mm512_setzero_ps();
  for (int64_t p = 0; p < kp; ++p, A += AP, B += NR) {
    if (p < ahead) __builtin_prefetch(next_c + p / 2 * ldc * 4 + p % 2 * 64, 1, 3);
    const __m512bh b0 = (__m512bh)_mm512_loadu_si512(B), b1 = (__m512bh)_mm512_loadu_si512(B + 16);
#pragma GCC unroll 12
    for (int i = 0; i < MR; ++i) {
      const __m512bh ai = (__m512bh)_mm512_set1_epi32(int(A[i * AR]));
      c0[i] = _mm512_dpbf16_ps(c0[i], ai, b0);
      c1[i] = _mm512_dpbf16_ps(c1[i], ai, b1);
    }
  }
  const __mmask16 m0 = nr >= 16 ? 0xFFFF : __mmask16((1u << nr) - 1);
  const __mmask16 m1 = nr <= 16 ? 0 : nr >= 32 ? 0xFFFF : __mmask16((1u << (nr - 16)) - 1);
  const __m512 bias0 = bias ? _mm512_maskz_loadu_ps(m0, bias) : _mm512_setzero_ps();
  const __m512 bias1 = bias ? _mm512_maskz_loadu_ps(m1, bias + 16) : _mm512_setzero_ps();
#pragma GCC unroll 12
  for (int i = 0; i < MR; ++i) {
    if (i >= mr) break;
    float* ci = C + i * ldc;
    if (r) {
      __m512 x0 = _mm512_maskz_loadu_ps(m0, r + i * ldr), x1 = _mm512_maskz_loadu_ps(m1, r + i * ldr + 16);
      if (bias) x0 = _mm512_add_ps(x0, bias0), x1 = _mm512_add_ps(x1, bias1);
      c0[i] = _mm512_add_ps(c0[i], x0), c1[i] = _mm512_add_ps(c1[i], x1);
    } else if (bias) {
      c0[i] = _mm512_add_ps(c0[i], bias0), c1[i] = _mm512_add_ps(c1[i], bias1);
    }
    _mm512_mask_storeu_ps(ci, m0, c0[i]);
    _mm512_mask_storeu_ps(ci + 16, m1, c1[i]);
  }
}

// The first block of K adds the addend; the blocks after it add into c.
void gemm_bf16_kernel(bool ta, bool tb, int64_t M, int64_t N, int64_t K, const float* a, int64_t lda, const float* b,
                      int64_t ldb, float* c, int64_t ldc, const GemmAddend<float>& add) {
  // Per thread and kept: after the first products of a given size, no allocation.
  thread_local std::vector<uint32_t> apack, bpack;
  apack.resize(std::max<size_t>(apack.size(), size_t(MC * KP)));
  bpack.resize(std::max<size_t>(bpack.size(), size_t(NC * KC / 2)));
  for (int64_t jc = 0; jc < N; jc += NC) {
    const int64_t nc = std::min(NC, N - jc);
    for (int64_t pc = 0; pc < K; pc += KC) {
      const int64_t kc = std::min(KC, K - pc), kp = (kc + 1) / 2;
      const float *r = pc ? c : add.r, *bias = pc ? nullptr : add.bias;
      const int64_t ldr = pc ? ldc : add.ldr;
      pack<NR>(tb, b, ldb, jc, nc, pc, kc, bpack.data());  // B's column j is row j of the strips
      for (int64_t ic = 0; ic < M; ic += MC) {
        const int64_t mc = std::min(MC, M - ic);
        if (ta) pack<MR>(false, a, lda, ic, mc, pc, kc, apack.data());
        else
          for (int64_t s = 0; s * MR < mc; ++s)
            pack_a_rows(a, lda, ic + s * MR, std::min<int64_t>(MR, mc - s * MR), pc, kc, apack.data() + s * MR * KP);
        for (int64_t t = 0; t * NR < nc; ++t)
          for (int64_t s = 0; s * MR < mc; ++s) {
            const int64_t i = ic + s * MR, j = jc + t * NR;
            const uint32_t* bt = bpack.data() + t * kp * NR;
            const int mr = int(std::min<int64_t>(MR, mc - s * MR)), nr = int(std::min<int64_t>(NR, nc - t * NR));
            const float *rt = r ? r + i * ldr + j : nullptr, *bias_t = bias ? bias + j : nullptr;
            // C is written from scratch by the first block of K: the next tile down this panel, else
            // the top of the next panel.
            const bool down = (s + 1) * MR < mc;
            const int64_t in = down ? i + MR : ic, jn = down ? j : j + NR;
            const int64_t ahead = pc == 0 && (down || (t + 1) * NR < nc) ? 2 * std::min<int64_t>(MR, M - in) : 0;
            const char* next_c = reinterpret_cast<const char*>(c + in * ldc + jn);
            if (ta)
              micro_kernel<1, MR>(kp, apack.data() + s * kp * MR, bt, c + i * ldc + j, ldc, mr, nr, rt, ldr, bias_t,
                                  next_c, ahead);
            else
              micro_kernel<KP, 1>(kp, apack.data() + s * MR * KP, bt, c + i * ldc + j, ldc, mr, nr, rt, ldr, bias_t,
                                  next_c, ahead);
          }
      }
    }
  }
}

// x (rows x cols, element (i,j) at x[i*ld+j], or x[j*ld+i] when trans) rounded into a row-major
// copy with row length `pitch` >= cols and `prows` >= rows rows, the padding zero.
void rounded_copy(bool trans, int64_t rows, int64_t cols, const float* x, int64_t ld, std::vector<float>& out,
                  int64_t pitch, int64_t prows) {
  out.resize(std::max(out.size(), size_t(prows * pitch)));
  for (int64_t i = 0; i < prows; ++i) {
    float* o = out.data() + i * pitch;
    if (i >= rows)
      std::fill(o, o + pitch, 0.0f);
    else if (trans)
      for (int64_t j = 0; j < cols; ++j) o[j] = rounded(x[j * ld + i]);
    else
      for (int64_t j = 0; j < cols; ++j) o[j] = rounded(x[i * ld + j]);
    std::fill(o + (i < rows ? cols : pitch), o + pitch, 0.0f);
  }
}

}  // namespace

float round_to_bf16(float x) { return rounded(x); }

bool has_bf16_kernel() { return cpu_isa() == CpuIsa::Avx512Bf16; }

void gemm_bf16_rounded_sgemm(bool ta, bool tb, int64_t M, int64_t N, int64_t K, const float* a, int64_t lda,
                             const float* b, int64_t ldb, float* c, int64_t ldc, const GemmAddend<float>& add) {
  thread_local std::vector<float> ra, rb;
  rounded_copy(ta, M, K, a, lda, ra, K, M);
  rounded_copy(tb, K, N, b, ldb, rb, N, K);
  const bool start = write_addend<float>(M, N, add, c, ldc);
  blas_gemm<float>(false, false, M, N, K, ra.data(), K, rb.data(), N, start ? 1.0f : 0.0f, c, ldc);
}

void gemm_bf16(bool ta, bool tb, int64_t M, int64_t N, int64_t K, const float* a, int64_t lda, const float* b,
               int64_t ldb, float* c, int64_t ldc, const GemmAddend<float>& add) {
  if (has_bf16_kernel())
    gemm_bf16_kernel(ta, tb, M, N, K, a, lda, b, ldb, c, ldc, add);
  else
    gemm_bf16_rounded_sgemm(ta, tb, M, N, K, a, lda, b, ldb, c, ldc, add);
}

}  // namespace linea::cpu
