// The fused kernels for nn/ on the GPU: cross-entropy forward and
// backward, AdamW and SGD as multi-tensor apply, the sum of squares and the scaling behind
// clip_grad_norm_, counter-based uniform numbers, cumsum. Each follows its CPU kernel in tensor/cpu/
// (cpu_loss.cpp, cpu_optim.cpp, cpu_random.cpp, cpu_scan.cpp) operation for operation; results
// differ only by the order of sums and by fused multiply-adds, except random_uniform, cumsum and
// the scaling, which are bit-identical.
//
// The CudaBackend methods, at the end, hand the tensors (checked by Backend's methods) to the
// launchers; the optimizer steps and scale_all build the multi-tensor apply's table of parameters.
#include <cmath>
#include <cstdint>
#include <memory>
#include <vector>

#include "linea/cuda/cuda_backend.h"
#include "linea/tensor/counter_rng.h"  // plain integer math, written to be compiled by nvcc too

namespace linea::cuda {

// ---- the launchers (defined after the kernels) ----
// Element pointers are to element 0 of contiguous data; dt names the element type; everything
// runs on stream().

// Backend::cross_entropy_forward / _backward on x [rows, C] (dt F32 or F64). weight has
// `weight_stride` elements between rows (0: one weight for all rows).
void launch_cross_entropy_forward(DType dt, const void* x, const int64_t* target, int64_t rows, int64_t C,
                                  int64_t ignore_index, double eps, double* lse, double* loss);
void launch_cross_entropy_backward(DType dt, const void* x, const int64_t* target, const double* lse,
                                   const double* weight, int64_t weight_stride, int64_t rows, int64_t C,
                                   int64_t ignore_index, double eps, void* dx);

// ---- multi-tensor apply (optimizer steps) ----
// Each parameter is cut into chunks of kFusedChunk elements and one thread block updates one
// chunk, so a single launch covers every parameter. Block b belongs to the parameter i with the
// largest first_block <= b (a binary search over this table, which lives in device memory).
inline constexpr int64_t kFusedChunk = 16384;

struct FusedParam {
  void* param = nullptr;
  const void* grad = nullptr;
  void* buf0 = nullptr;  // AdamW: exp_avg;    SGD: momentum buffer (nullptr without momentum)
  void* buf1 = nullptr;  // AdamW: exp_avg_sq; SGD: unused
  int64_t n = 0;            // elements (> 0)
  int64_t first_block = 0;  // this parameter's first block in the launch
  double s0 = 0, s1 = 0, s2 = 0;  // AdamW: decay, step_size, sqrt_bc2; SGD: lr, weight_decay, unused;
                                  // scale_all: factor, unused, unused
  int32_t first = 0;              // SGD: the parameter's first step
};

// Blocks needed for n elements.
inline int64_t fused_blocks(int64_t n) { return (n + kFusedChunk - 1) / kFusedChunk; }

// `params` (device memory) holds `nparams` entries of one dtype dt, with first_block filled in;
// `nblocks` is the sum of fused_blocks(n) over them.
void launch_adamw_step(DType dt, const FusedParam* params, int nparams, int64_t nblocks, double beta1, double beta2,
                       double eps);
void launch_sgd_step(DType dt, const FusedParam* params, int nparams, int64_t nblocks, double momentum, bool nesterov);
// Backend::scale_all: each entry's param (n elements) times its s0.
void launch_scale_all(DType dt, const FusedParam* params, int nparams, int64_t nblocks);

// *out = Σ x_i² (square) or Σ x_i, in double, over n contiguous elements (dt F32 or F64). Two
// kernels: kSumBlocks blocks write partial sums to `partial` (device memory for that many
// doubles), one block adds them. The grid is fixed, so the order of the sum (and the result) is
// the same on every run and every GPU. Used for sum_squares and cross-entropy's total.
inline constexpr int kSumBlocks = 512;
void launch_sum(DType dt, const void* x, int64_t n, bool square, double* partial, double* out);

// out[i] = u(seed, offset + i), i < n (dt F32 or F64), tensor/counter_rng.h.
void launch_random_uniform(DType dt, void* out, int64_t n, uint64_t seed, uint64_t offset);

// Backend::cumsum over contiguous [outer, n, inner] (dt F32, F64 or I64).
void launch_cumsum(DType dt, const void* x, void* out, int64_t outer, int64_t n, int64_t inner, bool exclusive,
                   bool reverse);

namespace {

constexpr int kThreads = 256;  // every kernel here: a multiple of 32, so warps are full

// Row-per-block grids: at most this many blocks, each looping over rows with a grid stride.
unsigned row_blocks(int64_t rows) { return static_cast<unsigned>(rows < 65535 * 8 ? rows : 65535 * 8); }

__device__ inline float exp_t(float x) { return expf(x); }
__device__ inline double exp_t(double x) { return exp(x); }
__device__ inline float sqrt_t(float x) { return sqrtf(x); }
__device__ inline double sqrt_t(double x) { return sqrt(x); }

struct MaxOp {
  __device__ double operator()(double a, double b) const { return a < b ? b : a; }
};
struct SumOp {
  __device__ double operator()(double a, double b) const { return a + b; }
};

// Reduces v over the block (blockDim.x a multiple of 32, at most 1024) and returns the result
// to every thread. sh: 32 doubles of shared memory. Values are exchanged as double: float maxima
// convert exactly, and the cross-entropy sums are double anyway.
template <class Op>
__device__ double block_reduce(double v, Op op, double identity, double* sh) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = blockDim.x >> 5;
  for (int o = 16; o > 0; o >>= 1) v = op(v, __shfl_xor_sync(0xffffffffu, v, o));
  __syncthreads();  // the previous call's readers are done with sh
  if (lane == 0) sh[warp] = v;
  __syncthreads();
  v = lane < nwarps ? sh[lane] : identity;
  for (int o = 16; o > 0; o >>= 1) v = op(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

// ---------------------------------------------------------------- cross-entropy

// One block per row: max, then Σ exp(x - m) and Σ (x - m) in double; thread 0 writes the row.
// The ignore test reads one value per row, so every branch here is uniform across the block
// (block_reduce's __syncthreads are reached by all threads).
template <class T>
__global__ void ce_forward_kernel(const T* x, const int64_t* tgt, int64_t rows, int64_t C, int64_t ignore_index,
                                  double eps, double* lse, double* loss) {
  __shared__ double sh[32];
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const int64_t t = tgt[r];
    if (t == ignore_index) {
      if (threadIdx.x == 0) lse[r] = loss[r] = 0;
      continue;
    }
    const T* xr = x + r * C;
    T m = -INFINITY;
    for (int64_t c = threadIdx.x; c < C; c += blockDim.x) m = m < xr[c] ? xr[c] : m;
    m = static_cast<T>(block_reduce(static_cast<double>(m), MaxOp{}, -INFINITY, sh));
    double s = 0, sx = 0;
    for (int64_t c = threadIdx.x; c < C; c += blockDim.x) {
      const T d = xr[c] - m;
      s += exp_t(d);
      sx += d;
    }
    s = block_reduce(s, SumOp{}, 0.0, sh);
    sx = block_reduce(sx, SumOp{}, 0.0, sh);
    if (threadIdx.x == 0 && (t < 0 || t >= C)) {
      lse[r] = loss[r] = NAN;  // the caller range-checks; never read outside the row regardless
    } else if (threadIdx.x == 0) {
      const double log_s = log(s);
      lse[r] = static_cast<double>(m) + log_s;
      // Without smoothing sx is left out: a masked (-inf) logit would make 0 * sx a NaN.
      loss[r] = log_s - (1 - eps) * static_cast<double>(xr[t] - m) - (eps > 0 ? eps / C * sx : 0.0);
    }
  }
}

// dx = w_r (exp(x - lse_r) - eps/C - (1 - eps)[c == t_r]); elementwise once lse is known.
template <class T>
__global__ void ce_backward_kernel(const T* x, const int64_t* tgt, const double* lse, const double* w,
                                   int64_t w_stride, int64_t rows, int64_t C, int64_t ignore_index, double eps,
                                   T* dx) {
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const int64_t t = tgt[r];
    T* dr = dx + r * C;
    if (t == ignore_index) {
      for (int64_t c = threadIdx.x; c < C; c += blockDim.x) dr[c] = 0;
      continue;
    }
    const T* xr = x + r * C;
    const double wd = w[r * w_stride], l = lse[r];
    const T wr = static_cast<T>(wd), off = static_cast<T>(eps / C), on_target = static_cast<T>((1 - eps) * wd);
    for (int64_t c = threadIdx.x; c < C; c += blockDim.x) {
      T v = (exp_t(static_cast<T>(xr[c] - l)) - off) * wr;
      if (c == t) v -= on_target;
      dr[c] = v;
    }
  }
}

// ---------------------------------------------------------------- multi-tensor apply

// The parameter that block b updates: the largest i with params[i].first_block <= b (entry 0
// starts at block 0, so one exists). Every thread of the block searches: a few cached loads.
__device__ inline const FusedParam& param_of_block(const FusedParam* params, int nparams, int64_t b) {
  int lo = 0, hi = nparams - 1;
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    if (params[mid].first_block <= b) lo = mid;
    else hi = mid - 1;
  }
  return params[lo];
}

