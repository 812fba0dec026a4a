// The CUDA implementation of the kernel interface (tensor/backend.h). Each method validates its
// tensors, turns them into TensorArg (below) or raw pointers and launches the family's kernels.
// The header is fmt-free, like the tensor/ headers it includes, so the .cu files (nvcc) include
// it too and see the same Tensor, DType, op enums and MHLAArgs as the .cpp files (g++). A family
// whose checks are all shared with the CPU (tensor/kernel_checks.h, defined out of line) is one
// .cu file holding its kernels and its CudaBackend methods; a family with checks of its own
// (LINEA_CHECK formats with fmt, which nvcc cannot compile) keeps them in a .cpp that calls the
// .cu's launchers (cuda/launch_<family>.h). Methods are spread over one file per family, like the
// CPU backend:
//   cuda_memory.cpp (+ allocator.cpp)        allocate, host transfers, copy, fill
//   elementwise.cu                           unary, binary, where (and copy/fill's kernels)
//   reduce.cu                                reduce, softmax, softmax_backward
//   norm.cu                                  layernorm / rmsnorm forward and backward
//   cuda_matmul.cpp                          gemm (cuBLAS)
//   index.cu                                 index_select, index_add, gather, scatter_add
//   cuda_fused.cpp / fused.cu                cross-entropy, AdamW/SGD steps, random_uniform, cumsum
//   cuda_mhla.cpp / mhla.cu                  fused MHLA
//   cuda_attention.cpp / attention.cu        fused softmax attention
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

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

class CudaBackend final : public Backend {
 public:
  std::shared_ptr<Storage> allocate(std::size_t nbytes) override;
  void copy_from_host(Storage& dst, std::size_t dst_byte_offset, const void* src, std::size_t nbytes) override;
  void copy_to_host(void* dst, const Storage& src, std::size_t src_byte_offset, std::size_t nbytes) override;

  void copy(const Tensor& src, const Tensor& dst) override;
  void fill(const Tensor& dst, double value) override;
  void unary(UnaryOp op, const Tensor& x, const Tensor& out, double p0, double p1) override;
  void binary(BinaryOp op, const Tensor& a, const Tensor& b, const Tensor& out) override;
  void where(const Tensor& cond, const Tensor& a, const Tensor& b, const Tensor& out) override;

  void reduce(ReduceOp op, const Tensor& x, const Tensor& out, int64_t outer, int64_t n, int64_t inner) override;
  void softmax(const Tensor& x, const Tensor& out, bool log) override;
  void softmax_backward(const Tensor& y, const Tensor& dy, const Tensor& dx, bool log) override;

  void layernorm_forward(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps, const Tensor& out,
                         const Tensor& mean, const Tensor& rstd) override;
  void layernorm_backward(const Tensor& dy, const Tensor& x, const Tensor& weight, const Tensor& mean,
                          const Tensor& rstd, const Tensor& dx, const Tensor& dweight, const Tensor& dbias) override;
  void rmsnorm_forward(const Tensor& x, const Tensor& weight, double eps, const Tensor& out,
                       const Tensor& rstd) override;
  void rmsnorm_backward(const Tensor& dy, const Tensor& x, const Tensor& weight, const Tensor& rstd,
                        const Tensor& dx, const Tensor& dweight) override;

  void gemm(const Tensor& a, const Tensor& b, const Tensor& out, const Tensor& bias, const Tensor& residual) override;

  void index_select(const Tensor& x, int64_t dim, const Tensor& idx, const Tensor& out) override;
  void index_add(const Tensor& out, int64_t dim, const Tensor& idx, const Tensor& src) override;
  void gather(const Tensor& x, int64_t dim, const Tensor& idx, const Tensor& out) override;
  void scatter_add(const Tensor& out, int64_t dim, const Tensor& idx, const Tensor& src) override;

  // fused kernels for nn/ (cuda_fused.cpp / fused.cu)
  void cross_entropy_forward(const Tensor& x, const Tensor& target, int64_t ignore_index, double label_smoothing,
                             const Tensor& lse, const Tensor& loss, const Tensor& total) override;
  void cross_entropy_backward(const Tensor& x, const Tensor& target, const Tensor& lse, const Tensor& weight,
                              int64_t ignore_index, double label_smoothing, const Tensor& dx) override;
  void adamw_step(const std::vector<AdamWParam>& params, double beta1, double beta2, double eps) override;
  void sgd_step(const std::vector<SgdParam>& params, double momentum, bool nesterov) override;
  void sum_squares(const std::vector<Tensor>& xs, const Tensor& out) override;
  void scale_all(const std::vector<Tensor>& xs, double factor) override;
  void random_uniform(const Tensor& out, uint64_t seed, uint64_t offset) override;
  void cumsum(const Tensor& x, const Tensor& out, int64_t outer, int64_t n, int64_t inner, bool exclusive,
              bool reverse) override;

  // fused MHLA (cuda_mhla.cpp / mhla.cu)
  bool has_fused_mhla(bool) const override { return true; }
  void mhla_forward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& mix, const MHLAArgs& a,
                    const Tensor& out, const Tensor& s, const Tensor& sh, const Tensor& r) override;
  void mhla_backward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& mix, const MHLAArgs& a,
                     const Tensor& out, const Tensor& s, const Tensor& sh, const Tensor& r, const Tensor& grad,
                     const Tensor& dq, const Tensor& dk, const Tensor& dv, const Tensor& dmix) override;

  // fused attention (cuda_attention.cpp / attention.cu)
  void attention_forward(const Tensor& q, const Tensor& k, const Tensor& v, double scale, bool causal,
                         const Tensor& out, const Tensor& lse, const Tensor& probs) override;
  void attention_backward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out, const Tensor& lse,
                          const Tensor& probs, const Tensor& dout, double scale, bool causal, const Tensor& dq,
                          const Tensor& dk, const Tensor& dv) override;
};

CudaBackend& instance();

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
