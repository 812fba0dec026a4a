// LayerNorm and RMSNorm over the last dim on the GPU, with the semantics of
// tensor/cpu/cpu_norm.cpp: one template serves both (RMSNorm = no centring, no bias), all sums
// in double, and the variance from a second pass over the row (not E[x^2] - E[x]^2, which
// cancels for rows like 1e4 + noise).
//
// Forward and dx: a group per row (a warp for rows up to 1024, else a block), each pass striding
// through the row; the row is re-read from memory (L1/L2) rather than kept in shared memory, so
// any row length works. Backward, with xhat = (x - mean) * rstd and g = dy * weight:
//   dx      = rstd * (g - mean(g) - xhat * mean(g * xhat))     (RMSNorm: no mean(g) term)
//   dweight = sum_rows dy * xhat,   dbias = sum_rows dy
// dweight/dbias are column sums over rows: norm_params_partial gives each block of rows its own
// row of partial sums in a scratch buffer, norm_params_finish adds them in order. No atomics, so
// the bits are the same every run.
#include <algorithm>
#include <cstdint>

#include "linea/cuda/cuda_backend.h"
#include "linea/cuda/group_reduce.cuh"
#include "linea/tensor/kernel_checks.h"

namespace linea::cuda {

namespace {

template <class T, bool Center, int G>
__global__ void __launch_bounds__(kThreads)
    norm_forward_rows(const T* __restrict__ x, const T* __restrict__ w, const T* __restrict__ b, double eps,
                      T* __restrict__ y, T* __restrict__ mean, T* __restrict__ rstd, int64_t rows, int64_t n) {
  __shared__ double buf[kThreads / 32];
  for_each_group_row<G>(rows, [&](int64_t r, int lane) {
    const T* xr = x + r * n;
    T* yr = y + r * n;
    double m = 0;
    if constexpr (Center) {
      double s = 0;
      for (int64_t j = lane; j < n; j += G) s += xr[j];
      m = group_allreduce<G, SumDouble>(s, buf) / static_cast<double>(n);
    }
    double v = 0;
    for (int64_t j = lane; j < n; j += G) {
      const double d = xr[j] - m;
      v += d * d;
    }
    v = group_allreduce<G, SumDouble>(v, buf);
    // A constant row has v = 0: rstd = 1/sqrt(eps) stays finite and xhat is exactly 0.
    const double rs = 1.0 / sqrt(v / static_cast<double>(n) + eps);
    for (int64_t j = lane; j < n; j += G) {
      double o = (xr[j] - m) * rs;
      if (w) o *= w[j];
      if (b) o += b[j];
      yr[j] = static_cast<T>(o);
    }
    if (lane == 0) {
      if constexpr (Center) mean[r] = static_cast<T>(m);
      rstd[r] = static_cast<T>(rs);
    }
  });
}

// The two row sums dx needs: sum(g) and sum(g * xhat).
struct SumPair {
  struct State {
    double g, gx;
  };
  static __device__ void merge(State& a, const State& b) {
    a.g += b.g;
    a.gx += b.gx;
  }
};

template <class T, bool Center, int G>
__global__ void __launch_bounds__(kThreads)
    norm_backward_rows(const T* dy, const T* __restrict__ x, const T* __restrict__ w, const T* __restrict__ mean,
                       const T* __restrict__ rstd, T* dx, int64_t rows, int64_t n) {
  __shared__ SumPair::State buf[kThreads / 32];
  for_each_group_row<G>(rows, [&](int64_t r, int lane) {
    const T *gr = dy + r * n, *xr = x + r * n;
    T* dr = dx + r * n;
    const double m = Center ? static_cast<double>(mean[r]) : 0.0, rs = rstd[r];
    // xhat and g are recomputed in the second pass instead of stored: a row may be any length.
    // dx may be dy itself (no __restrict__ on them): each lane reads g[j] before it writes dx[j],
    // and no other lane reads its j after the group's reduction.
    auto xhat = [&](int64_t j) { return (xr[j] - m) * rs; };
    auto grad = [&](int64_t j) { return w ? static_cast<double>(gr[j]) * w[j] : static_cast<double>(gr[j]); };
    SumPair::State p{0.0, 0.0};
    for (int64_t j = lane; j < n; j += G) {
      const double g = grad(j);
      p.g += g;
      p.gx += g * xhat(j);
    }
    p = group_allreduce<G, SumPair>(p, buf);
    const double mean_g = Center ? p.g / static_cast<double>(n) : 0.0, mean_gx = p.gx / static_cast<double>(n);
    for (int64_t j = lane; j < n; j += G) dr[j] = static_cast<T>(rs * (grad(j) - mean_g - xhat(j) * mean_gx));
  });
}

// Block row blockIdx.y of the params pass: rows [y * rows_per_split, ...) summed per column j into
// partial[y][0][j] (dy * xhat, for dweight) and partial[y][1][j] (dy, for dbias). Threads own
// neighbouring columns, so each row segment is read coalesced.
template <class T, bool Center>
__global__ void __launch_bounds__(kThreads)
    norm_params_partial(const T* __restrict__ dy, const T* __restrict__ x, const T* __restrict__ mean,
                        const T* __restrict__ rstd, double* __restrict__ partial, int64_t rows, int64_t n,
                        int64_t rows_per_split, bool want_w) {
  const int64_t r0 = static_cast<int64_t>(blockIdx.y) * rows_per_split, r1 = min(rows, r0 + rows_per_split);
  double* pw = partial + static_cast<int64_t>(blockIdx.y) * 2 * n;
  double* pb = pw + n;
  for (int64_t j = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; j < n;
       j += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    double sw = 0, sb = 0;
    for (int64_t r = r0; r < r1; ++r) {
      const double g = dy[r * n + j];
      sb += g;
      if (want_w) {
        const double m = Center ? static_cast<double>(mean[r]) : 0.0;
        sw += g * ((x[r * n + j] - m) * static_cast<double>(rstd[r]));
      }
    }
    pw[j] = sw;
    pb[j] = sb;
  }
}

template <class T>
__global__ void __launch_bounds__(kThreads) norm_params_finish(const double* __restrict__ partial, T* __restrict__ dweight,
                                                               T* __restrict__ dbias, int64_t n, int64_t splits) {
  for (int64_t j = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; j < n;
       j += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    double sw = 0, sb = 0;
    for (int64_t s = 0; s < splits; ++s) {
      sw += partial[s * 2 * n + j];
      sb += partial[s * 2 * n + n + j];
    }
    if (dweight) dweight[j] = static_cast<T>(sw);
    if (dbias) dbias[j] = static_cast<T>(sb);
  }
}

// f.template operator()<T, Center, G>() for the dtype, the norm kind, and the group size that
// suits rows of length n.
template <class F>
const char* with_norm(DType dtype, bool center, int64_t n, F&& f) {
  auto by_type = [&]<class T>() {
    auto by_center = [&]<bool C>() {
      if (n <= kWarpRowMax) return f.template operator()<T, C, 32>();
      return f.template operator()<T, C, kThreads>();
    };
    return center ? by_center.template operator()<true>() : by_center.template operator()<false>();
  };
  return dtype == DType::Float64 ? by_type.template operator()<double>() : by_type.template operator()<float>();
}

}  // namespace

// dweight / dbias are sums over rows: each of `splits` blocks of rows writes its partial sums
// (in double) to a scratch buffer of scratch_bytes, and a second kernel adds them up in order.
struct NormParamsPlan {
  int64_t splits = 1;
  int64_t rows_per_split = 0;
  std::size_t scratch_bytes = 0;
};

// out = (x - mean) * rstd * weight + bias; writes mean (center only) and rstd per row.
const char* launch_norm_forward(DType dtype, bool center, const void* x, const void* weight, const void* bias, double eps,
                                void* out, void* mean, void* rstd, int64_t rows, int64_t n) {
  if (rows == 0) return "norm_forward_rows";  // nothing to write (n == 0 means rows == 0)
  return with_norm(dtype, center, n, [&]<class T, bool C, int G>() {
    norm_forward_rows<T, C, G><<<group_blocks(rows, G), kThreads, 0, stream()>>>(
        static_cast<const T*>(x), static_cast<const T*>(weight), static_cast<const T*>(bias), eps,
        static_cast<T*>(out), static_cast<T*>(mean), static_cast<T*>(rstd), rows, n);
    return "norm_forward_rows";
  });
}

NormParamsPlan plan_norm_params(int64_t rows, int64_t n) {
  NormParamsPlan plan;
  if (n == 0) return plan;
  // Enough blocks of rows that n columns x splits threads fill the GPU, each block >= 8 rows.
  int64_t s = std::min({ceil_div(kTargetThreads, n), ceil_div(rows, 8), kMaxSplits});
  if (s < 1) s = 1;
  plan.rows_per_split = ceil_div(rows, s);
  plan.splits = plan.rows_per_split > 0 ? ceil_div(rows, plan.rows_per_split) : 1;  // no empty blocks of rows
  plan.scratch_bytes = static_cast<std::size_t>(plan.splits * 2 * n) * sizeof(double);
  return plan;
}

// Writes dx (when rows > 0), and dweight / dbias where they are not nullptr (scratch then holds
// plan.scratch_bytes).
const char* launch_norm_backward(DType dtype, bool center, const void* dy, const void* x, const void* weight,
                                 const void* mean, const void* rstd, void* dx, void* dweight, void* dbias,
                                 int64_t rows, int64_t n, const NormParamsPlan& plan, void* scratch) {
  if (n == 0) return "norm_backward_rows";  // no elements, no columns: nothing to write
  return with_norm(dtype, center, n, [&]<class T, bool C, int G>() -> const char* {
    const T *gp = static_cast<const T*>(dy), *xp = static_cast<const T*>(x);
    const T *mp = static_cast<const T*>(mean), *rp = static_cast<const T*>(rstd);
    // dweight and dbias first: dx may be dy itself (backend.h), which the rows pass overwrites.
    const bool params = dweight || dbias;
    if (params) {
      // Narrow rows would leave most of a 256-thread block idle: use just enough whole warps.
      const int threads = static_cast<int>(std::min<int64_t>(kThreads, ceil_div(n, 32) * 32));
      double* part = static_cast<double*>(scratch);
      const dim3 grid(blocks_for(n, threads), static_cast<unsigned>(plan.splits));
      norm_params_partial<T, C><<<grid, threads, 0, stream()>>>(gp, xp, mp, rp, part, rows, n, plan.rows_per_split,
                                                                dweight != nullptr);
      norm_params_finish<T><<<blocks_for(n, kThreads), kThreads, 0, stream()>>>(
          part, static_cast<T*>(dweight), static_cast<T*>(dbias), n, plan.splits);
    }
    if (rows > 0)
      norm_backward_rows<T, C, G><<<group_blocks(rows, G), kThreads, 0, stream()>>>(
          gp, xp, static_cast<const T*>(weight), mp, rp, static_cast<T*>(dx), rows, n);
    return params ? "norm_params_partial + norm_params_finish + norm_backward_rows" : "norm_backward_rows";
  });
}

// ---- CudaBackend: LayerNorm / RMSNorm forward and backward ----
// The checks shared with the CPU (tensor/kernel_checks.h), then the launchers above, each of
// which returns the names of the kernels it launched for check_launch().

namespace {

// The kernel's pointer for an optional operand: nullptr when undefined.
void* data_or_null(const Tensor& t, const char* op) { return t.defined() ? arg(t, op).data : nullptr; }

void norm_forward(const char* op, bool center, const Tensor& x, const Tensor& weight, const Tensor& bias, double eps,
                  const Tensor& out, const Tensor& mean, const Tensor& rstd, int64_t rows, int64_t n) {
  const TensorArg xa = arg(x, op);
  check_launch(launch_norm_forward(xa.dtype, center, xa.data, data_or_null(weight, op), data_or_null(bias, op), eps,
                                   arg(out, op).data, data_or_null(mean, op), arg(rstd, op).data, rows, n));
}

void norm_backward(const char* op, bool center, const Tensor& dy, const Tensor& x, const Tensor& weight,
                   const Tensor& mean, const Tensor& rstd, const Tensor& dx, const Tensor& dweight,
                   const Tensor& dbias, int64_t rows, int64_t n) {
  const TensorArg xa = arg(x, op);
  const NormParamsPlan plan = plan_norm_params(rows, n);
  // Partial column sums for dweight/dbias; freed on return, but the caching allocator reuses
  // memory in stream order, so the kernels finish with it first.
  Tensor scratch;
  if ((dweight.defined() || dbias.defined()) && plan.scratch_bytes > 0)
    scratch = empty({static_cast<int64_t>(plan.scratch_bytes)}, DType::UInt8, x.device());
  check_launch(launch_norm_backward(xa.dtype, center, arg(dy, op).data, xa.data, data_or_null(weight, op),
                                    data_or_null(mean, op), arg(rstd, op).data, arg(dx, op).data,
                                    data_or_null(dweight, op), data_or_null(dbias, op), rows, n, plan,
                                    scratch.defined() ? scratch.data_ptr() : nullptr));
}

}  // namespace

void CudaBackend::do_layernorm_forward(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps,
                                       const Tensor& out, const Tensor& mean, const Tensor& rstd) {
  const auto [rows, n] = kernel_checks::last_dim_rows(x);
  norm_forward("layernorm_forward", true, x, weight, bias, eps, out, mean, rstd, rows, n);
}

void CudaBackend::do_layernorm_backward(const Tensor& dy, const Tensor& x, const Tensor& weight, const Tensor& mean,
                                        const Tensor& rstd, const Tensor& dx, const Tensor& dweight,
                                        const Tensor& dbias) {
  const auto [rows, n] = kernel_checks::last_dim_rows(x);
  norm_backward("layernorm_backward", true, dy, x, weight, mean, rstd, dx, dweight, dbias, rows, n);
}

void CudaBackend::do_rmsnorm_forward(const Tensor& x, const Tensor& weight, double eps, const Tensor& out,
                                     const Tensor& rstd) {
  const auto [rows, n] = kernel_checks::last_dim_rows(x);
  norm_forward("rmsnorm_forward", false, x, weight, Tensor(), eps, out, Tensor(), rstd, rows, n);
}

void CudaBackend::do_rmsnorm_backward(const Tensor& dy, const Tensor& x, const Tensor& weight, const Tensor& rstd,
                                      const Tensor& dx, const Tensor& dweight) {
  const auto [rows, n] = kernel_checks::last_dim_rows(x);
  norm_backward("rmsnorm_backward", false, dy, x, weight, Tensor(), rstd, dx, dweight, Tensor(), rows, n);
}

}  // namespace linea::cuda