template <class T>
__global__ void adamw_kernel(const FusedParam* params, int nparams, T beta1, T beta2, T eps) {
  const int64_t b = blockIdx.x;
  const FusedParam& fp = param_of_block(params, nparams, b);
  T* p = static_cast<T*>(fp.param);
  const T* g = static_cast<const T*>(fp.grad);
  T* m = static_cast<T*>(fp.buf0);
  T* v = static_cast<T*>(fp.buf1);
  const T decay = static_cast<T>(fp.s0), step_size = static_cast<T>(fp.s1), sqrt_bc2 = static_cast<T>(fp.s2);
  const int64_t start = (b - fp.first_block) * kFusedChunk;
  const int64_t end = start + kFusedChunk < fp.n ? start + kFusedChunk : fp.n;
  for (int64_t i = start + threadIdx.x; i < end; i += blockDim.x) {
    const T gi = g[i];
    const T mi = beta1 * m[i] + (1 - beta1) * gi;
    const T vi = beta2 * v[i] + (1 - beta2) * gi * gi;
    T pi = p[i] * decay;
    pi -= step_size * mi / (sqrt_t(vi) / sqrt_bc2 + eps);
    p[i] = pi;
    m[i] = mi;
    v[i] = vi;
  }
}

template <class T>
__global__ void sgd_kernel(const FusedParam* params, int nparams, T momentum, bool nesterov) {
  const int64_t b = blockIdx.x;
  const FusedParam& fp = param_of_block(params, nparams, b);
  T* p = static_cast<T*>(fp.param);
  const T* g = static_cast<const T*>(fp.grad);
  T* buf = static_cast<T*>(fp.buf0);
  const T lr = static_cast<T>(fp.s0), wd = static_cast<T>(fp.s1);
  const bool first = fp.first != 0;
  const int64_t start = (b - fp.first_block) * kFusedChunk;
  const int64_t end = start + kFusedChunk < fp.n ? start + kFusedChunk : fp.n;
  for (int64_t i = start + threadIdx.x; i < end; i += blockDim.x) {
    T d = g[i] + wd * p[i];
    if (buf) {
      const T bi = first ? d : momentum * buf[i] + d;
      buf[i] = bi;
      d = nesterov ? d + momentum * bi : bi;
    }
    p[i] -= lr * d;
  }
}

