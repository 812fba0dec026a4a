// The CUDA backend object, its stream, the helpers every cuda/ file uses to hand tensors to
// kernels and to turn CUDA errors into linea::Errors, and the host-side checks of the family
// kernels' limits (cuda_backend.h).
#include "linea/cuda/cuda_backend.h"

#include <algorithm>
#include <limits>

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

void check_attention(const char* op, const Tensor& q, const Tensor& v, std::initializer_list<const Tensor*> all) {
  for (const Tensor* t : all) {
    arg(*t, op);  // on a CUDA device
    LINEA_CHECK(t->device() == q.device(), "[{}] expected every tensor on {}, got one on {}", op, q.device(),
                t->device());
  }
  const int64_t BH = q.size(0) * q.size(1), N = q.size(2), d = q.size(3), dv = v.size(3);
  LINEA_CHECK(d <= kAttentionMaxHead && dv <= kAttentionMaxHead,
              "[{}] the CUDA kernels take head dims up to {}, got q {} / v {}", op, kAttentionMaxHead,
              shape_str(q.shape()), shape_str(v.shape()));
  LINEA_CHECK(BH * ((N + kAttentionTile - 1) / kAttentionTile) <= std::numeric_limits<int32_t>::max(),
              "[{}] too many (batch·head, tile) blocks for one launch: q {}", op, shape_str(q.shape()));
}

void check_mhla(const char* op, const Tensor& q, const Backend::MHLADims& g, const Backend::MHLAArgs& a) {
  LINEA_CHECK(!a.normalised, "[{}] the CUDA kernels have no causal normaliser (has_fused_causal_normaliser is false)",
              op);
  LINEA_CHECK(g.d <= kMhlaMaxHead && g.dv <= kMhlaMaxHead,
              "[{}] the fused CUDA kernels take head dims d, dv <= {}, got d = {}, dv = {} (use mhla_composite)", op,
              kMhlaMaxHead, g.d, g.dv);
  // The per-token kernels run one thread block per (pair, block, tile of kMhlaTile tokens).
  const int64_t tiles = (std::min(g.L, g.N) + kMhlaTile - 1) / kMhlaTile;
  LINEA_CHECK(g.BH * g.M * tiles <= std::numeric_limits<int32_t>::max(),
              "[{}] too many (pair, block, tile) thread blocks for one launch: q {}, block_len {}", op,
              shape_str(q.shape()), g.L);
}

void check_fused_launch(const char* kernel, std::size_t nparams, int64_t nblocks) {
  LINEA_CHECK(nblocks < std::numeric_limits<int32_t>::max() &&
                  nparams < static_cast<std::size_t>(std::numeric_limits<int>::max()),
              "[{}] {} parameters in {} blocks exceed one launch", kernel, nparams, nblocks);
}

}  // namespace linea::cuda
