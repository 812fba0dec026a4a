// The CUDA implementation of the kernel interface (tensor/backend.h). Each do_ kernel runs after
// Backend's method has checked the arguments (the checks every device shares), adds what is the
// GPU's own (operands on a CUDA device, the kernels' limits), turns the tensors into TensorArg
// (below) or raw pointers and launches the family's kernels. The header is fmt-free, like the
// tensor/ headers it includes, so the .cu files (nvcc) include it too and see the same Tensor,
// DType, op enums and MHLAArgs as the .cpp files (g++). A family is one .cu file holding its
// kernels, their launchers and its CudaBackend methods; what must format an error (LINEA_CHECK
// uses fmt, which nvcc cannot compile) is out of line in cuda_backend.cpp, and cuBLAS and the
// host transfers are plain C++ (.cpp). One file per family, like the CPU backend:
//   cuda_memory.cpp (+ allocator.cpp)        allocate, host transfers, copy, fill
//   elementwise.cu                           unary, binary, where (and copy/fill's kernels)
//   reduce.cu                                reduce, softmax, softmax_backward
//   norm.cu                                  layernorm / rmsnorm forward and backward
//   cuda_matmul.cpp                          gemm (cuBLAS)
//   index.cu                                 index_select, index_add, gather, scatter_add
//   fused.cu                                 cross-entropy, AdamW/SGD steps, sum_squares, scale_all,
//                                            random_uniform, cumsum
//   mhla.cu                                  fused MHLA
//   attention.cu                             fused softmax attention
#pragma once
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <initializer_list>

#include "linea/tensor/backend.h"

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

// dst = cast(src) elementwise, any strides and any pair of dtypes (the CPU's static_cast; a bool
// result is x != 0); dst = static_cast<dtype>(value), any strides. Kernels in elementwise.cu,
// called by copy and fill (cuda_memory.cpp).
void launch_copy(const TensorArg& src, const TensorArg& dst);
void launch_fill(const TensorArg& dst, double value);

// Grid size for a 1-d launch of n threads in blocks of `threads`, capped so grid-stride loops
// cover the rest.
inline unsigned blocks_for(int64_t n, int threads = 256) {
  int64_t b = (n + threads - 1) / threads;
  if (b < 1) b = 1;
  return static_cast<unsigned>(b > 65535 * 8 ? 65535 * 8 : b);
}

// The kernels are public here: the family files call each other's (a gemm inside MHLA, a copy to
// pack rows) on the backend itself, as one kernel's parts, without a second check or profile row.
class CudaBackend final : public Backend {
 public:
  CudaBackend() : Backend(DeviceType::CUDA) {}

  LINEA_BACKEND_KERNELS(override)
};

CudaBackend& instance();

// ---- the limits of the family kernels, checked on the host ----
// Defined in cuda_backend.cpp: LINEA_CHECK formats with fmt, which nvcc cannot compile, so the
// .cu files that launch these kernels call them.
inline constexpr int kAttentionMaxHead = 128;  // attention.cu: largest d and dv
inline constexpr int kAttentionTile = 32;      // attention.cu: query rows / keys per tile, a block per tile
inline constexpr int kMhlaMaxHead = 128;       // mhla.cu: up to 128 columns per token in a shared-memory tile
inline constexpr int kMhlaTile = 16;           // mhla.cu: tokens per tile, a thread block per tile of a block
// Every tensor on q's CUDA device, head dims within kAttentionMaxHead, the grid within gridDim.x.
void check_attention(const char* op, const Tensor& q, const Tensor& v, std::initializer_list<const Tensor*> all);
// No causal normaliser, head dims within kMhlaMaxHead, the grid within gridDim.x.
void check_mhla(const char* op, const Tensor& q, const Backend::MHLADims& g, const Backend::MHLAArgs& a);
// A multi-tensor apply of nparams parameters in nblocks blocks fits one launch (fused.cu).
void check_fused_launch(const char* kernel, std::size_t nparams, int64_t nblocks);

// Tensor -> kernel operand. Checks that t lives on a CUDA device and has at most kMaxDims dims;
// `op` names the caller in the error.
TensorArg arg(const Tensor& t, const char* op);

// Turn a failed CUDA runtime call, or an error left by the last kernel launch, into a
// linea::Error naming the call or kernel: LINEA_CUDA_CHECK(cudaMemcpyAsync(...)) and
// check_launch("softmax_rows") right after each launch.
void throw_cuda_error(cudaError_t err, const char* what, const char* file, int line);
void check_launch(const char* kernel);

}  // namespace linea::cuda

#define LINEA_CUDA_CHECK(call)                                                                      \
  do {                                                                                              \
    cudaError_t linea_cuda_err_ = (call);                                                           \
    if (linea_cuda_err_ != cudaSuccess) ::linea::cuda::throw_cuda_error(linea_cuda_err_, #call, __FILE__, __LINE__); \
  } while (0)
