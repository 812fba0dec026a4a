// Indexing on the GPU: index_select, index_add, gather, scatter_add (index.cu), with the checks
// and errors shared with the CPU (tensor/kernel_checks.h).
//
// Like the CPU, every index is range-checked before any element moves, so a bad index throws and
// leaves index_add's and scatter_add's output untouched. The check is a small kernel that raises a
// device flag, read back with one 16-byte copy: each indexing op therefore costs ONE host-device
// synchronisation (the price of an exception that names the bad index).
#include "linea/cuda/cuda_backend.h"
#include "linea/cuda/launch_index.h"
#include "linea/tensor/kernel_checks.h"

namespace linea::cuda {

namespace {

// Throws unless every element of the int64 idx lies in [0, size) (see the file comment for the cost).
void check_indices(const char* op, const Tensor& idx, int64_t dim, int64_t size) {
  const TensorArg ia = arg(idx, op);
  if (idx.numel() == 0) return;
  Tensor slot = empty({2}, DType::Int64, idx.device());  // {flag, one bad value}
  LINEA_CUDA_CHECK(cudaMemsetAsync(slot.data_ptr(), 0, 2 * sizeof(int64_t), stream()));
  launch_check_indices(ia, size, static_cast<int64_t*>(slot.data_ptr()));
  check_launch("check_indices");
  int64_t host[2] = {0, 0};
  LINEA_CUDA_CHECK(cudaMemcpyAsync(host, slot.data_ptr(), sizeof(host), cudaMemcpyDeviceToHost, stream()));
  LINEA_CUDA_CHECK(cudaStreamSynchronize(stream()));
  kernel_checks::index_in_range(op, host[0] == 0, host[1], dim, size);
}

using Launch = void (*)(const TensorArg&, int, const TensorArg&, const TensorArg&);

// Range-checks idx against the indexed dim (of length `size`), then launch(a, dim, idx, b).
void run(const char* op, Launch launch, const Tensor& a, int64_t dim, const Tensor& idx, const Tensor& b,
         int64_t size) {
  check_indices(op, idx, dim, size);
  launch(arg(a, op), static_cast<int>(dim), arg(idx, op), arg(b, op));
  check_launch(op);
}

}  // namespace

void CudaBackend::index_select(const Tensor& x, int64_t dim, const Tensor& idx, const Tensor& out) {
  kernel_checks::index_select(x, dim, idx, out);
  run("index_select", launch_index_select, x, dim, idx, out, x.shape()[dim]);
}

void CudaBackend::index_add(const Tensor& out, int64_t dim, const Tensor& idx, const Tensor& src) {
  kernel_checks::index_add(out, dim, idx, src);
  run("index_add", launch_index_add, out, dim, idx, src, out.shape()[dim]);
}

void CudaBackend::gather(const Tensor& x, int64_t dim, const Tensor& idx, const Tensor& out) {
  kernel_checks::gather(x, dim, idx, out);
  run("gather", launch_gather, x, dim, idx, out, x.shape()[dim]);
}

void CudaBackend::scatter_add(const Tensor& out, int64_t dim, const Tensor& idx, const Tensor& src) {
  kernel_checks::scatter_add(out, dim, idx, src);
  run("scatter_add", launch_scatter_add, out, dim, idx, src, out.shape()[dim]);
}

}  // namespace linea::cuda
