// Indexing kernels: index_select, index_add, gather, scatter_add, and the range check of their
// indices. Values float32/float64/int64, indices int64; every operand may be strided.
//
// The four ops are one loop. Walk every position p of a shape (the output's for index_select and
// gather, the source's for index_add and scatter_add). p addresses one operand directly ("direct")
// and the index tensor; the other operand ("picked") is addressed by p with p[dim] replaced by the
// index found there. Copies write the direct operand from the picked one; adds accumulate the
// direct operand into the picked one with atomics, so repeated indices all arrive (in an
// unspecified order: float sums may differ from the CPU's in the last bits, run to run).
#include "linea/cuda/cuda_backend.h"
#include "linea/tensor/kernel_checks.h"

namespace linea::cuda {

namespace {

struct Walk {
  int ndim = 0;
  int64_t shape[kMaxDims] = {};
  int64_t direct[kMaxDims] = {};  // strides of the operand addressed by p itself
  int64_t picked[kMaxDims] = {};  // strides of the indexed operand, 0 along dim (the index adds it)
  int64_t index[kMaxDims] = {};   // strides of idx over the walked shape
  int64_t picked_stride = 0;      // the indexed operand's stride along dim
  int64_t numel() const {
    int64_t n = 1;
    for (int d = 0; d < ndim; ++d) n *= shape[d];
    return n;
  }
};

// Walks `over`'s shape; `direct` and `picked` have that rank (picked may be larger off `dim`).
// The index strides are left 0: each launcher sets them for its kind of index.
Walk make_walk(const TensorArg& over, const TensorArg& direct, const TensorArg& picked, int dim) {
  Walk w;
  w.ndim = over.ndim;
  for (int d = 0; d < over.ndim; ++d) {
    w.shape[d] = over.shape[d];
    w.direct[d] = direct.strides[d];
    w.picked[d] = d == dim ? 0 : picked.strides[d];
  }
  w.picked_stride = picked.strides[dim];
  return w;
}

// index_select/index_add: a 0-d or 1-d idx whose i-th entry belongs to position i along dim.
void index_along(Walk& w, const TensorArg& idx, int dim) { w.index[dim] = idx.ndim == 0 ? 0 : idx.strides[0]; }

// gather/scatter_add: idx has the walked shape, one index per position.
void index_everywhere(Walk& w, const TensorArg& idx) {
  for (int d = 0; d < idx.ndim; ++d) w.index[d] = idx.strides[d];
}

__device__ void atomic_add(float* p, float v) { atomicAdd(p, v); }
__device__ void atomic_add(double* p, double v) { atomicAdd(p, v); }
// No signed 64-bit atomicAdd exists; two's-complement addition is the same bits unsigned.
__device__ void atomic_add(int64_t* p, int64_t v) {
  static_assert(sizeof(unsigned long long) == sizeof(int64_t));
  atomicAdd(reinterpret_cast<unsigned long long*>(p), static_cast<unsigned long long>(v));
}

// dst is the direct operand for copies (src the picked one) and the picked one for adds (src the
// direct one).
template <class T, bool kAdd>
__global__ void index_kernel(Walk w, int64_t total, T* dst, const T* src, const int64_t* idx) {
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += step) {
    int64_t rem = i, direct = 0, picked = 0, k = 0;
    for (int d = w.ndim - 1; d >= 0; --d) {  // row-major coordinates of position i
      const int64_t c = rem % w.shape[d];
      rem /= w.shape[d];
      direct += c * w.direct[d];
      picked += c * w.picked[d];
      k += c * w.index[d];
    }
    picked += idx[k] * w.picked_stride;  // idx was range-checked before the launch
    if constexpr (kAdd)
      atomic_add(dst + picked, src[direct]);
    else
      dst[direct] = src[picked];
  }
}

template <bool kAdd>
void launch(const Walk& w, DType dtype, void* dst, const void* src, const void* idx) {
  const int64_t total = w.numel();
  if (total == 0) return;
  const auto* pi = static_cast<const int64_t*>(idx);
  const unsigned grid = blocks_for(total);
  switch (dtype) {  // the caller admits only these three value types
    case DType::Float32:
      index_kernel<float, kAdd><<<grid, 256, 0, stream()>>>(w, total, static_cast<float*>(dst),
                                                             static_cast<const float*>(src), pi);
      break;
    case DType::Float64:
      index_kernel<double, kAdd><<<grid, 256, 0, stream()>>>(w, total, static_cast<double*>(dst),
                                                              static_cast<const double*>(src), pi);
      break;
    case DType::Int64:
      index_kernel<int64_t, kAdd><<<grid, 256, 0, stream()>>>(w, total, static_cast<int64_t*>(dst),
                                                               static_cast<const int64_t*>(src), pi);
      break;
    default: break;
  }
}

__global__ void check_indices_kernel(TensorArg idx, int64_t total, int64_t size, int64_t* slot) {
  const auto* p = static_cast<const int64_t*>(idx.data);
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += step) {
    int64_t rem = i, off = 0;
    for (int d = idx.ndim - 1; d >= 0; --d) {
      off += (rem % idx.shape[d]) * idx.strides[d];
      rem /= idx.shape[d];
    }
    const int64_t v = p[off];
    // The first thread to flip the flag records its value; later ones leave it alone.
    if ((v < 0 || v >= size) && atomicCAS(reinterpret_cast<unsigned long long*>(slot), 0ULL, 1ULL) == 0ULL)
      slot[1] = v;
  }
}

}  // namespace

