// LayerNorm and RMSNorm over the last dim, forward and backward, as fused row kernels.
//
// One template serves both: RMSNorm is LayerNorm without the centring (mean = 0) and without a
// bias. Each row of x is read as [rows, n]; a row fits in L1, so the forward reads it three times
// (sum, sum of squared deviations, write) rather than using one-pass E[x^2] - E[x]^2, which
// cancels catastrophically for rows like 1e4 + small noise. A row's sums are in its own dtype,
// taken about its first element (x - x0 is exact for such rows, so the mean and variance keep
// the noise's digits): in float32 that is faster than summing in double, since a row's chain of
// sums, sqrt and divide is latency-bound and half-width vectors halve it (measured:
// docs/benchmarks.md, "LayerNorm, lane sums and elementwise math"). dweight and dbias, sums over
// all rows, stay in double.
//
// Backward (as in llm.c's layernorm_backward), with xhat = (x - mean) * rstd and g = dy * weight:
//   dx      = rstd * (g - mean(g) - xhat * mean(g * xhat))     (RMSNorm: no mean(g) term)
//   dweight = Σ_rows dy * xhat,   dbias = Σ_rows dy
// dweight/dbias sum over rows, so each thread accumulates its own partial row of sums and the
// partials are added at the end: no atomics, and the same thread count gives the same bits. A
// thread sums kRowBlock rows in T, then adds that block's sums into its partials in double.
#include <omp.h>
#include <algorithm>
#include <cmath>
#include <vector>

#include "linea/tensor/kernel_checks.h"
#include "linea/tensor/cpu/vec_math.h"

#include "linea/tensor/cpu/isa_begin.h"
#include "linea/tensor/cpu/cpu_backend.h"
#include "linea/tensor/cpu/lane_sums.h"
#include "linea/tensor/cpu/strided.h"

