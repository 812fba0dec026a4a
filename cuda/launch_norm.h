// Launchers of the LayerNorm / RMSNorm kernels (norm.cu), called by cuda_norm.cpp. x is
// contiguous, read as [rows, n]; all operands share one float dtype (F32/F64); `center` is true
// for LayerNorm, false for RMSNorm (no mean, no bias). Optional operands are nullptr. Launchers
// return the names of the kernels they launched, for check_launch().
#pragma once
#include <cstddef>
#include <cstdint>

#include "linea/cuda/cuda_backend.h"

namespace linea::cuda {

// out = (x - mean) * rstd * weight + bias; writes mean (center only) and rstd per row.
const char* launch_norm_forward(DType dtype, bool center, const void* x, const void* weight, const void* bias, double eps,
                                void* out, void* mean, void* rstd, int64_t rows, int64_t n);

// dweight / dbias are sums over rows: each of `splits` blocks of rows writes its partial sums
// (in double) to a scratch buffer of scratch_bytes, and a second kernel adds them up in order.
struct NormParamsPlan {
  int64_t splits = 1;
  int64_t rows_per_split = 0;
  std::size_t scratch_bytes = 0;
};
NormParamsPlan plan_norm_params(int64_t rows, int64_t n);

// Writes dx (when rows > 0), and dweight / dbias where they are not nullptr (scratch then holds
// plan.scratch_bytes).
const char* launch_norm_backward(DType dtype, bool center, const void* dy, const void* x, const void* weight,
                                 const void* mean, const void* rstd, void* dx, void* dweight, void* dbias,
                                 int64_t rows, int64_t n, const NormParamsPlan& plan, void* scratch);

}  // namespace linea::cuda