// Backend::scale_all: x *= factor (fp.param, fp.s0), the factor cast to T as the CPU does.
template <class T>
__global__ void scale_kernel(const FusedParam* params, int nparams) {
  const int64_t b = blockIdx.x;
  const FusedParam& fp = param_of_block(params, nparams, b);
  T* x = static_cast<T*>(fp.param);
  const T factor = static_cast<T>(fp.s0);
  const int64_t start = (b - fp.first_block) * kFusedChunk;
  const int64_t end = start + kFusedChunk < fp.n ? start + kFusedChunk : fp.n;
  for (int64_t i = start + threadIdx.x; i < end; i += blockDim.x) x[i] *= factor;
}

// Σ x² (or Σ x) over a grid-stride slice per block (the same slices for every n: the grid is fixed).
template <class T, bool Square>
__global__ void sum_partial_kernel(const T* x, int64_t n, double* partial) {
  __shared__ double sh[32];
  const int64_t stride = static_cast<int64_t>(blockDim.x) * gridDim.x;
  double acc = 0;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    const double v = x[i];
    acc += Square ? v * v : v;
  }
  acc = block_reduce(acc, SumOp{}, 0.0, sh);
  if (threadIdx.x == 0) partial[blockIdx.x] = acc;
}

// One block adds the nparts partial sums.
__global__ void sum_partials_kernel(const double* partial, int nparts, double* out) {
  __shared__ double sh[32];
  double acc = 0;
  for (int i = threadIdx.x; i < nparts; i += blockDim.x) acc += partial[i];
  acc = block_reduce(acc, SumOp{}, 0.0, sh);
  if (threadIdx.x == 0) *out = acc;
}