namespace linea::cpu::inline LINEA_ISA_NS {

namespace {

// Rows the forward normalises side by side: one row's chain (its sum, mean, variance, rstd) waits on
// itself, and four rows' chains interleaved run faster than one at a time, with the same bits
// (measured: docs/benchmarks.md, "LayerNorm, lane sums and elementwise math").
constexpr int kRows = 4;

// The R rows from row r of the forward.
template <class T, bool Center, int R>
void forward_rows(const T* xp, const T* w, const T* b, double eps, T* yp, T* mp, T* rp, int64_t r, int64_t n) {
  const T* xr[R];
  T x0[R], mu[R], v[R];
  for (int i = 0; i < R; ++i) {
    xr[i] = xp + (r + i) * n;
    x0[i] = Center ? xr[i][0] : T(0);
    mu[i] = T(0);
  }
  if constexpr (Center) {
    lane_sums<T, R>(n, mu, [&](int i, int64_t j) { return xr[i][j] - x0[i]; });
    for (int i = 0; i < R; ++i) mu[i] /= T(n);  // mean - x0
  }
  lane_sums<T, R>(n, v, [&](int i, int64_t j) {
    const T d = (xr[i][j] - x0[i]) - mu[i];
    return d * d;
  });
  for (int i = 0; i < R; ++i) {
    // A constant row has v = 0: rstd = 1/sqrt(eps) stays finite and xhat is exactly 0.
    const T rs = T(1) / std::sqrt(v[i] / T(n) + T(eps));
    T* yr = yp + (r + i) * n;
    for (int64_t j = 0; j < n; ++j) {
      T y = ((xr[i][j] - x0[i]) - mu[i]) * rs;
      if (w) y *= w[j];
      if (b) y += b[j];
      yr[j] = y;
    }
    if constexpr (Center) mp[r + i] = x0[i] + mu[i];
    rp[r + i] = rs;
  }
}

template <class T, bool Center>
void norm_forward(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps, const Tensor& out,
                  const Tensor& mean, const Tensor& rstd, int64_t rows, int64_t n) {
  const T* xp = x.data<T>();
  const T* w = weight.defined() ? weight.data<T>() : nullptr;
  const T* b = bias.defined() ? bias.data<T>() : nullptr;
  T* yp = out.data<T>();
  T* mp = Center ? mean.data<T>() : nullptr;
  T* rp = rstd.data<T>();
  const int64_t groups = (rows + kRows - 1) / kRows;
#pragma omp parallel for schedule(static) if (rows * n > kParallelGrain && rows > 1)
  for (int64_t g = 0; g < groups; ++g) {
    const int64_t r = g * kRows;
    if (r + kRows <= rows) forward_rows<T, Center, kRows>(xp, w, b, eps, yp, mp, rp, r, n);
    else
      for (int64_t i = r; i < rows; ++i) forward_rows<T, Center, 1>(xp, w, b, eps, yp, mp, rp, i, n);
  }
}

// Rows a thread sums in T before adding into its double partials. Converting and adding every row
// in double takes most of the backward's time and keeps it from gaining with a second thread
// (measured: docs/benchmarks.md, "LayerNorm, lane sums and elementwise math").
constexpr int64_t kRowBlock = 16;
static_assert(kRowBlock % kRows == 0, "the backward flushes its block sums after whole groups of rows");

// The R rows from row r of the backward, their two sums side by side as in the forward. xh and gw
// are scratch for R rows of xhat and g = dy * weight, so the loops are plain vector loops; bw and
// bb (or null) gain the rows' dy * xhat and dy, row after row. dxp may be gp: a row's dy is read
// (into gw, bw and bb) before its dx is written.
template <class T, bool Center, int R>
void backward_rows(const T* gp, const T* xp, const T* w, const T* mp, const T* rp, T* dxp, int64_t r, int64_t n,
                   T* xh, T* gw, T* bw, T* bb) {
  for (int i = 0; i < R; ++i) {
    const T *gr = gp + (r + i) * n, *xr = xp + (r + i) * n;
    T *xhi = xh + i * n, *gwi = gw + i * n;
    const T m = Center ? mp[r + i] : T(0), rs = rp[r + i];
    for (int64_t j = 0; j < n; ++j) xhi[j] = (xr[j] - m) * rs;
    if (w)
      for (int64_t j = 0; j < n; ++j) gwi[j] = gr[j] * w[j];
    else
      for (int64_t j = 0; j < n; ++j) gwi[j] = gr[j];
  }
  T mean_g[R] = {}, mean_gx[R];
  if constexpr (Center) {
    lane_sums<T, R>(n, mean_g, [&](int i, int64_t j) { return gw[i * n + j]; });
    for (int i = 0; i < R; ++i) mean_g[i] /= T(n);
  }
  lane_sums<T, R>(n, mean_gx, [&](int i, int64_t j) { return gw[i * n + j] * xh[i * n + j]; });
  for (int i = 0; i < R; ++i) {
    const T* gr = gp + (r + i) * n;
    const T *xhi = xh + i * n, *gwi = gw + i * n;
    const T rs = rp[r + i], mg = mean_g[i], mgx = mean_gx[i] / T(n);
    T* dr = dxp + (r + i) * n;
    if (bw)
      for (int64_t j = 0; j < n; ++j) bw[j] += gr[j] * xhi[j];
    if (bb)
      for (int64_t j = 0; j < n; ++j) bb[j] += gr[j];
    for (int64_t j = 0; j < n; ++j) dr[j] = rs * (gwi[j] - mg - xhi[j] * mgx);
  }
}

template <class T, bool Center>
void norm_backward(const Tensor& dy, const Tensor& x, const Tensor& weight, const Tensor& mean, const Tensor& rstd,
                   const Tensor& dx, const Tensor& dweight, const Tensor& dbias, int64_t rows, int64_t n) {
  const T *gp = dy.data<T>(), *xp = x.data<T>();
  const T* w = weight.defined() ? weight.data<T>() : nullptr;
  const T* mp = Center ? mean.data<T>() : nullptr;
  const T* rp = rstd.data<T>();
  T* dxp = dx.data<T>();
  const bool want_w = dweight.defined(), want_b = dbias.defined();
  const bool parallel = rows * n > kParallelGrain && rows > 1;
  const int nthreads = parallel ? omp_get_max_threads() : 1;
  // Per-thread partial sums: [thread][dweight n | dbias n].
  std::vector<double> part((want_w || want_b) ? static_cast<size_t>(nthreads) * 2 * n : 0, 0.0);
  const int64_t groups = (rows + kRows - 1) / kRows;
#pragma omp parallel num_threads(nthreads) if (parallel)
  {
    double* pw = part.empty() ? nullptr : part.data() + static_cast<size_t>(omp_get_thread_num()) * 2 * n;
    double* pb = pw ? pw + n : nullptr;
    // A group's xhat and g, and the block's sums of dy * xhat and dy.
    std::vector<T> scratch((2 * kRows + 2) * static_cast<size_t>(n));
    T *xh = scratch.data(), *gw = xh + kRows * n, *bw = gw + kRows * n, *bb = bw + n;
    int64_t in_block = 0;
    auto flush = [&] {
      for (int64_t j = 0; j < n; ++j) {
        if (want_w) pw[j] += static_cast<double>(bw[j]);
        if (want_b) pb[j] += static_cast<double>(bb[j]);
        bw[j] = bb[j] = T(0);
      }
      in_block = 0;
    };
    std::fill(bw, bw + 2 * n, T(0));
    T *sw = want_w ? bw : nullptr, *sb = want_b ? bb : nullptr;
#pragma omp for schedule(static)
    for (int64_t g = 0; g < groups; ++g) {
      const int64_t r = g * kRows, count = std::min<int64_t>(kRows, rows - r);
      if (count == kRows) backward_rows<T, Center, kRows>(gp, xp, w, mp, rp, dxp, r, n, xh, gw, sw, sb);
      else
        for (int64_t i = r; i < rows; ++i) backward_rows<T, Center, 1>(gp, xp, w, mp, rp, dxp, i, n, xh, gw, sw, sb);
      in_block += count;  // kRowBlock is a multiple of kRows: blocks end where they did row by row
      if (pw && in_block >= kRowBlock) flush();
    }
    if (pw) flush();
  }
  for (int64_t j = 0; j < n; ++j) {
    double sw = 0, sb = 0;
    for (int t = 0; t < nthreads; ++t) {
      sw += want_w ? part[static_cast<size_t>(t) * 2 * n + j] : 0.0;
      sb += want_b ? part[static_cast<size_t>(t) * 2 * n + n + j] : 0.0;
    }
    if (want_w) dweight.data<T>()[j] = static_cast<T>(sw);
    if (want_b) dbias.data<T>()[j] = static_cast<T>(sb);
  }
}

}  // namespace

void CpuBackend::do_layernorm_forward(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps,
                                      const Tensor& out, const Tensor& mean, const Tensor& rstd) {
  // Not a structured binding: clang 14 cannot capture one in a lambda or an OpenMP region.
  const auto rows_cols = kernel_checks::last_dim_rows(x);
  const int64_t rows = rows_cols.first, n = rows_cols.second;
  dispatch_floating(x.dtype(), "layernorm_forward", [&]<class T>() {
    norm_forward<T, true>(x, weight, bias, eps, out, mean, rstd, rows, n);
  });
}

void CpuBackend::do_layernorm_backward(const Tensor& dy, const Tensor& x, const Tensor& weight, const Tensor& mean,
                                       const Tensor& rstd, const Tensor& dx, const Tensor& dweight,
                                       const Tensor& dbias) {
  // Not a structured binding: clang 14 cannot capture one in a lambda or an OpenMP region.
  const auto rows_cols = kernel_checks::last_dim_rows(x);
  const int64_t rows = rows_cols.first, n = rows_cols.second;
  dispatch_floating(x.dtype(), "layernorm_backward", [&]<class T>() {
    norm_backward<T, true>(dy, x, weight, mean, rstd, dx, dweight, dbias, rows, n);
  });
}

void CpuBackend::do_rmsnorm_forward(const Tensor& x, const Tensor& weight, double eps, const Tensor& out,
                                    const Tensor& rstd) {
  // Not a structured binding: clang 14 cannot capture one in a lambda or an OpenMP region.
  const auto rows_cols = kernel_checks::last_dim_rows(x);
  const int64_t rows = rows_cols.first, n = rows_cols.second;
  dispatch_floating(x.dtype(), "rmsnorm_forward", [&]<class T>() {
    norm_forward<T, false>(x, weight, Tensor(), eps, out, Tensor(), rstd, rows, n);
  });
}

void CpuBackend::do_rmsnorm_backward(const Tensor& dy, const Tensor& x, const Tensor& weight, const Tensor& rstd,
                                     const Tensor& dx, const Tensor& dweight) {
  // Not a structured binding: clang 14 cannot capture one in a lambda or an OpenMP region.
  const auto rows_cols = kernel_checks::last_dim_rows(x);
  const int64_t rows = rows_cols.first, n = rows_cols.second;
  dispatch_floating(x.dtype(), "rmsnorm_backward", [&]<class T>() {
    norm_backward<T, false>(dy, x, weight, Tensor(), rstd, dx, dweight, Tensor(), rows, n);
  });
}

}  // namespace linea::cpu::inline LINEA_ISA_NS

#include "linea/tensor/cpu/isa_end.h"
