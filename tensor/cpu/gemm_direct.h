// float32 gemm for the products OpenBLAS runs below its peak: the skinny products of small
// models' layers ([8192, 64]·[64, 192] and their gradients; dW = dYᵀ·X ran at 55-62% of the 1024³
// rate) and the thousands of tiny block matrices of MHLA and attention (16x16x17, 4x4x272: 12-35%,
// the call and packing overheads).
//
// Both lose their time packing: OpenBLAS copies every element of A and B into its panel layout,
// and a 64-wide output reuses each copied element only 64 times. The direct kernel packs nothing
// of A: a tile of C (6 rows x 64 columns in 24 zmm registers on AVX-512, 6 x 16 in 12 ymm on
// AVX2) stays in registers while each step k broadcasts six elements of A straight from memory
// (row-major or transposed alike; 120-row blocks of A stay in L2 across B's column strips) and
// loads one row of B's strip. B's block is packed into column strips as wide as the tile (a
// transposed B transposed into them in 8x8 register blocks), except for short A and for weight
// gradients, whose B is read in place. The kernel is one template over the vector width
// (gemm_direct_kernel.h).
#pragma once
#include <cstdint>

namespace linea::cpu {

constexpr int64_t kDirectKc = 256;  // the deepest block of B's rows: gemm_direct's scratch is kDirectKc·(N + 64) floats

// The kernels, widest first; None where the CPU has neither AVX-512F nor AVX2 + FMA.
enum class DirectIsa { None, Avx2, Avx512 };
DirectIsa direct_gemm_isa();  // the kernel of the ISA that runs (tensor/cpu_isa.h)
bool has_direct_gemm();       // direct_gemm_isa() != None

// What a product is added to (Backend::gemm's residual and bias): r [M, N] (rows ldr apart; r = c
// accumulates, any other r must not overlap c) and a bias row of N. Either may be null; both are
// added as the one value r + bias. The direct kernel and gemm_bf16.h's kernel add them as they
// store each tile of c; ahead of BLAS, write_addend (below) writes them into c. rows() and cols()
// are a block's share.
template <class T>
struct GemmAddend {
  const T* r = nullptr;
  int64_t ldr = 0;
  const T* bias = nullptr;
  GemmAddend rows(int64_t i0) const { return {r ? r + i0 * ldr : nullptr, ldr, bias}; }
  GemmAddend cols(int64_t j0) const { return {r ? r + j0 : nullptr, ldr, bias ? bias + j0 : nullptr}; }
};
using Addend = GemmAddend<float>;

// c = r + bias (or either alone) written into c ahead of a product that adds into it (BLAS with
// beta = 1); says whether c now holds a start. Where r is c itself, only the bias is added to it.
template <class T>
bool write_addend(int64_t M, int64_t N, const GemmAddend<T>& s, T* c, int64_t ldc) {
  if (!s.r && !s.bias) return false;
  if (s.r == c && !s.bias) return true;
  for (int64_t i = 0; i < M; ++i) {
    T* ci = c + i * ldc;
    const T* ri = s.r ? s.r + i * s.ldr : nullptr;
    if (ri && s.bias)
      for (int64_t j = 0; j < N; ++j) ci[j] = ri[j] + s.bias[j];
    else if (ri)
      for (int64_t j = 0; j < N; ++j) ci[j] = ri[j];
    else
      for (int64_t j = 0; j < N; ++j) ci[j] = s.bias[j];
  }
  return true;
}

// c[M,N] = a[M,K]·b[K,N] + the addend, row-major, a or b read transposed in place (ta, tb) as in
// blas_gemm. Serial; needs K > 0 and a kernel `isa` this CPU runs (tests pick the narrower one).
// With ta, a_sums (M doubles, or null) also gets a_sums[i] += Σ_k a(i, k): for a weight gradient
// dW = dYᵀ·X, the bias gradient's column sums of dY, read while dY is in cache.
void gemm_direct(bool ta, bool tb, int64_t M, int64_t N, int64_t K, const float* a, int64_t lda, const float* b,
                 int64_t ldb, float* c, int64_t ldc, Addend add = {}, DirectIsa isa = direct_gemm_isa(),
                 double* a_sums = nullptr);

// Whether matmul takes gemm_direct for this serial product: the shapes above, where it was
// measured faster than OpenBLAS (bench_matmul: the models' products, linea against cblas).
bool direct_gemm_pays(bool ta, bool tb, int64_t M, int64_t N, int64_t K);

}  // namespace linea::cpu