// ---------------------------------------------------------------- random numbers and scans

__device__ inline void store_unit(float* o, uint64_t b) { *o = rng::unit_float(b); }
__device__ inline void store_unit(double* o, uint64_t b) { *o = rng::unit_double(b); }

template <class T>
__global__ void uniform_kernel(T* out, int64_t n, uint64_t key, uint64_t offset) {
  const int64_t stride = static_cast<int64_t>(blockDim.x) * gridDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride)
    store_unit(out + i, rng::bits(key, offset + static_cast<uint64_t>(i)));
}

// One thread per (outer, inner) column, summing down its n elements in order (so the result
// equals the CPU's bit for bit). Neighbouring threads own neighbouring columns: coalesced.
template <class T>
__global__ void cumsum_kernel(const T* x, T* out, int64_t outer, int64_t n, int64_t inner, bool exclusive,
                              bool reverse) {
  const int64_t cols = outer * inner, stride = static_cast<int64_t>(blockDim.x) * gridDim.x;
  for (int64_t col = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; col < cols; col += stride) {
    const int64_t base = (col / inner) * n * inner + col % inner;
    T run = 0;
    for (int64_t step = 0; step < n; ++step) {
      const int64_t at = base + (reverse ? n - 1 - step : step) * inner;
      const T v = x[at];
      if (exclusive) {
        out[at] = run;
        run += v;
      } else {
        run += v;
        out[at] = run;
      }
    }
  }
}

}  // namespace

// ---------------------------------------------------------------- launchers

void launch_cross_entropy_forward(DType dt, const void* x, const int64_t* target, int64_t rows, int64_t C,
                                  int64_t ignore_index, double eps, double* lse, double* loss) {
  if (rows == 0) return;
  if (dt == DType::Float32)
    ce_forward_kernel<float><<<row_blocks(rows), kThreads, 0, stream()>>>(static_cast<const float*>(x), target, rows,
                                                                          C, ignore_index, eps, lse, loss);
  else
    ce_forward_kernel<double><<<row_blocks(rows), kThreads, 0, stream()>>>(static_cast<const double*>(x), target,
                                                                           rows, C, ignore_index, eps, lse, loss);
}

