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

// Whether the direct kernel beats cblas_sgemm on these operands, by ISA and shape. OpenBLAS keeps
// N over 512, K over 512 on AVX2 and the small untransposed products its small-matrix kernels run
// faster; the direct kernel takes tiny products with B transposed and weight gradients with a long K
// and a small output. Measured: docs/benchmarks.md, "The direct GEMM against OpenBLAS".
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
