// float32 gemm with bfloat16 dot products: what MatmulPrecision::BF16 means on the CPU.
//
// Each operand is rounded to bfloat16 (round to nearest even, 8-bit mantissa) and the products are
// summed in float32, like cuBLAS's CUBLAS_COMPUTE_32F_FAST_16BF. A product of two bf16 values is
// exact in float32, so the only extra error over float32 gemm is the operands' rounding: at most
// 2^-9 relative per operand, which leaves a dot product of random terms off by ~1e-3 of its size
// whatever K is (more where the terms cancel). tests/test_matmul_bf16.cpp measures 2.6-2.7e-3 on the
// gradients of a small product chain.
//
// Where the CPU has AVX512-BF16 (Zen 4, Sapphire Rapids and later) the products run on
// vdpbf16ps, which does twice the multiply-adds per instruction of a float32 FMA; elsewhere the
// operands are rounded into scratch and multiplied by OpenBLAS's sgemm: the same numbers to float32
// rounding (sums in another order), no faster.
//
// BF16 *allows* the rounding, as cuBLAS's FAST_16BF does: matmul's products of fewer than
// kBf16MinProduct multiply-adds (MHLA's 16x16x17 block matrices, thousands per step) stay float32,
// because converting and packing them costs more than the faster dot products save; so do products
// at most kBf16MinColumns wide, which fill half the kernel's 32 columns or less and run slower
// than the float32 direct kernel (measured: docs/benchmarks.md, "bf16 products").
#pragma once
#include <cstdint>

#include "linea/tensor/cpu/gemm_direct.h"  // GemmAddend

namespace linea::cpu {

constexpr int64_t kBf16MinProduct = 64 * 64 * 64, kBf16MinColumns = 16;

// c[M,N] = a[M,K]·b[K,N] + the addend (gemm_direct.h: r = c accumulates; a separate r and a bias
// row are added as r + bias), row-major, a or b read transposed in place (ta, tb) as in blas_gemm.
// Serial: the caller splits large products across threads. Needs K > 0.
void gemm_bf16(bool ta, bool tb, int64_t M, int64_t N, int64_t K, const float* a, int64_t lda, const float* b,
               int64_t ldb, float* c, int64_t ldc, const GemmAddend<float>& add = {});

// The fallback gemm_bf16 takes without the kernel (rounded copies + sgemm); public so the tests can
// hold the kernel against it.
void gemm_bf16_rounded_sgemm(bool ta, bool tb, int64_t M, int64_t N, int64_t K, const float* a, int64_t lda,
                             const float* b, int64_t ldb, float* c, int64_t ldc, const GemmAddend<float>& add = {});

// Whether gemm_bf16 runs on the AVX512-BF16 kernel: cpu_isa() is Avx512Bf16 (tensor/cpu_isa.h).
bool has_bf16_kernel();

// x rounded to the nearest bfloat16 (ties to even), as a float.
float round_to_bf16(float x);

}  // namespace linea::cpu