void launch_cross_entropy_backward(DType dt, const void* x, const int64_t* target, const double* lse,
                                   const double* weight, int64_t weight_stride, int64_t rows, int64_t C,
                                   int64_t ignore_index, double eps, void* dx) {
  if (rows == 0) return;
  if (dt == DType::Float32)
    ce_backward_kernel<float><<<row_blocks(rows), kThreads, 0, stream()>>>(
        static_cast<const float*>(x), target, lse, weight, weight_stride, rows, C, ignore_index, eps,
        static_cast<float*>(dx));
  else
    ce_backward_kernel<double><<<row_blocks(rows), kThreads, 0, stream()>>>(
        static_cast<const double*>(x), target, lse, weight, weight_stride, rows, C, ignore_index, eps,
        static_cast<double*>(dx));
}

void launch_adamw_step(DType dt, const FusedParam* params, int nparams, int64_t nblocks, double beta1, double beta2,
                       double eps) {
  if (nparams == 0 || nblocks == 0) return;
  const unsigned grid = static_cast<unsigned>(nblocks);  // the caller keeps nblocks < 2^31
  if (dt == DType::Float32)
    adamw_kernel<float><<<grid, kThreads, 0, stream()>>>(params, nparams, static_cast<float>(beta1),
                                                         static_cast<float>(beta2), static_cast<float>(eps));
  else
    adamw_kernel<double><<<grid, kThreads, 0, stream()>>>(params, nparams, beta1, beta2, eps);
}

void launch_sgd_step(DType dt, const FusedParam* params, int nparams, int64_t nblocks, double momentum, bool nesterov) {
  if (nparams == 0 || nblocks == 0) return;
  const unsigned grid = static_cast<unsigned>(nblocks);
  if (dt == DType::Float32)
    sgd_kernel<float><<<grid, kThreads, 0, stream()>>>(params, nparams, static_cast<float>(momentum), nesterov);
  else
    sgd_kernel<double><<<grid, kThreads, 0, stream()>>>(params, nparams, momentum, nesterov);
}

void launch_scale_all(DType dt, const FusedParam* params, int nparams, int64_t nblocks) {
  if (nparams == 0 || nblocks == 0) return;
  const unsigned grid = static_cast<unsigned>(nblocks);
  if (dt == DType::Float32) scale_kernel<float><<<grid, kThreads, 0, stream()>>>(params, nparams);
  else scale_kernel<double><<<grid, kThreads, 0, stream()>>>(params, nparams);
}

void launch_sum(DType dt, const void* x, int64_t n, bool square, double* partial, double* out) {
  // Launched even for n = 0, so that *out is written (0).
  const auto* xf = static_cast<const float*>(x);
  const auto* xd = static_cast<const double*>(x);
  if (dt == DType::Float32 && square) sum_partial_kernel<float, true><<<kSumBlocks, kThreads, 0, stream()>>>(xf, n, partial);
  else if (dt == DType::Float32) sum_partial_kernel<float, false><<<kSumBlocks, kThreads, 0, stream()>>>(xf, n, partial);
  else if (square) sum_partial_kernel<double, true><<<kSumBlocks, kThreads, 0, stream()>>>(xd, n, partial);
  else sum_partial_kernel<double, false><<<kSumBlocks, kThreads, 0, stream()>>>(xd, n, partial);
  sum_partials_kernel<<<1, kThreads, 0, stream()>>>(partial, kSumBlocks, out);
}

void launch_random_uniform(DType dt, void* out, int64_t n, uint64_t seed, uint64_t offset) {
  if (n == 0) return;
  const uint64_t key = rng::stream_key(seed);
  if (dt == DType::Float32)
    uniform_kernel<float><<<blocks_for(n, kThreads), kThreads, 0, stream()>>>(static_cast<float*>(out), n, key, offset);
  else
    uniform_kernel<double><<<blocks_for(n, kThreads), kThreads, 0, stream()>>>(static_cast<double*>(out), n, key,
                                                                               offset);
}

