// Reductions and softmax on the CPU.
//
// Every reduction reads a contiguous x as [outer, n, inner] and writes out[outer, inner]. Each
// op is a small "reducer": a running State, push() one element, merge() two partial States (to
// split one long row over threads), finish() the result. Two drivers walk the memory:
//   - rows (inner == 1): each output is one contiguous run of n elements;
//   - columns (inner > 1): n rows of `inner` contiguous elements are streamed top to bottom,
//     updating a block of running States, so memory is always read sequentially, never strided.
// float sums accumulate in double, so a million-element float32 sum keeps ~7 correct digits.
#include <omp.h>
#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <type_traits>
#include <vector>

#include "linea/tensor/kernel_checks.h"
#include "linea/tensor/cpu/vec_math.h"

#include "linea/tensor/cpu/isa_begin.h"
#include "linea/tensor/cpu/cpu_backend.h"
#include "linea/tensor/cpu/lane_sums.h"
#include "linea/tensor/cpu/strided.h"

namespace linea::cpu::inline LINEA_ISA_NS {

namespace {

// The accumulator type: double for floats, int64 for integers and bool.
template <class T>
using Wide = std::conditional_t<std::is_floating_point_v<T>, double, int64_t>;

template <class T>
bool is_nan(T v) {
  if constexpr (std::is_floating_point_v<T>) return std::isnan(v);
  else return false;
}

// kLanes: the reducer ignores element indices, so a run can be split over 8 independent lanes
// (which the compiler vectorizes) and the lanes merged at the end.
template <class T>
struct SumReducer {
  using State = Wide<T>;
  using Out = T;
  static constexpr bool kLanes = true;
  static State init() { return 0; }
  static void push(State& s, T v, int64_t) { s += static_cast<State>(v); }
  static void merge(State& a, const State& b) { a += b; }
  static Out finish(const State& s) { return static_cast<T>(s); }
};

// Max (Greater = true) or Min. A NaN wins and stays, like PyTorch: a max over NaN data is NaN.
template <class T, bool Greater>
struct ExtremeReducer {
  using State = T;
  using Out = T;
  static constexpr bool kLanes = true;
  static State init() {
    if constexpr (std::is_floating_point_v<T>)
      return Greater ? -std::numeric_limits<T>::infinity() : std::numeric_limits<T>::infinity();
    else return Greater ? std::numeric_limits<T>::lowest() : std::numeric_limits<T>::max();
  }
  static void push(State& s, T v, int64_t) {
    s = ((Greater ? v > s : v < s) | is_nan(v)) ? v : s;  // branch-free, so it vectorizes
  }
  static void merge(State& a, const State& b) { push(a, b, 0); }
  static Out finish(const State& s) { return s; }
};

// Index of the max; strict ">" keeps the first index on ties (merge() sees chunks in order).
template <class T>
struct ArgMaxReducer {
  struct State {
    T v;
    int64_t i;
  };
  using Out = int64_t;
  static constexpr bool kLanes = false;
  static State init() { return {ExtremeReducer<T, true>::init(), 0}; }
  static void push(State& s, T v, int64_t i) {
    if (v > s.v || (is_nan(v) && !is_nan(s.v))) s = {v, i};
  }
  static void merge(State& a, const State& b) { push(a, b.v, b.i); }
  static Out finish(const State& s) { return s.i; }
};

// log(sum(exp(x))) in one pass: keep the running max m and s = sum(exp(x - m)); when a larger
// element arrives, rescale s. Nothing ever overflows; an all -inf row gives -inf (not NaN).
template <class T>
struct LogSumExpReducer {
  struct State {
    double m, s;
  };
  using Out = T;
  static constexpr bool kLanes = false;  // order-free, but exp() would not vectorize anyway
  static State init() { return {-std::numeric_limits<double>::infinity(), 0.0}; }
  static void push(State& st, T v, int64_t) { merge(st, {static_cast<double>(v), 1.0}); }
  static void merge(State& a, const State& b) {
    if (b.m > a.m) {
      a.s = a.s * std::exp(a.m - b.m) + b.s;
      a.m = b.m;
    } else if (b.m == a.m) {  // also covers -inf with -inf and +inf with +inf (inf - inf is NaN)
      a.s += b.s;
    } else {
      a.s += b.s * std::exp(b.m - a.m);  // a NaN element lands here and poisons s: result NaN
    }
  }
  static Out finish(const State& st) {
    if (std::isinf(st.m)) return static_cast<T>(st.m);
    return static_cast<T>(st.m + std::log(st.s));
  }
};

// One contiguous run p[0..n), element indices starting at `base`.
template <class R, class T>
typename R::State reduce_run(const T* p, int64_t n, int64_t base) {
  if constexpr (R::kLanes) {
    // Eight independent lanes: the loop vectorizes, and a sum becomes partly pairwise.
    typename R::State s[8];
    for (auto& lane : s) lane = R::init();
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
      for (int k = 0; k < 8; ++k) R::push(s[k], p[i + k], 0);
    for (; i < n; ++i) R::push(s[0], p[i], 0);
    for (int w = 4; w > 0; w /= 2)
      for (int k = 0; k < w; ++k) R::merge(s[k], s[k + w]);
    return s[0];
  } else {
    typename R::State s = R::init();
    for (int64_t i = 0; i < n; ++i) R::push(s, p[i], base + i);
    return s;
  }
}

template <class R, class T>
void reduce_rows(const T* x, typename R::Out* out, int64_t outer, int64_t n) {
  if (outer >= omp_get_max_threads() || n < 2 * kParallelGrain) {
#pragma omp parallel for schedule(static) if (outer * n > kParallelGrain && outer > 1)
    for (int64_t o = 0; o < outer; ++o) out[o] = R::finish(reduce_run<R>(x + o * n, n, 0));
    return;
  }
  // A few long rows (a full sum, say): split each row into chunks over threads, then merge the
  // partial states in chunk order so that ArgMax still returns the first index.
  const int64_t nchunks = (n + kParallelGrain - 1) / kParallelGrain;
  std::vector<typename R::State> part(nchunks);
  for (int64_t o = 0; o < outer; ++o) {
    const T* row = x + o * n;
#pragma omp parallel for schedule(static)
    for (int64_t c = 0; c < nchunks; ++c) {
      const int64_t start = c * kParallelGrain;
      part[c] = reduce_run<R>(row + start, std::min(kParallelGrain, n - start), start);
    }
    typename R::State s = part[0];
    for (int64_t c = 1; c < nchunks; ++c) R::merge(s, part[c]);
    out[o] = R::finish(s);
  }
}

// Column reduction. Work is split into (outer index, block of columns, chunk of rows) tasks; each
// task streams its row segments through a block of running states that stays in L1. Rows are
// split into chunks only when there are fewer column blocks than threads (a bias gradient sums
// [8192, 192] into one block, too long for one thread: docs/benchmarks.md, "Other kernels and
// steps"); the chunks' states are then merged in chunk order. The chunk length does not depend on
// the thread count, so neither does the result.
template <class R, class T>
void reduce_columns(const T* x, typename R::Out* out, int64_t outer, int64_t n, int64_t inner) {
  constexpr int64_t kBlock = 256;
  using State = typename R::State;
  const int64_t nblocks = (inner + kBlock - 1) / kBlock, blocks = outer * nblocks;
  const bool split = blocks < omp_get_max_threads() && n * inner >= 2 * kParallelGrain;
  const int64_t chunk = split ? std::max<int64_t>(1, kParallelGrain / std::min(inner, kBlock)) : n;
  const int64_t nchunks = (n + chunk - 1) / chunk;
  // not a std::vector: State may be bool (a max over bools)
  const std::unique_ptr<State[]> part(split ? new State[blocks * nchunks * kBlock] : nullptr);
#pragma omp parallel for schedule(static) if (outer * n * inner > kParallelGrain && blocks * nchunks > 1)
  for (int64_t t = 0; t < blocks * nchunks; ++t) {
    const int64_t b = t / nchunks, c = t % nchunks, o = b / nblocks, j0 = (b % nblocks) * kBlock;
    const int64_t w = std::min(kBlock, inner - j0), i0 = c * chunk, i1 = std::min(n, i0 + chunk);
    State local[kBlock];
    State* st = split ? part.get() + t * kBlock : local;
    for (int64_t j = 0; j < w; ++j) st[j] = R::init();
    for (int64_t i = i0; i < i1; ++i) {
      const T* row = x + (o * n + i) * inner + j0;
      for (int64_t j = 0; j < w; ++j) R::push(st[j], row[j], i);
    }
    if (!split)
      for (int64_t j = 0; j < w; ++j) out[o * inner + j0 + j] = R::finish(st[j]);
  }
  if (!split) return;
  for (int64_t b = 0; b < blocks; ++b) {
    const int64_t o = b / nblocks, j0 = (b % nblocks) * kBlock, w = std::min(kBlock, inner - j0);
    State* first = part.get() + b * nchunks * kBlock;
    for (int64_t c = 1; c < nchunks; ++c)
      for (int64_t j = 0; j < w; ++j) R::merge(first[j], first[c * kBlock + j]);
    for (int64_t j = 0; j < w; ++j) out[o * inner + j0 + j] = R::finish(first[j]);
  }
}

template <class R, class T>
void run_reducer(const Tensor& x, const Tensor& out, int64_t outer, int64_t n, int64_t inner) {
  using Out = typename R::Out;
  const T* xp = x.data<T>();
  Out* op = out.data<Out>();
  if (inner == 1) reduce_rows<R>(xp, op, outer, n);
  else reduce_columns<R>(xp, op, outer, n, inner);
}

}  // namespace

void CpuBackend::do_reduce(ReduceOp op, const Tensor& x, const Tensor& out, int64_t outer, int64_t n, int64_t inner) {
  if (op == ReduceOp::LogSumExp) {
    dispatch_floating(x.dtype(), "logsumexp", [&]<class T>() {
      run_reducer<LogSumExpReducer<T>, T>(x, out, outer, n, inner);
    });
    return;
  }
  dispatch(x.dtype(), [&]<class T>() {
    switch (op) {
      case ReduceOp::Sum: run_reducer<SumReducer<T>, T>(x, out, outer, n, inner); break;
      case ReduceOp::Max: run_reducer<ExtremeReducer<T, true>, T>(x, out, outer, n, inner); break;
      case ReduceOp::Min: run_reducer<ExtremeReducer<T, false>, T>(x, out, outer, n, inner); break;
      case ReduceOp::ArgMax: run_reducer<ArgMaxReducer<T>, T>(x, out, outer, n, inner); break;
      case ReduceOp::LogSumExp: break;  // handled above
    }
  });
}

// Sum of n values in double with 8 independent partial sums, so the adds pipeline (and
// vectorise) instead of waiting on one running total.
template <class T>
double lane_sum(const T* p, int64_t n) {
  double acc[8] = {};
  int64_t j = 0;
  for (; j + 8 <= n; j += 8)
    for (int l = 0; l < 8; ++l) acc[l] += p[j + l];
  double s = 0;
  for (; j < n; ++j) s += p[j];
  for (double a : acc) s += a;
  return s;
}

// ---- softmax: row-wise over the last dim, two passes per row (max, then exp and sum) ----

void CpuBackend::do_softmax(const Tensor& x, const Tensor& out, bool log) {
  if (x.numel() == 0) return;
  // Not a structured binding: clang 14 cannot capture one in a lambda or an OpenMP region.
  const auto rows_cols = kernel_checks::last_dim_rows(x);
  const int64_t rows = rows_cols.first, n = rows_cols.second;
  dispatch_floating(x.dtype(), "softmax", [&]<class T>() {
    const T* xp = x.data<T>();
    T* yp = out.data<T>();
#pragma omp parallel for schedule(static) if (rows * n > kParallelGrain)
    for (int64_t r = 0; r < rows; ++r) {
      const T* xr = xp + r * n;
      T* yr = yp + r * n;
      // Shift by the row max so exp never overflows (inputs ~1e4 are fine) and -inf entries
      // (masked out) give exp(-inf) = 0. A row that is all -inf has no distribution: NaN.
      T m = -std::numeric_limits<T>::infinity();
      for (int64_t j = 0; j < n; ++j) m = std::max(m, xr[j]);
      // exp into the output row first (a loop that vectorises), then sum it in double.
      for (int64_t j = 0; j < n; ++j) yr[j] = vexp(xr[j] - m);
      const double s = lane_sum(yr, n);
      if (log) {
        // (x - m) - log(s), not x - (m + log(s)): m + log(s) would round away log(s)'s digits.
        const T log_s = static_cast<T>(std::log(s));
        for (int64_t j = 0; j < n; ++j) yr[j] = (xr[j] - m) - log_s;
      } else {
        const T inv = static_cast<T>(1.0 / s);
        for (int64_t j = 0; j < n; ++j) yr[j] *= inv;
      }
    }
  });
}

// softmax:     dx = y * (dy - sum(dy * y))
// log_softmax: dx = dy - exp(y) * sum(dy)
void CpuBackend::do_softmax_backward(const Tensor& y, const Tensor& dy, const Tensor& dx, bool log) {
  if (y.numel() == 0) return;
  // Not a structured binding: clang 14 cannot capture one in a lambda or an OpenMP region.
  const auto rows_cols = kernel_checks::last_dim_rows(y);
  const int64_t rows = rows_cols.first, n = rows_cols.second;
  dispatch_floating(y.dtype(), "softmax_backward", [&]<class T>() {
    const T *yp = y.data<T>(), *gp = dy.data<T>();
    T* dp = dx.data<T>();
#pragma omp parallel for schedule(static) if (rows * n > kParallelGrain)
    for (int64_t r = 0; r < rows; ++r) {
      const T *yr = yp + r * n, *gr = gp + r * n;
      T* dr = dp + r * n;
      double s = 0;
      if (log) {
        for (int64_t j = 0; j < n; ++j) s += gr[j];
        for (int64_t j = 0; j < n; ++j) dr[j] = gr[j] - vexp(yr[j]) * static_cast<T>(s);
      } else {
        for (int64_t j = 0; j < n; ++j) s += static_cast<double>(gr[j]) * yr[j];
        for (int64_t j = 0; j < n; ++j) dr[j] = yr[j] * (gr[j] - static_cast<T>(s));
      }
    }
  });
}

}  // namespace linea::cpu::inline LINEA_ISA_NS

#include "linea/tensor/cpu/isa_end.h"
