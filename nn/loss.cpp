#include "linea/nn/loss.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "linea/autograd/function.h"
#include "linea/autograd/ops_elementwise.h"
#include "linea/autograd/ops_reduce.h"
#include "linea/tensor/cpu/vec_math.h"
#include "linea/tensor/creation.h"

namespace linea::nn {

namespace {

// Per row r with shift m = max_c x_c (so exp never overflows) and s = sum_c exp(x_c - m):
//   lse  = m + log s
//   loss = lse - (1 - eps) x_t - (eps / C) sum_c x_c
//        = log s - (1 - eps)(x_t - m) - (eps / C) sum_c (x_c - m)
// The second form subtracts only small numbers, so it stays exact for logits ~1e4 in float32.
// lse is kept in double: backward recomputes softmax as exp(x - lse) from it.
template <class T>
void ce_forward_rows(const T* x, const int64_t* tgt, int64_t rows, int64_t C, const CrossEntropyOptions& o,
                     double* lse, double* loss) {
  const double eps = o.label_smoothing;
#pragma omp parallel for schedule(static) if (rows * C > (1 << 15))
  for (int64_t r = 0; r < rows; ++r) {
    if (tgt[r] == o.ignore_index) {
      lse[r] = 0;
      loss[r] = 0;
      continue;
    }
    const T* xr = x + r * C;
    // omp simd lets both reductions vectorise (fixed lane order: the same result every run).
    T m = -std::numeric_limits<T>::infinity();
#pragma omp simd reduction(max : m)
    for (int64_t c = 0; c < C; ++c) m = std::max(m, xr[c]);
    double s = 0, sx = 0;
#pragma omp simd reduction(+ : s, sx)
    for (int64_t c = 0; c < C; ++c) {
      const T d = xr[c] - m;
      s += cpu::vexp(d);
      sx += d;
    }
    const double log_s = std::log(s);
    lse[r] = static_cast<double>(m) + log_s;
    // Without smoothing sx is left out: a masked (-inf) logit would make 0 * sx a NaN.
    loss[r] = log_s - (1 - eps) * static_cast<double>(xr[tgt[r]] - m) - (eps > 0 ? eps / C * sx : 0.0);
  }
}

// d loss_r / d x_rc = softmax_rc - eps / C - (1 - eps) [c == t_r], times the row's weight w_r
// (the incoming gradient, divided by the count for Mean). Ignored rows get zero.
template <class T>
void ce_backward_rows(const T* x, const int64_t* tgt, const double* lse, const double* w, int64_t rows, int64_t C,
                      const CrossEntropyOptions& o, T* dx) {
  const double eps = o.label_smoothing;
#pragma omp parallel for schedule(static) if (rows * C > (1 << 15))
  for (int64_t r = 0; r < rows; ++r) {
    const T* xr = x + r * C;
    T* dr = dx + r * C;
    if (tgt[r] == o.ignore_index) {
      for (int64_t c = 0; c < C; ++c) dr[c] = 0;
      continue;
    }
    const T wr = static_cast<T>(w[r]), off = static_cast<T>(eps / C);
    const double l = lse[r];
#pragma omp simd
    for (int64_t c = 0; c < C; ++c) dr[c] = (cpu::vexp(static_cast<T>(xr[c] - l)) - off) * wr;
    dr[tgt[r]] -= static_cast<T>((1 - eps) * w[r]);
  }
}

}  // namespace

Tensor cross_entropy(const Tensor& logits, const Tensor& targets, CrossEntropyOptions opts) {
  LINEA_CHECK(logits.defined() && targets.defined(), "[cross_entropy] logits and targets must be defined");
  LINEA_CHECK(logits.dim() >= 1 && logits.size(-1) >= 1,
              "[cross_entropy] logits must be [..., C] with C >= 1, got shape {}", shape_str(logits.shape()));
  const Shape rows_shape(logits.shape().begin(), logits.shape().end() - 1);
  LINEA_CHECK(targets.shape() == rows_shape,
              "[cross_entropy] targets of shape {} do not match logits of shape {} (expected targets {})",
              shape_str(targets.shape()), shape_str(logits.shape()), shape_str(rows_shape));
  LINEA_CHECK(is_floating(logits.dtype()) && targets.dtype() == DType::Int64,
              "[cross_entropy] expects floating logits and int64 targets, got {} and {}", logits.dtype(),
              targets.dtype());
  LINEA_CHECK(logits.device().is_cpu() && targets.device().is_cpu(),
              "[cross_entropy] only runs on the CPU for now, got logits on {} and targets on {}", logits.device(),
              targets.device());
  LINEA_CHECK(opts.label_smoothing >= 0 && opts.label_smoothing <= 1,
              "[cross_entropy] label_smoothing must be in [0, 1], got {}", opts.label_smoothing);

  const int64_t C = logits.size(-1), rows = targets.numel();
  const Tensor tgt = targets.contiguous();
  // Validate every target before any (parallel) work, and count the rows that take part.
  int64_t count = 0;
  const int64_t* t = tgt.data<int64_t>();
  for (int64_t r = 0; r < rows; ++r) {
    if (t[r] == opts.ignore_index) continue;
    LINEA_CHECK(t[r] >= 0 && t[r] < C,
                "[cross_entropy] target {} at flat index {} is out of range for C = {} classes (valid: 0..{}, or "
                "ignore_index {})", t[r], r, C, C - 1, opts.ignore_index);
    ++count;
  }

  auto forward = [=](const std::vector<Tensor>& in) {
    const Tensor x = in[0].contiguous();
    Tensor lse = empty({rows}, DType::Float64);
    std::vector<double> loss(static_cast<size_t>(rows));
    dispatch_floating(x.dtype(), "cross_entropy", [&]<class T>() {
      ce_forward_rows<T>(x.data<T>(), tgt.data<int64_t>(), rows, C, opts, lse.data<double>(), loss.data());
    });
    Tensor out;
    if (opts.reduction == Reduction::None) {
      out = from_vector(loss).reshape(rows_shape).to(x.dtype());  // rows_shape may be 0-d
    } else {
      double total = 0;  // summed in row order, so the result does not depend on the thread count
      for (double l : loss) total += l;
      if (opts.reduction == Reduction::Mean)
        total = count ? total / count : std::numeric_limits<double>::quiet_NaN();
      out = scalar(total, x.dtype());
    }
    return Forward{out, {x, tgt, lse}};
  };

  auto backward = [=](const std::vector<Tensor>& saved, const Tensor& grad) -> std::vector<Tensor> {
    const Tensor &x = saved[0], &tg = saved[1], &lse = saved[2];
    // One weight per row: the incoming gradient, and 1/count for Mean.
    std::vector<double> w(static_cast<size_t>(rows));
    if (opts.reduction == Reduction::None) {
      w = grad.to_vector();
    } else {
      const double g = grad.item() / (opts.reduction == Reduction::Mean ? static_cast<double>(count) : 1.0);
      std::fill(w.begin(), w.end(), g);
    }
    Tensor dx = empty(x.shape(), x.dtype());
    dispatch_floating(x.dtype(), "cross_entropy", [&]<class T>() {
      ce_backward_rows<T>(x.data<T>(), tg.data<int64_t>(), lse.data<double>(), w.data(), rows, C, opts,
                          dx.data<T>());
    });
    return {dx, Tensor()};
  };

  return custom_function("cross_entropy", {logits, targets}, forward, backward);
}

Tensor mse_loss(const Tensor& pred, const Tensor& target, Reduction reduction) {
  LINEA_CHECK(pred.defined() && target.defined(), "[mse_loss] pred and target must be defined");
  LINEA_CHECK(pred.shape() == target.shape(), "[mse_loss] pred of shape {} and target of shape {} differ",
              shape_str(pred.shape()), shape_str(target.shape()));
  LINEA_CHECK(is_floating(pred.dtype()) && pred.dtype() == target.dtype(),
              "[mse_loss] expects floating pred and target of one dtype, got {} and {}", pred.dtype(),
              target.dtype());
  const Tensor d = pred - target;
  const Tensor sq = d * d;
  switch (reduction) {
    case Reduction::Mean: return mean(sq);
    case Reduction::Sum: return sum(sq);
    case Reduction::None: return sq;
  }
  return sq;
}

}  // namespace linea::nn
