// What the CUDA kernels (.cu, compiled by nvcc) and the Backend methods that launch them (.cpp,
// compiled by g++) share. Plain C++: nvcc cannot compile fmt, and Tensor's headers use it, so the
// .cpp side turns Tensors into these structs and the .cu side only ever sees raw pointers, sizes
// and strides. The .cu files do include the fmt-free core headers: dtype.h (DType, dispatch)
// and ops.h (the op enums and the elementwise formulas).
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "linea/tensor/dtype.h"

namespace linea::cuda {

inline constexpr int kMaxDims = 8;

// One operand of a kernel: element 0 of the view (storage base + offset, already applied) and
// its shape/strides in elements. Passed by value to kernels (about 140 bytes of parameter space).
struct TensorArg {
  void* data = nullptr;
  DType dtype = DType::Float32;
  int ndim = 0;
  int64_t shape[kMaxDims] = {};
  int64_t strides[kMaxDims] = {};
  int64_t numel() const {
    int64_t n = 1;
    for (int i = 0; i < ndim; ++i) n *= shape[i];
    return n;
  }
};

// The one stream every linea kernel and copy runs on (cuda_backend.cpp).
cudaStream_t stream();

// Grid size for a 1-d launch of n threads in blocks of `threads`, capped so grid-stride loops
// cover the rest.
inline unsigned blocks_for(int64_t n, int threads = 256) {
  int64_t b = (n + threads - 1) / threads;
  if (b < 1) b = 1;
  return static_cast<unsigned>(b > 65535 * 8 ? 65535 * 8 : b);
}

}  // namespace linea::cuda
