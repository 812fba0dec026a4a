// The direct float32 gemm (gemm_direct.h): which kernel this CPU runs, where it beats OpenBLAS,
// and the scratch for a transposed B. The kernels are gemm_direct_avx512.cpp and
// gemm_direct_avx2.cpp, one template (gemm_direct_kernel.h) compiled for each instruction set.
#include "linea/tensor/cpu/gemm_direct.h"

#include <algorithm>
#include <vector>

#include "linea/tensor/cpu/gemm_direct_kernel.h"
#include "linea/tensor/error.h"

namespace linea::cpu {

// Defined in the per-ISA files; `bt` is scratch for KC·N floats.
void gemm_direct_avx512(bool ta, bool tb, int64_t M, int64_t N, int64_t K, const float* a, int64_t lda,
                        const float* b, int64_t ldb, float* c, int64_t ldc, bool accumulate, float* bt);
void gemm_direct_avx2(bool ta, bool tb, int64_t M, int64_t N, int64_t K, const float* a, int64_t lda,
                      const float* b, int64_t ldb, float* c, int64_t ldc, bool accumulate, float* bt);

DirectIsa direct_gemm_isa() {
  static const DirectIsa isa = __builtin_cpu_supports("avx512f")                                   ? DirectIsa::Avx512
                               : __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") ? DirectIsa::Avx2
                                                                                                   : DirectIsa::None;
  return isa;
}

bool has_direct_gemm() { return direct_gemm_isa() != DirectIsa::None; }

// Measured at one thread against cblas_sgemm on the same operands.
// AVX-512: 1.15-1.45x OpenBLAS on the models' weight gradients and 1.1-1.4x on their [8192, C] x
// [C, N] products up to N = 256; slower from N = 512 (C's tile row outgrows what one pass over A
// pays for) and on tiny products whose transposed operand costs more to copy or broadcast than
// the product itself.
// AVX2 (Zen 3): only the tiny products gain (16x16x17 1.15-1.3x, 16x16x16 1.7-1.8x, 4x4x272
// 1.16x). A transposed B did too once it was transposed in 8x8 register blocks (session 14:
// 16x16x16 1.8x, 64x64x16 1.25x, 64x64x32 1.2x; element by element it was 0.7-1.05x). On the
// layers' products OpenBLAS's AVX2 kernel matched it (0.9-1.07x) and on the weight gradients beat
// it (0.82-0.99x): a 6x16 tile reuses each loaded row of B only six times.
bool direct_gemm_pays(bool ta, bool tb, int64_t M, int64_t N, int64_t K) {
  switch (direct_gemm_isa()) {
    case DirectIsa::None: return false;
    case DirectIsa::Avx2: return M * N * K <= 64 * 64 * 64;
    case DirectIsa::Avx512: break;
  }
  if (N > 256) return false;
  if (tb) return M >= 512;             // the copy of B's block is shared by many rows
  if (ta) return K >= 256 && M <= 256;  // weight gradients: a small output, a long K
  return true;
}

void gemm_direct(bool ta, bool tb, int64_t M, int64_t N, int64_t K, const float* a, int64_t lda, const float* b,
                 int64_t ldb, float* c, int64_t ldc, bool accumulate, DirectIsa isa) {
  const bool runs = isa == DirectIsa::Avx512 ? direct_gemm_isa() == DirectIsa::Avx512
                                             : isa == DirectIsa::Avx2 && has_direct_gemm();
  LINEA_CHECK(runs, "[gemm_direct] this CPU does not run the requested kernel");
  thread_local std::vector<float> bt;  // a transposed b's block, row-major; kept, so no allocation per call
  if (tb) bt.resize(std::max(bt.size(), size_t(direct_kernel::KC * N)));
  if (isa == DirectIsa::Avx512) gemm_direct_avx512(ta, tb, M, N, K, a, lda, b, ldb, c, ldc, accumulate, bt.data());
  else gemm_direct_avx2(ta, tb, M, N, K, a, lda, b, ldb, c, ldc, accumulate, bt.data());
}

}  // namespace linea::cpu
