// Cross-entropy forward and backward as fused row kernels (nn/loss.cpp builds the op on them).
//
// Per row r with shift m = max_c x_c (so exp never overflows) and s = sum_c exp(x_c - m):
//   lse  = m + log s
//   loss = lse - (1 - eps) x_t - (eps / C) sum_c x_c
//        = log s - (1 - eps)(x_t - m) - (eps / C) sum_c (x_c - m)
// The second form subtracts only small numbers, so it stays exact for logits ~1e4 in float32.
// lse is kept in double: backward recomputes softmax as exp(x - lse) from it.
#include <algorithm>
#include <cmath>
#include <limits>

#include "linea/tensor/cpu/vec_math.h"

#include "linea/tensor/cpu/isa_begin.h"
#include "linea/tensor/cpu/cpu_backend.h"
#include "linea/tensor/cpu/lane_sums.h"

namespace linea::cpu::inline LINEA_ISA_NS {

namespace {

constexpr int64_t kLanes = 16;

template <class T>
void ce_forward_rows(const T* x, const int64_t* tgt, int64_t rows, int64_t C, int64_t ignore_index, double eps,
                     double* lse, double* loss) {
#pragma omp parallel for schedule(static) if (rows * C > (1 << 15))
  for (int64_t r = 0; r < rows; ++r) {
    if (tgt[r] == ignore_index) {
      lse[r] = 0;
      loss[r] = 0;
      continue;
    }
    const T* xr = x + r * C;
    // The max and the sums (in double) in kLanes fixed lanes (lane_sums.h's lane_sum): under `omp
    // simd reduction` GCC 12 leaves the max a scalar loop and feeds the double sums one exp at a
    // time (measured: docs/benchmarks.md, "Other kernels and steps").
    T mx[kLanes];
    std::fill(mx, mx + kLanes, -std::numeric_limits<T>::infinity());
    int64_t c = 0;
    for (; c + kLanes <= C; c += kLanes)
      for (int64_t j = 0; j < kLanes; ++j) mx[j] = mx[j] < xr[c + j] ? xr[c + j] : mx[j];  // std::max's order
    T m = -std::numeric_limits<T>::infinity();
    for (; c < C; ++c) m = std::max(m, xr[c]);
    for (int64_t j = 0; j < kLanes; ++j) m = std::max(m, mx[j]);
    const double s = lane_sum<double, kLanes>(C, [&](int64_t k) { return static_cast<double>(vexp(xr[k] - m)); });
    // Only label smoothing reads the sum of the logits.
    const double sx = eps > 0 ? lane_sum<double, kLanes>(C, [&](int64_t k) { return static_cast<double>(xr[k] - m); })
                              : 0.0;
    const double log_s = std::log(s);
    lse[r] = static_cast<double>(m) + log_s;
    // Without smoothing sx is left out: a masked (-inf) logit would make 0 * sx a NaN.
    loss[r] = log_s - (1 - eps) * static_cast<double>(xr[tgt[r]] - m) - (eps > 0 ? eps / C * sx : 0.0);
  }
}

// d loss_r / d x_rc = softmax_rc - eps / C - (1 - eps) [c == t_r], times the row's weight w_r.
template <class T>
void ce_backward_rows(const T* x, const int64_t* tgt, const double* lse, const double* w, int64_t w_stride,
                      int64_t rows, int64_t C, int64_t ignore_index, double eps, T* dx) {
#pragma omp parallel for schedule(static) if (rows * C > (1 << 15))
  for (int64_t r = 0; r < rows; ++r) {
    const T* xr = x + r * C;
    T* dr = dx + r * C;
    if (tgt[r] == ignore_index) {
      for (int64_t c = 0; c < C; ++c) dr[c] = 0;
      continue;
    }
    const double wd = w[r * w_stride];
    const T wr = static_cast<T>(wd), off = static_cast<T>(eps / C);
    const double l = lse[r];
#pragma omp simd
    for (int64_t c = 0; c < C; ++c) dr[c] = (vexp(static_cast<T>(xr[c] - l)) - off) * wr;
    dr[tgt[r]] -= static_cast<T>((1 - eps) * wd);
  }
}

}  // namespace

void CpuBackend::do_cross_entropy_forward(const Tensor& x, const Tensor& target, int64_t ignore_index,
                                          double label_smoothing, const Tensor& lse, const Tensor& loss,
                                          const Tensor& total) {
  const int64_t rows = x.size(0), C = x.size(1);
  dispatch_floating(x.dtype(), "cross_entropy_forward", [&]<class T>() {
    ce_forward_rows<T>(x.data<T>(), target.data<int64_t>(), rows, C, ignore_index, label_smoothing,
                       lse.data<double>(), loss.data<double>());
  });
  if (total.defined()) {
    double t = 0;  // in row order, so the result does not depend on the thread count
    for (int64_t r = 0; r < rows; ++r) t += loss.data<double>()[r];
    *total.data<double>() = t;
  }
}

void CpuBackend::do_cross_entropy_backward(const Tensor& x, const Tensor& target, const Tensor& lse,
                                           const Tensor& weight, int64_t ignore_index, double label_smoothing,
                                           const Tensor& dx) {
  const int64_t rows = x.size(0), C = x.size(1);
  dispatch_floating(x.dtype(), "cross_entropy_backward", [&]<class T>() {
    ce_backward_rows<T>(x.data<T>(), target.data<int64_t>(), lse.data<double>(), weight.data<double>(),
                        rows ? weight.strides()[0] : 0, rows, C, ignore_index, label_smoothing, dx.data<T>());
  });
}

}  // namespace linea::cpu::inline LINEA_ISA_NS

#include "linea/tensor/cpu/isa_end.h"