// slot: two int64s on the device, zeroed by the caller. If some element of idx lies outside
// [0, size), slot[0] becomes 1 and slot[1] one offending value (whichever thread got there first).
void launch_check_indices(const TensorArg& idx, int64_t size, int64_t* slot) {
  const int64_t total = idx.numel();
  if (total == 0) return;
  check_indices_kernel<<<blocks_for(total), 256, 0, stream()>>>(idx, total, size, slot);
}

// out = x with `dim` replaced by the n entries of the 0-d or 1-d idx: out[.., i, ..] = x[.., idx[i], ..].
void launch_index_select(const TensorArg& x, int dim, const TensorArg& idx, const TensorArg& out) {
  Walk w = make_walk(out, out, x, dim);
  index_along(w, idx, dim);
  launch<false>(w, x.dtype, out.data, x.data, idx.data);
}

// out[.., idx[i], ..] += src[.., i, ..], repeated indices accumulating (atomics).
void launch_index_add(const TensorArg& out, int dim, const TensorArg& idx, const TensorArg& src) {
  Walk w = make_walk(src, src, out, dim);
  index_along(w, idx, dim);
  launch<true>(w, out.dtype, out.data, src.data, idx.data);
}

// out[p] = x[p with p[dim] = idx[p]] for every position p of idx (out has idx's shape).
void launch_gather(const TensorArg& x, int dim, const TensorArg& idx, const TensorArg& out) {
  Walk w = make_walk(idx, out, x, dim);
  index_everywhere(w, idx);
  launch<false>(w, x.dtype, out.data, x.data, idx.data);
}

// out[p with p[dim] = idx[p]] += src[p] for every position p of idx (src has idx's shape).
void launch_scatter_add(const TensorArg& out, int dim, const TensorArg& idx, const TensorArg& src) {
  Walk w = make_walk(idx, src, out, dim);
  index_everywhere(w, idx);
  launch<true>(w, out.dtype, out.data, src.data, idx.data);
}

// ---- CudaBackend::index_select, index_add, gather, scatter_add ----
// The checks and errors shared with the CPU (tensor/kernel_checks.h), then the launchers above.
//
// Like the CPU, every index is range-checked before any element moves, so a bad index throws and
// leaves index_add's and scatter_add's output untouched. The check is a small kernel that raises a
// device flag, read back with one 16-byte copy: each indexing op therefore costs ONE host-device
// synchronisation (the price of an exception that names the bad index).

namespace {

// Throws unless every element of the int64 idx lies in [0, size) (see above for the cost).
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

void CudaBackend::do_index_select(const Tensor& x, int64_t dim, const Tensor& idx, const Tensor& out) {
  run("index_select", launch_index_select, x, dim, idx, out, x.shape()[dim]);
}

void CudaBackend::do_index_add(const Tensor& out, int64_t dim, const Tensor& idx, const Tensor& src) {
  run("index_add", launch_index_add, out, dim, idx, src, out.shape()[dim]);
}

void CudaBackend::do_gather(const Tensor& x, int64_t dim, const Tensor& idx, const Tensor& out) {
  run("gather", launch_gather, x, dim, idx, out, x.shape()[dim]);
}

void CudaBackend::do_scatter_add(const Tensor& out, int64_t dim, const Tensor& idx, const Tensor& src) {
  run("scatter_add", launch_scatter_add, out, dim, idx, src, out.shape()[dim]);
}

}  // namespace linea::cuda
