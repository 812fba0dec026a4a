// The CUDA backend object, its stream, and the helpers every cuda/*.cpp file uses to hand tensors
// to kernels and to turn CUDA errors into linea::Errors.
#include "linea/cuda/cuda_backend.h"

#include "linea/tensor/error.h"

namespace linea::cuda {

CudaBackend& instance() {
  static CudaBackend b;
  return b;
}

cudaStream_t stream() {
  // One non-blocking stream for all of linea's work: kernels, copies and the allocator's reuse
  // are then ordered by the stream alone, and nothing waits on the legacy default stream.
  static cudaStream_t s = [] {
    cudaStream_t created = nullptr;
    LINEA_CUDA_CHECK(cudaStreamCreateWithFlags(&created, cudaStreamNonBlocking));
    return created;
  }();
  return s;
}

TensorArg arg(const Tensor& t, const char* op) {
  LINEA_CHECK(t.device().is_cuda(), "[{}] expected a CUDA tensor, got one on {}", op, t.device());
  LINEA_CHECK(t.dim() <= kMaxDims, "[{}] CUDA kernels take at most {} dims, got shape {}", op, kMaxDims,
              shape_str(t.shape()));
  TensorArg a;
  a.data = t.data_ptr();
  a.dtype = t.dtype();
  a.ndim = static_cast<int>(t.dim());
  for (int i = 0; i < a.ndim; ++i) {
    a.shape[i] = t.shape()[i];
    a.strides[i] = t.strides()[i];
  }
  return a;
}

void throw_cuda_error(cudaError_t err, const char* what, const char* file, int line) {
  cudaGetLastError();  // clear a non-sticky error so the next call starts clean
  throw Error(fmt::format("[cuda] {} failed: {} ({}) at {}:{}", what, cudaGetErrorString(err), cudaGetErrorName(err),
                          file, line));
}

void check_launch(const char* kernel) {
  cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess)
    throw Error(fmt::format("[cuda] kernel {} failed to launch: {} ({})", kernel, cudaGetErrorString(err),
                            cudaGetErrorName(err)));
}

}  // namespace linea::cuda
