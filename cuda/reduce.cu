// Reductions and softmax on the GPU, with the semantics of tensor/cpu/cpu_reduce.cpp.
//
// Every reduction reads a contiguous x as [outer, n, inner] and writes out[outer, inner]. Each op
// is a "reducer" like on the CPU, with one change: instead of push(element), an element is lifted
// to a State and merged, so the same merge() combines elements, lanes of a warp, warps of a block
// and partial results of a split row. Two kernels walk the memory:
//   - reduce_rows (inner == 1): a warp per row (rows up to 1024) or a block per row (longer),
//     each thread striding through the row, then a shuffle/shared-memory reduction;
//   - reduce_columns (inner > 1, or rows of at most 16): one thread per output looping over n, so
//     a warp reads 32 neighbouring columns of one row at a time (coalesced).
// When there are few outputs (a full sum, a bias gradient over a big batch), n is split into
// pieces reduced by different blocks into a scratch buffer, and reduce_merge combines the pieces
// in a fixed order: no atomics, the same bits every run.
// Sums accumulate in double (float) or int64 (integers, bool), like the CPU.
#include <algorithm>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "linea/cuda/cuda_backend.h"
#include "linea/cuda/group_reduce.cuh"
#include "linea/tensor/kernel_checks.h"

namespace linea::cuda {

namespace {

// Rows (inner == 1) up to this length are reduced by one thread each, like columns: a warp per
// row would leave most lanes idle.
constexpr int64_t kThreadRowMax = 16;

template <class T>
using Wide = std::conditional_t<std::is_floating_point_v<T>, double, int64_t>;

template <class T>
__device__ bool is_nan(T v) {
  if constexpr (std::is_floating_point_v<T>) return v != v;
  else return false;
}

template <class T>
struct SumR {
  using State = Wide<T>;
  using Out = T;
  static __device__ State init() { return 0; }
  static __device__ State lift(T v, int64_t) { return static_cast<State>(v); }
  static __device__ void merge(State& a, const State& b) { a += b; }
  static __device__ Out finish(const State& s) { return static_cast<T>(s); }
};

// Max (Greater) or Min; a NaN wins and stays, like the CPU (and PyTorch).
template <class T, bool Greater>
struct ExtremeR {
  using State = T;
  using Out = T;
  static __device__ State init() {
    if constexpr (std::is_floating_point_v<T>)
      return Greater ? -std::numeric_limits<T>::infinity() : std::numeric_limits<T>::infinity();
    else return Greater ? std::numeric_limits<T>::lowest() : std::numeric_limits<T>::max();
  }
  static __device__ State lift(T v, int64_t) { return v; }
  static __device__ void merge(State& a, const State& b) {
    if ((Greater ? b > a : b < a) || is_nan(b)) a = b;
  }
  static __device__ Out finish(const State& s) { return s; }
};

// Index of the max. The CPU scans in order and keeps the first NaN, else the first index of the
// max; merged in any order, that is "the better of two (value, index) pairs" in this total order:
// NaN beats numbers, a larger value beats a smaller one, and on ties the smaller index wins.
// init() carries the largest index, so any element beats it even when equal to its value.
template <class T>
struct ArgMaxR {
  struct State {
    T v;
    int64_t i;
  };
  using Out = int64_t;
  static __device__ State init() { return {ExtremeR<T, true>::init(), std::numeric_limits<int64_t>::max()}; }
  static __device__ State lift(T v, int64_t i) { return {v, i}; }
  static __device__ void merge(State& a, const State& b) {
    const bool an = is_nan(a.v), bn = is_nan(b.v);
    bool take;
    if (an != bn) take = bn;
    else if (!an && b.v != a.v) take = b.v > a.v;
    else take = b.i < a.i;
    if (take) a = b;
  }
  static __device__ Out finish(const State& s) { return s.i; }
};

// log(sum(exp(x))) as the CPU computes it: a running max m and s = sum(exp(x - m)), rescaled when
// a larger max arrives; an all -inf row gives -inf, +inf gives +inf, a NaN poisons s.
template <class T>
struct LogSumExpR {
  struct State {
    double m, s;
  };
  using Out = T;
  static __device__ State init() { return {-std::numeric_limits<double>::infinity(), 0.0}; }
  static __device__ State lift(T v, int64_t) { return {static_cast<double>(v), 1.0}; }
  static __device__ void merge(State& a, const State& b) {
    if (b.m > a.m) {
      a.s = a.s * exp(a.m - b.m) + b.s;
      a.m = b.m;
    } else if (b.m == a.m) {  // also -inf with -inf and +inf with +inf (inf - inf would be NaN)
      a.s += b.s;
    } else {
      a.s += b.s * exp(b.m - a.m);
    }
  }
  static __device__ Out finish(const State& st) {
    if (isinf(st.m)) return static_cast<T>(st.m);
    return static_cast<T>(st.m + log(st.s));
  }
};

// inner == 1. A task is one piece of one row (a whole row unless the plan splits rows); a group
// of G threads (a warp, or the whole block) reduces it. Pieces of a split row go to
// partial[piece * outer + row], for reduce_merge.
template <class R, class T, int G>
__global__ void __launch_bounds__(kThreads) reduce_rows(const T* __restrict__ x, typename R::Out* __restrict__ out,
                                                        typename R::State* __restrict__ partial, int64_t outer,
                                                        int64_t n, int64_t piece, int64_t splits) {
  using State = typename R::State;
  __shared__ State buf[kThreads / 32];
  for_each_group_row<G>(outer * splits, [&](int64_t t, int lane) {
    const int64_t row = t / splits, p = t % splits;
    const int64_t begin = p * piece, end = min(n, begin + piece);
    const T* xr = x + row * n;
    State s = R::init();
    for (int64_t i = begin + lane; i < end; i += G) R::merge(s, R::lift(xr[i], i));
    s = group_allreduce<G, R>(s, buf);
    if (lane == 0) {
      if (splits == 1) out[row] = R::finish(s);
      else partial[p * outer + row] = s;
    }
  });
}

// inner > 1. One thread per output column (o, j); blockIdx.y picks the piece of n. Pieces go to
// partial[piece * cols + column], for reduce_merge.
template <class R, class T>
__global__ void __launch_bounds__(kThreads) reduce_columns(const T* __restrict__ x, typename R::Out* __restrict__ out,
                                                           typename R::State* __restrict__ partial, int64_t outer,
                                                           int64_t n, int64_t inner, int64_t piece) {
  const int64_t cols = outer * inner;
  const int64_t begin = static_cast<int64_t>(blockIdx.y) * piece, end = min(n, begin + piece);
  for (int64_t c = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; c < cols;
       c += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t o = c / inner, j = c % inner;
    const T* col = x + o * n * inner + j;
    typename R::State s = R::init();
    for (int64_t i = begin; i < end; ++i) R::merge(s, R::lift(col[i * inner], i));
    if (gridDim.y == 1) out[c] = R::finish(s);
    else partial[static_cast<int64_t>(blockIdx.y) * cols + c] = s;
  }
}

// Second pass of a split reduction: output c merges its `splits` partials in piece order.
template <class R>
__global__ void __launch_bounds__(kThreads) reduce_merge(const typename R::State* __restrict__ partial,
                                                         typename R::Out* __restrict__ out, int64_t cols,
                                                         int64_t splits) {
  for (int64_t c = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; c < cols;
       c += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    typename R::State s = partial[c];
    for (int64_t p = 1; p < splits; ++p) R::merge(s, partial[p * cols + c]);
    out[c] = R::finish(s);
  }
}

// f.template operator()<R, T>() for the reducer of `op` over element type `dtype`. LogSumExp
// exists for F32/F64 only; other dtypes get a default-constructed result (the caller rejects them).
template <class F>
auto with_reducer(ReduceOp op, DType dtype, F&& f) {
  auto by_type = [&]<class T>() {
    switch (op) {
      case ReduceOp::Sum: return f.template operator()<SumR<T>, T>();
      case ReduceOp::Max: return f.template operator()<ExtremeR<T, true>, T>();
      case ReduceOp::Min: return f.template operator()<ExtremeR<T, false>, T>();
      case ReduceOp::ArgMax: return f.template operator()<ArgMaxR<T>, T>();
      case ReduceOp::LogSumExp:
        if constexpr (std::is_floating_point_v<T>) return f.template operator()<LogSumExpR<T>, T>();
        break;
    }
    return decltype(f.template operator()<SumR<T>, T>()){};
  };
  return dispatch(dtype, by_type);
}

}  // namespace

// How a reduction of x [outer, n, inner] is laid out on the GPU. When there are too few outputs
// to fill the GPU, n is cut into `splits` pieces reduced in parallel into partial results
// (scratch_bytes of device scratch), which a second kernel merges in a fixed order.
struct ReducePlan {
  int group = 0;         // threads per row in reduce_rows (a warp, or a whole block for long
                         // rows); 0: reduce_columns, a thread per output
  int64_t splits = 1;    // pieces n is cut into
  int64_t piece = 0;     // elements of n per piece
  std::size_t scratch_bytes = 0;
};

ReducePlan plan_reduce(ReduceOp op, DType dtype, int64_t outer, int64_t n, int64_t inner) {
  ReducePlan plan;
  // How many pieces to cut n into: enough for `want` workers in all, each piece >= min_piece.
  auto split = [&](int64_t want, int64_t min_piece) {
    int64_t s = std::min({want, ceil_div(n, min_piece), kMaxSplits});
    if (s < 1) s = 1;
    plan.piece = ceil_div(n, s);
    plan.splits = plan.piece > 0 ? ceil_div(n, plan.piece) : 1;  // no empty pieces
  };
  if (inner == 1 && n > kThreadRowMax) {
    plan.group = n <= kWarpRowMax ? 32 : kThreads;
    // Long rows, but fewer rows than a GPU's worth of blocks: split each row.
    if (plan.group == kThreads) split(ceil_div(kTargetThreads / kThreads, outer), 8 * kThreads);
    else split(1, 1);
  } else {
    plan.group = 0;  // reduce_columns: a thread per output (for tiny rows too: a warp would idle)
    split(ceil_div(kTargetThreads, outer * inner), 32);
  }
  if (plan.splits > 1) {
    const std::size_t state = with_reducer(op, dtype, [&]<class R, class T>() { return sizeof(typename R::State); });
    plan.scratch_bytes = static_cast<std::size_t>(plan.splits * outer * inner) * state;
  }
  return plan;
}

// out[outer, inner] (int64 for ArgMax, else dtype) from a contiguous x; scratch holds
// plan.scratch_bytes. LogSumExp takes F32/F64 only (checked by the caller).
const char* launch_reduce(ReduceOp op, DType dtype, const void* x, void* out, int64_t outer, int64_t n, int64_t inner,
                          const ReducePlan& plan, void* scratch) {
  return with_reducer(op, dtype, [&]<class R, class T>() -> const char* {
    using Out = typename R::Out;
    using State = typename R::State;
    const T* xp = static_cast<const T*>(x);
    Out* op_ = static_cast<Out*>(out);
    State* part = static_cast<State*>(scratch);
    const int64_t cols = outer * inner;
    if (plan.group > 0) {
      const int64_t tasks = outer * plan.splits;
      if (plan.group == 32)
        reduce_rows<R, T, 32><<<group_blocks(tasks, 32), kThreads, 0, stream()>>>(xp, op_, part, outer, n, plan.piece,
                                                                                  plan.splits);
      else
        reduce_rows<R, T, kThreads><<<group_blocks(tasks, kThreads), kThreads, 0, stream()>>>(
            xp, op_, part, outer, n, plan.piece, plan.splits);
    } else {
      const dim3 grid(blocks_for(cols, kThreads), static_cast<unsigned>(plan.splits));
      reduce_columns<R, T><<<grid, kThreads, 0, stream()>>>(xp, op_, part, outer, n, inner, plan.piece);
    }
    if (plan.splits == 1) return plan.group > 0 ? "reduce_rows" : "reduce_columns";
    reduce_merge<R><<<blocks_for(cols, kThreads), kThreads, 0, stream()>>>(part, op_, cols, plan.splits);
    return plan.group > 0 ? "reduce_rows + reduce_merge" : "reduce_columns + reduce_merge";
  });
}

// ---- softmax: row-wise over the last dim, like the CPU: max, then exp and sum, then write ----

namespace {

// The row max as the CPU takes it (std::max(m, x)): a NaN element is skipped here, and then
// poisons the sum instead, so a row with a NaN comes out all NaN either way.
template <class T>
struct RowMax {
  using State = T;
  static __device__ void merge(T& a, const T& b) { a = a < b ? b : a; }
};

// A row of all -inf has no distribution: x - max is NaN, and so is the output, like the CPU.
template <class T, int G>
__global__ void __launch_bounds__(kThreads) softmax_rows(const T* __restrict__ x, T* __restrict__ y, int64_t rows,
                                                         int64_t n, bool log) {
  __shared__ T max_buf[kThreads / 32];
  __shared__ double sum_buf[kThreads / 32];
  for_each_group_row<G>(rows, [&](int64_t r, int lane) {
    const T* xr = x + r * n;
    T* yr = y + r * n;
    T m = -std::numeric_limits<T>::infinity();
    for (int64_t j = lane; j < n; j += G) RowMax<T>::merge(m, xr[j]);
    m = group_allreduce<G, RowMax<T>>(m, max_buf);
    // Shifted by the max, exp never overflows (inputs ~1e4 are fine); summed in double.
    double s = 0;
    for (int64_t j = lane; j < n; j += G) s += exp_t(xr[j] - m);
    s = group_allreduce<G, SumDouble>(s, sum_buf);
    if (log) {
      // (x - m) - log(s), not x - (m + log(s)), which would round away log(s)'s digits.
      const T log_s = static_cast<T>(::log(s));
      for (int64_t j = lane; j < n; j += G) yr[j] = (xr[j] - m) - log_s;
    } else {
      const T inv = static_cast<T>(1.0 / s);
      for (int64_t j = lane; j < n; j += G) yr[j] = exp_t(xr[j] - m) * inv;
    }
  });
}

// softmax:     dx = y * (dy - sum(dy * y))
// log_softmax: dx = dy - exp(y) * sum(dy)
template <class T, int G>
__global__ void __launch_bounds__(kThreads) softmax_backward_rows(const T* __restrict__ y, const T* __restrict__ dy,
                                                                  T* __restrict__ dx, int64_t rows, int64_t n,
                                                                  bool log) {
  __shared__ double sum_buf[kThreads / 32];
  for_each_group_row<G>(rows, [&](int64_t r, int lane) {
    const T *yr = y + r * n, *gr = dy + r * n;
    T* dr = dx + r * n;
    double s = 0;
    for (int64_t j = lane; j < n; j += G) s += log ? static_cast<double>(gr[j]) : static_cast<double>(gr[j]) * yr[j];
    const T st = static_cast<T>(group_allreduce<G, SumDouble>(s, sum_buf));
    if (log)
      for (int64_t j = lane; j < n; j += G) dr[j] = gr[j] - exp_t(yr[j]) * st;
    else
      for (int64_t j = lane; j < n; j += G) dr[j] = yr[j] * (gr[j] - st);
  });
}

// f.template operator()<T, G>() for a float dtype and the group size that suits rows of length n.
template <class F>
const char* with_float_rows(DType dtype, int64_t n, F&& f) {
  auto by_group = [&]<class T>() {
    if (n <= kWarpRowMax) return f.template operator()<T, 32>();
    return f.template operator()<T, kThreads>();
  };
  return dtype == DType::Float64 ? by_group.template operator()<double>() : by_group.template operator()<float>();
}

}  // namespace

// Row-wise softmax / log_softmax over rows of length n (F32/F64), and its backward.
const char* launch_softmax(DType dtype, const void* x, void* out, int64_t rows, int64_t n, bool log) {
  return with_float_rows(dtype, n, [&]<class T, int G>() {
    softmax_rows<T, G><<<group_blocks(rows, G), kThreads, 0, stream()>>>(static_cast<const T*>(x),
                                                                         static_cast<T*>(out), rows, n, log);
    return "softmax_rows";
  });
}

const char* launch_softmax_backward(DType dtype, const void* y, const void* dy, void* dx, int64_t rows, int64_t n,
                                    bool log) {
  return with_float_rows(dtype, n, [&]<class T, int G>() {
    softmax_backward_rows<T, G><<<group_blocks(rows, G), kThreads, 0, stream()>>>(
        static_cast<const T*>(y), static_cast<const T*>(dy), static_cast<T*>(dx), rows, n, log);
    return "softmax_backward_rows";
  });
}

// ---- CudaBackend::do_reduce, do_softmax, do_softmax_backward ----
// The launchers above, each of which returns the names of the kernels it launched for
// check_launch().

void CudaBackend::do_reduce(ReduceOp op, const Tensor& x, const Tensor& out, int64_t outer, int64_t n, int64_t inner) {
  const TensorArg xa = arg(x, "reduce"), oa = arg(out, "reduce");
  const ReducePlan plan = plan_reduce(op, xa.dtype, outer, n, inner);
  // Partial results of split rows/columns; freed here, but the caching allocator hands memory
  // back in stream order, so the kernels below finish with it first.
  Tensor scratch;
  if (plan.scratch_bytes > 0) scratch = empty({static_cast<int64_t>(plan.scratch_bytes)}, DType::UInt8, x.device());
  check_launch(launch_reduce(op, xa.dtype, xa.data, oa.data, outer, n, inner, plan,
                             scratch.defined() ? scratch.data_ptr() : nullptr));
}

void CudaBackend::do_softmax(const Tensor& x, const Tensor& out, bool log) {
  if (x.numel() == 0) return;
  if (!is_floating(x.dtype())) dtype_error("softmax", x.dtype());
  const TensorArg xa = arg(x, "softmax"), oa = arg(out, "softmax");
  const auto [rows, n] = kernel_checks::last_dim_rows(x);
  check_launch(launch_softmax(xa.dtype, xa.data, oa.data, rows, n, log));
}

void CudaBackend::do_softmax_backward(const Tensor& y, const Tensor& dy, const Tensor& dx, bool log) {
  if (y.numel() == 0) return;
  if (!is_floating(y.dtype())) dtype_error("softmax_backward", y.dtype());
  const TensorArg ya = arg(y, "softmax_backward"), ga = arg(dy, "softmax_backward"), da = arg(dx, "softmax_backward");
  const auto [rows, n] = kernel_checks::last_dim_rows(y);
  check_launch(launch_softmax_backward(ya.dtype, ya.data, ga.data, da.data, rows, n, log));
}

}  // namespace linea::cuda
