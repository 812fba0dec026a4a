// The direct float32 gemm (gemm_direct.h): which kernel runs (the ISA's, tensor/cpu_isa.h), where
// it beats OpenBLAS, and the scratch for a transposed B. The kernels are gemm_direct_isa.cpp's
// AVX-512 and AVX2 copies of one template (gemm_direct_kernel.h).
#include "linea/tensor/cpu/gemm_direct.h"

#include <algorithm>
#include <vector>

#include "linea/tensor/cpu_isa.h"
#include "linea/tensor/error.h"

namespace linea::cpu {

// gemm_direct_isa.cpp's kernels; `bp` is scratch for kDirectKc·(N + 64) floats (pack_b).
#if defined(LINEA_MULTI_ISA)
namespace avx512 {
void gemm_direct_kernel(bool ta, bool tb, int64_t M, int64_t N, int64_t K, const float* a, int64_t lda,
                        const float* b, int64_t ldb, float* c, int64_t ldc, const float* r, int64_t ldr,
                        const float* bias, float* bp, double* a_sums);
}
namespace avx2 {
void gemm_direct_kernel(bool ta, bool tb, int64_t M, int64_t N, int64_t K, const float* a, int64_t lda,
                        const float* b, int64_t ldb, float* c, int64_t ldc, const float* r, int64_t ldr,
                        const float* bias, float* bp, double* a_sums);
}
#endif

DirectIsa direct_gemm_isa() {
  switch (cpu_isa()) {
    case CpuIsa::Avx512Bf16:
    case CpuIsa::Avx512: return DirectIsa::Avx512;
    case CpuIsa::Avx2: return DirectIsa::Avx2;
    case CpuIsa::Generic: break;
  }
  return DirectIsa::None;
}

bool has_direct_gemm() { return direct_gemm_isa() != DirectIsa::None; }

// Measured at one thread against cblas_sgemm on the same operands.
// AVX-512: 1.15-1.45x OpenBLAS on the models' weight gradients and 1.1-1.4x on their [8192, C] x
// [C, N] products up to N = 256. On a Zen 4 EPYC (session 20, 1 thread, warm, min of 7 x 50 calls)
// also 1.05-1.14x wider, up to N = 512 (the char-GPT's [384, 128]·[384..512, 128]ᵀ 110-111 against
// 100-101 GFLOP/s, 512³, [4096, 128]·[128, 512]), and on weight gradients with up to 512 rows
// ([384..512, 768]ᵀ·[768, 128], [128, 768]ᵀ·[768, 512]: 109-113 against 97-102); N = 1024 is left
// to OpenBLAS ([4096, 256]·[256, 1024] 0.99x). On the tiny products of MHLA and the attention
// kernels (Zen 4, session 19, 1 thread, warm, min of 5 x 20,000 calls): with B transposed the
// direct kernel is 1.15-1.65x OpenBLAS from M = N up (16x16x16 150-173 against 248-283 ns;
// 32x32x32, 64x64x16..64, 128x64x64, 256x256x16)
// and 1.14-1.41x on the causal MHLA's shorter products (8x32x32, 16x32..64x32, 32x64..128x64),
// 0.89-0.95x on 16x64x64 and 0.62x on 4x32x32; untransposed, OpenBLAS's small-matrix kernels are
// 1.03-1.28x faster up to 64x64x64 (16x16x16 97 against 110-124 ns) and 0.87-0.89x from 128³ and
// 256x64x64; with A transposed OpenBLAS is 1.2-1.3x faster at 16x16x16.
// AVX2 (Zen 3): the tiny products (16x16x17 1.15-1.3x, 16x16x16 1.7-1.8x, 4x4x272 1.16x; with
// a transposed B in 8x8 register blocks 64x64x16 1.25x, 64x64x32 1.2x). Since full tiles stopped
// using masked loads and stores, A is blocked by MC rows and B packed in strips (session 15), also
// the layers' products of the ViT and the char-GPT, 2 threads by rows, operands flushed from cache:
// forward (B transposed) [4096, 64..128]·[64..192, 64..128]ᵀ 1.1-1.6x, [384, 128]·[128..512, 128]ᵀ
// 1.0-1.13x (0.91-1.03x at N = 65); input gradients [4096, 64..192]·[64..192, 64..128] 0.91-1.47x, [384, 65..512]·
// [65..512, 128..512] 1.0-1.22x; weight gradients split over K (cpu_matmul.cpp), each thread's
// [4096, 64..192]ᵀ·[4096, 64..128] 1.1-1.26x against OpenBLAS's own threads. At K = 512, 0.92-1.05x
// with B's blocks 128 rows deep, and 1.04-1.07x since they are 256 on AVX2 (gemm_direct_kernel.h):
// the char-GPT's [384, 384..512]·[384..512, 128], B read transposed or not (min of 100, 2 threads
// by rows, warm and flushed). Not K over 512, nor the char-GPT's weight gradients (K = 768: 0.85-0.9x).
bool direct_gemm_pays(bool ta, bool tb, int64_t M, int64_t N, int64_t K) {
  switch (direct_gemm_isa()) {
    case DirectIsa::None: return false;
    case DirectIsa::Avx2:
      if (M * N * K <= 64 * 64 * 64) return true;
      if (ta) return K >= 2048 && M <= 256 && N <= 256;
      return N <= 512 && K <= 512 && (!tb || M >= 256);
    case DirectIsa::Avx512: break;
  }
  if (N > 512) return false;
  if (tb) return M >= 16 || M >= N;     // B's block copied into strips for enough rows
  if (ta) return K >= 256 && M <= 512;  // weight gradients: a small output, a long K
  return M * N * K > 64 * 64 * 64;      // below, OpenBLAS's small-matrix kernels are faster
}

void gemm_direct(bool ta, bool tb, int64_t M, int64_t N, int64_t K, const float* a, int64_t lda, const float* b,
                 int64_t ldb, float* c, int64_t ldc, Addend add, DirectIsa isa, double* a_sums) {
  const bool runs = isa == DirectIsa::Avx512 ? direct_gemm_isa() == DirectIsa::Avx512
                                             : isa == DirectIsa::Avx2 && has_direct_gemm();
  LINEA_CHECK(runs, "[gemm_direct] the {} kernel does not run under cpu_isa() = {}",
              isa == DirectIsa::Avx512 ? "AVX-512" : isa == DirectIsa::Avx2 ? "AVX2" : "(none)", cpu_isa_name(cpu_isa()));
  LINEA_CHECK(!a_sums || ta, "[gemm_direct] a's sums are for a read transposed (a weight gradient) only");
  thread_local std::vector<float> bp;  // b's block in column strips (pack_b); kept, so no allocation per call
  bp.resize(std::max(bp.size(), size_t(kDirectKc * (N + 64))));  // 64: the widest strip
#if defined(LINEA_MULTI_ISA)
  if (isa == DirectIsa::Avx512)
    avx512::gemm_direct_kernel(ta, tb, M, N, K, a, lda, b, ldb, c, ldc, add.r, add.ldr, add.bias, bp.data(), a_sums);
  else avx2::gemm_direct_kernel(ta, tb, M, N, K, a, lda, b, ldb, c, ldc, add.r, add.ldr, add.bias, bp.data(), a_sums);
#endif
}

}  // namespace linea::cpu