void launch_cumsum(DType dt, const void* x, void* out, int64_t outer, int64_t n, int64_t inner, bool exclusive,
                   bool reverse) {
  const int64_t cols = outer * inner;
  if (cols == 0 || n == 0) return;
  const unsigned grid = blocks_for(cols, kThreads);
  switch (dt) {
    case DType::Float32:
      cumsum_kernel<float><<<grid, kThreads, 0, stream()>>>(static_cast<const float*>(x), static_cast<float*>(out),
                                                            outer, n, inner, exclusive, reverse);
      break;
    case DType::Float64:
      cumsum_kernel<double><<<grid, kThreads, 0, stream()>>>(static_cast<const double*>(x),
                                                             static_cast<double*>(out), outer, n, inner, exclusive,
                                                             reverse);
      break;
    case DType::Int64:
      cumsum_kernel<int64_t><<<grid, kThreads, 0, stream()>>>(static_cast<const int64_t*>(x),
                                                              static_cast<int64_t*>(out), outer, n, inner, exclusive,
                                                              reverse);
      break;
    default: break;  // Backend::cumsum admits only the three above
  }
}

namespace {

// Multi-tensor apply: for each dtype present, the table of that dtype's non-empty parameters
// (with first_block) goes to device memory in one copy and `launch` runs one kernel over it.
template <class Launch>
void apply_fused(const char* kernel, std::vector<std::pair<DType, FusedParam>> entries, Launch&& launch) {
  for (DType dtype : {DType::Float32, DType::Float64}) {
    std::vector<FusedParam> table;
    int64_t nblocks = 0;
    for (auto& [d, fp] : entries) {
      if (d != dtype || fp.n == 0) continue;
      fp.first_block = nblocks;
      nblocks += fused_blocks(fp.n);
      table.push_back(fp);
    }
    if (table.empty()) continue;
    check_fused_launch(kernel, table.size(), nblocks);
    // The table's device copy is freed when this returns: the caching allocator hands it out
    // again only to work queued after this kernel on the same stream.
    const std::size_t nbytes = table.size() * sizeof(FusedParam);
    std::shared_ptr<Storage> dev_table = instance().do_allocate(nbytes);
    instance().do_copy_from_host(*dev_table, 0, table.data(), nbytes);
    launch(dtype, static_cast<const FusedParam*>(dev_table->data), static_cast<int>(table.size()), nblocks);
    check_launch(kernel);
  }
}

// out (0-d float64) = Σ x² or Σ x over contiguous floating x, through launch_sum.
void device_sum(const Tensor& x, bool square, const Tensor& out) {
  const TensorArg xa = arg(x, "sum"), oa = arg(out, "sum");
  // Partial sums in a scratch block, freed (stream-ordered, like apply_fused's table) on return.
  std::shared_ptr<Storage> partial = instance().do_allocate(kSumBlocks * sizeof(double));
  launch_sum(xa.dtype, xa.data, x.numel(), square, static_cast<double*>(partial->data), static_cast<double*>(oa.data));
  check_launch("sum_partial_kernel / sum_partials_kernel");
}

}  // namespace

void CudaBackend::do_cross_entropy_forward(const Tensor& x, const Tensor& target, int64_t ignore_index,
                                           double label_smoothing, const Tensor& lse, const Tensor& loss,
                                           const Tensor& total) {
  const char* op = "cross_entropy_forward";
  const int64_t rows = x.size(0), C = x.size(1);
  const TensorArg xa = arg(x, op), ta = arg(target, op), la = arg(lse, op), lo = arg(loss, op);
  launch_cross_entropy_forward(xa.dtype, xa.data, static_cast<const int64_t*>(ta.data), rows, C, ignore_index,
                               label_smoothing, static_cast<double*>(la.data), static_cast<double*>(lo.data));
  check_launch("ce_forward_kernel");
  if (total.defined()) device_sum(loss, false, total);
}

