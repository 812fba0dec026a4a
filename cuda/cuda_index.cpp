// Indexing on the GPU: index_select, index_add, gather, scatter_add (index.cu), with the CPU's
// checks and errors (tensor/cpu/cpu_index.cpp).
//
// Like the CPU, every index is range-checked before any element moves, so a bad index throws and
// leaves index_add's and scatter_add's output untouched. The check is a small kernel that raises a
// device flag, read back with one 16-byte copy: each indexing op therefore costs ONE host-device
// synchronisation (the price of an exception that names the bad index).
#include "linea/cuda/cuda_backend.h"
#include "linea/cuda/launch_index.h"

namespace linea::cuda {

namespace {

void check_values(const char* op, DType t) {
  LINEA_CHECK(t == DType::Float32 || t == DType::Float64 || t == DType::Int64,
              "[{}] values must be float32, float64 or int64, got {}", op, t);
}

void check_dim(const char* op, int64_t dim, const Tensor& t) {
  LINEA_CHECK(dim >= 0 && dim < t.dim(), "[{}] dim {} out of range for shape {}", op, dim, shape_str(t.shape()));
}

// Throws unless every element of idx lies in [0, size) (see the file comment for the cost).
void check_indices(const char* op, const Tensor& idx, int64_t dim, int64_t size) {
  LINEA_CHECK(idx.dtype() == DType::Int64, "[{}] indices must be int64, got {}", op, idx.dtype());
  const TensorArg ia = arg(idx, op);
  if (idx.numel() == 0) return;
  Tensor slot = empty({2}, DType::Int64, idx.device());  // {flag, one bad value}
  LINEA_CUDA_CHECK(cudaMemsetAsync(slot.data_ptr(), 0, 2 * sizeof(int64_t), stream()));
  launch_check_indices(ia, size, static_cast<int64_t*>(slot.data_ptr()));
  check_launch("check_indices");
  int64_t host[2] = {0, 0};
  LINEA_CUDA_CHECK(cudaMemcpyAsync(host, slot.data_ptr(), sizeof(host), cudaMemcpyDeviceToHost, stream()));
  LINEA_CUDA_CHECK(cudaStreamSynchronize(stream()));
  LINEA_CHECK(host[0] == 0, "[{}] index {} out of range for dim {} of size {}", op, host[1], dim, size);
}

// Checks that `a` has `b`'s shape except along `dim`, where it has n entries.
void check_shape_but_dim(const char* op, const Tensor& a, const Tensor& b, int64_t dim, int64_t n) {
  Shape want = b.shape();
  want[dim] = n;
  LINEA_CHECK(a.shape() == want && a.dtype() == b.dtype(), "[{}] operand of shape {} {} does not match {} {}", op,
              shape_str(a.shape()), a.dtype(), shape_str(want), b.dtype());
}

// gather/scatter_add: idx may be smaller than x, but never larger off `dim`.
void check_fits(const char* op, const Tensor& idx, const Tensor& x, int64_t dim) {
  for (int64_t d = 0; d < x.dim(); ++d)
    LINEA_CHECK(d == dim || idx.shape()[d] <= x.shape()[d], "[{}] index shape {} is larger than {} in dim {}", op,
                shape_str(idx.shape()), shape_str(x.shape()), d);
}

}  // namespace

void CudaBackend::index_select(const Tensor& x, int64_t dim, const Tensor& idx, const Tensor& out) {
  LINEA_CHECK(idx.dim() <= 1, "[index_select] index must be 1-d, got shape {}", shape_str(idx.shape()));
  check_dim("index_select", dim, x);
  check_shape_but_dim("index_select", out, x, dim, idx.numel());
  check_values("index_select", x.dtype());
  check_indices("index_select", idx, dim, x.shape()[dim]);
  launch_index_select(arg(x, "index_select"), static_cast<int>(dim), arg(idx, "index_select"),
                      arg(out, "index_select"));
  check_launch("index_select");
}

void CudaBackend::index_add(const Tensor& out, int64_t dim, const Tensor& idx, const Tensor& src) {
  LINEA_CHECK(idx.dim() <= 1, "[index_add] index must be 1-d, got shape {}", shape_str(idx.shape()));
  LINEA_CHECK(out.is_contiguous(), "[index_add] out must be contiguous");
  check_dim("index_add", dim, out);
  check_shape_but_dim("index_add", src, out, dim, idx.numel());
  check_values("index_add", out.dtype());
  check_indices("index_add", idx, dim, out.shape()[dim]);
  launch_index_add(arg(out, "index_add"), static_cast<int>(dim), arg(idx, "index_add"), arg(src, "index_add"));
  check_launch("index_add");
}

void CudaBackend::gather(const Tensor& x, int64_t dim, const Tensor& idx, const Tensor& out) {
  LINEA_CHECK(idx.dim() == x.dim() && out.shape() == idx.shape() && out.dtype() == x.dtype(),
              "[gather] x {} {}, index {} and out {} {} do not fit", shape_str(x.shape()), x.dtype(),
              shape_str(idx.shape()), shape_str(out.shape()), out.dtype());
  check_dim("gather", dim, x);
  check_fits("gather", idx, x, dim);
  check_values("gather", x.dtype());
  check_indices("gather", idx, dim, x.shape()[dim]);
  launch_gather(arg(x, "gather"), static_cast<int>(dim), arg(idx, "gather"), arg(out, "gather"));
  check_launch("gather");
}

void CudaBackend::scatter_add(const Tensor& out, int64_t dim, const Tensor& idx, const Tensor& src) {
  LINEA_CHECK(idx.dim() == out.dim() && src.shape() == idx.shape() && src.dtype() == out.dtype(),
              "[scatter_add] out {} {}, index {} and src {} {} do not fit", shape_str(out.shape()), out.dtype(),
              shape_str(idx.shape()), shape_str(src.shape()), src.dtype());
  LINEA_CHECK(out.is_contiguous(), "[scatter_add] out must be contiguous");
  check_dim("scatter_add", dim, out);
  check_fits("scatter_add", idx, out, dim);
  check_values("scatter_add", out.dtype());
  check_indices("scatter_add", idx, dim, out.shape()[dim]);
  launch_scatter_add(arg(out, "scatter_add"), static_cast<int>(dim), arg(idx, "scatter_add"),
                     arg(src, "scatter_add"));
  check_launch("scatter_add");
}

}  // namespace linea::cuda
