// [B, H, N, e] per-token operands as the CUDA kernels read them: contiguous [B·H, N, e] rows. The
// backend contract (tensor/backend.h) lets such a tensor lie anywhere with unit stride along e
// (the heads of a projection, say); the fused MHLA and softmax-attention methods copy it into a
// packed block first, and write a result through one that unpack() then copies into place.
#pragma once
#include "linea/cuda/cuda_backend.h"
#include "linea/tensor/creation.h"

namespace linea::cuda {

// x as [B·H, N, e] rows: a view when x is contiguous, else a packed copy.
inline Tensor packed(CudaBackend& be, const Tensor& x) {
  const Shape rows{x.size(0) * x.size(1), x.size(2), x.size(3)};
  if (x.is_contiguous()) return x.view(rows);
  Tensor c = empty(x.shape(), x.dtype(), x.device());
  be.do_copy(x, c);
  return c.view(rows);
}
// Where a kernel writes a per-token result: dst itself when contiguous, else a packed scratch
// that unpack() then copies into dst.
inline Tensor packed_out(const Tensor& dst) {
  const Shape rows{dst.size(0) * dst.size(1), dst.size(2), dst.size(3)};
  return dst.is_contiguous() ? dst.view(rows) : empty(rows, dst.dtype(), dst.device());
}
inline void unpack(CudaBackend& be, const Tensor& result, const Tensor& dst) {
  if (!dst.is_contiguous()) be.do_copy(result.view(dst.shape()), dst);
}

}  // namespace linea::cuda