void CudaBackend::do_cross_entropy_backward(const Tensor& x, const Tensor& target, const Tensor& lse,
                                            const Tensor& weight, int64_t ignore_index, double label_smoothing,
                                            const Tensor& dx) {
  const char* op = "cross_entropy_backward";
  const int64_t rows = x.size(0), C = x.size(1);
  const TensorArg xa = arg(x, op), ta = arg(target, op), la = arg(lse, op), wa = arg(weight, op), da = arg(dx, op);
  launch_cross_entropy_backward(xa.dtype, xa.data, static_cast<const int64_t*>(ta.data),
                                static_cast<const double*>(la.data), static_cast<const double*>(wa.data),
                                rows ? wa.strides[0] : 0, rows, C, ignore_index, label_smoothing, da.data);
  check_launch("ce_backward_kernel");
}

void CudaBackend::do_adamw_step(const std::vector<AdamWParam>& params, double beta1, double beta2, double eps) {
  std::vector<std::pair<DType, FusedParam>> entries;
  for (const AdamWParam& a : params) {
    FusedParam fp;
    fp.param = a.param.data_ptr();
    fp.grad = a.grad.data_ptr();
    fp.buf0 = a.exp_avg.data_ptr();
    fp.buf1 = a.exp_avg_sq.data_ptr();
    fp.n = a.param.numel();
    fp.s0 = a.decay;
    fp.s1 = a.step_size;
    fp.s2 = a.sqrt_bc2;
    entries.emplace_back(a.param.dtype(), fp);
  }
  apply_fused("adamw_kernel", std::move(entries), [&](DType d, const FusedParam* table, int n, int64_t nblocks) {
    launch_adamw_step(d, table, n, nblocks, beta1, beta2, eps);
  });
}

void CudaBackend::do_sgd_step(const std::vector<SgdParam>& params, double momentum, bool nesterov) {
  std::vector<std::pair<DType, FusedParam>> entries;
  for (const SgdParam& s : params) {
    FusedParam fp;
    fp.param = s.param.data_ptr();
    fp.grad = s.grad.data_ptr();
    fp.buf0 = s.momentum_buffer.defined() ? s.momentum_buffer.data_ptr() : nullptr;
    fp.n = s.param.numel();
    fp.s0 = s.lr;
    fp.s1 = s.weight_decay;
    fp.first = s.first ? 1 : 0;
    entries.emplace_back(s.param.dtype(), fp);
  }
  apply_fused("sgd_kernel", std::move(entries), [&](DType d, const FusedParam* table, int n, int64_t nblocks) {
    launch_sgd_step(d, table, n, nblocks, momentum, nesterov);
  });
}

void CudaBackend::do_sum_squares(const std::vector<Tensor>& xs, const Tensor& out) {
  for (size_t t = 0; t < xs.size(); ++t) device_sum(xs[t], true, out.select(0, int64_t(t)));
}

void CudaBackend::do_scale_all(const std::vector<Tensor>& xs, double factor) {
  std::vector<std::pair<DType, FusedParam>> entries;
  for (const Tensor& x : xs) {
    FusedParam fp;
    fp.param = x.data_ptr();
    fp.n = x.numel();
    fp.s0 = factor;
    entries.emplace_back(x.dtype(), fp);
  }
  apply_fused("scale_kernel", std::move(entries), [&](DType d, const FusedParam* table, int n, int64_t nblocks) {
    launch_scale_all(d, table, n, nblocks);
  });
}

void CudaBackend::do_random_uniform(const Tensor& out, uint64_t seed, uint64_t offset) {
  const TensorArg oa = arg(out, "random_uniform");
  launch_random_uniform(oa.dtype, oa.data, out.numel(), seed, offset);
  check_launch("uniform_kernel");
}

void CudaBackend::do_cumsum(const Tensor& x, const Tensor& out, int64_t outer, int64_t n, int64_t inner, bool exclusive,
                            bool reverse) {
  const TensorArg xa = arg(x, "cumsum"), oa = arg(out, "cumsum");
  launch_cumsum(xa.dtype, xa.data, oa.data, outer, n, inner, exclusive, reverse);
  check_launch("cumsum_kernel");
}

}  // namespace linea::cuda
