// Launchers of the reduction and softmax kernels (reduce.cu), called by cuda_reduce.cpp. Every
// launcher returns the names of the kernels it launched, for check_launch().
#pragma once
#include <cstddef>
#include <cstdint>

#include "linea/cuda/cuda_backend.h"
#include "linea/tensor/ops.h"

namespace linea::cuda {


// How a reduction of x [outer, n, inner] is laid out on the GPU. When there are too few outputs
// to fill the GPU, n is cut into `splits` pieces reduced in parallel into partial results
// (scratch_bytes of device scratch), which a second kernel merges in a fixed order.
struct ReducePlan {
  int group = 0;         // threads per row in reduce_rows (a warp, or a whole block for long
                         // rows); 0: reduce_columns, a thread per output
  int64_t splits = 1;    // pieces n is cut into
  int64_t piece = 0;     // elements of n per piece
  std::size_t scratch_bytes = 0;
};
ReducePlan plan_reduce(ReduceOp op, DType dtype, int64_t outer, int64_t n, int64_t inner);

// out[outer, inner] (int64 for ArgMax, else dtype) from a contiguous x; scratch holds
// plan.scratch_bytes. LogSumExp takes F32/F64 only (checked by the caller).
const char* launch_reduce(ReduceOp op, DType dtype, const void* x, void* out, int64_t outer, int64_t n, int64_t inner,
                          const ReducePlan& plan, void* scratch);

// Row-wise softmax / log_softmax over rows of length n (F32/F64), and its backward.
const char* launch_softmax(DType dtype, const void* x, void* out, int64_t rows, int64_t n, bool log);
const char* launch_softmax_backward(DType dtype, const void* y, const void* dy, void* dx, int64_t rows, int64_t n,
                                    bool log);

}  // namespace linea::cuda
