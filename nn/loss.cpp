#include "linea/nn/loss.h"

#include <limits>
#include <string_view>

#include "linea/autograd/function.h"
#include "linea/autograd/ops_elementwise.h"
#include "linea/autograd/ops_index.h"
#include "linea/autograd/ops_reduce.h"
#include "linea/tensor/backend.h"
#include "linea/tensor/creation.h"
#include "linea/tensor/error.h"

namespace linea::nn {

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
  LINEA_CHECK(logits.device() == targets.device(), "[cross_entropy] logits on {} and targets on {} differ",
              logits.device(), targets.device());
  LINEA_CHECK(opts.label_smoothing >= 0 && opts.label_smoothing <= 1,
              "[cross_entropy] label_smoothing must be in [0, 1], got {}", opts.label_smoothing);

  const int64_t C = logits.size(-1), rows = targets.numel();
  const Device dev = logits.device();
  const Tensor tgt = targets.contiguous().view({rows});
  // Validate every target before any work, and count the rows that take part, with tensor ops on
  // the targets' own device: one number (how many targets are out of range) comes to the host,
  // and only a batch with a bad target pays for finding which one. The count stays a 0-d tensor.
  const Options i64(DType::Int64, dev);
  const Tensor counted = ne(tgt, scalar(static_cast<double>(opts.ignore_index), i64));  // [rows] bool
  const Tensor checked = where(counted, tgt, scalar(0, i64));  // an ignored row reads as class 0
  const Tensor bad = lt(checked, scalar(0, i64)).to(DType::Int64) +
                     ge(checked, scalar(static_cast<double>(C), i64)).to(DType::Int64);
  if (sum(bad).item() != 0) {
    const std::vector<int64_t> t = tgt.to_vector_as<int64_t>(), b = bad.to_vector_as<int64_t>();
    for (int64_t r = 0; r < rows; ++r)
      LINEA_CHECK(b[r] == 0, "[cross_entropy] target {} at flat index {} is out of range for C = {} classes (valid: "
                  "0..{}, or ignore_index {})", t[r], r, C, C - 1, opts.ignore_index);
  }
  const Tensor count = sum(counted).to(DType::Float64);  // 0-d, on dev
  const Tensor nan = scalar(std::numeric_limits<double>::quiet_NaN(), Options(DType::Float64, dev));

  // The kernels (Backend::cross_entropy_forward / _backward) see logits as [rows, C].
  auto forward = [=](const std::vector<Tensor>& in) {
    const Tensor x = in[0].contiguous().view({rows, C});
    const Tensor lse = empty({rows}, DType::Float64, dev), loss = empty({rows}, DType::Float64, dev);
    const bool reduce = opts.reduction != Reduction::None;
    const Tensor total = reduce ? empty({}, DType::Float64, dev) : Tensor();  // Σ loss, in double
    backend(dev).cross_entropy_forward(x, tgt, opts.ignore_index, opts.label_smoothing, lse, loss, total);
    Tensor out;
    if (!reduce) {
      out = loss.reshape(rows_shape).to(x.dtype());  // rows_shape may be 0-d
    } else if (opts.reduction == Reduction::Mean) {  // a mean over no row is NaN, as in PyTorch
      out = where(gt(count, scalar(0, count.dtype())), total / count, nan).to(x.dtype());
    } else {
      out = total.to(x.dtype());
    }
    return Forward{out, {x, tgt, lse}};
  };

  auto backward = [=, shape = logits.shape()](const std::vector<Tensor>& saved,
                                              const Tensor& grad) -> std::vector<Tensor> {
    const Tensor &x = saved[0], &tg = saved[1], &lse = saved[2];
    // One float64 weight per row: the incoming gradient (divided by the count for Mean), a
    // stride-0 broadcast of one number unless the reduction is None.
    const Tensor g = grad.to(DType::Float64);
    const Tensor w = opts.reduction == Reduction::None
                         ? g.reshape({rows})
                         : (opts.reduction == Reduction::Mean ? g / count : g).expand({rows});
    const Tensor dx = empty({rows, C}, x.dtype(), dev);
    backend(dev).cross_entropy_backward(x, tg, lse, w, opts.ignore_index, opts.label_smoothing, dx);
    return {dx.view(shape), Tensor()};
  };

  // In ops: the smoothed negative log-likelihood of each counted row, reduced as the kernels do.
  auto composite = [=](const std::vector<Tensor>& in) {
    const Tensor lp = log_softmax(in[0].reshape({rows, C}), -1);
    const Tensor picked = gather(lp, 1, checked.reshape({rows, 1})).squeeze(1);
    const double eps = opts.label_smoothing;
    Tensor loss = -((1.0 - eps) * picked + (eps / static_cast<double>(C)) * sum(lp, {-1}));
    loss = where(counted, loss, scalar(0, Options(lp.dtype(), dev)));
    if (opts.reduction == Reduction::None) return loss.reshape(rows_shape);
    const Tensor total = sum(loss);
    return opts.reduction == Reduction::Mean ? total / count.to(lp.dtype()) : total;
  };
  return custom_function("cross_entropy", {logits, targets}, forward, backward, composite);
}

namespace {

// The elementwise losses' checks: pred and target defined, of one shape and one floating dtype.
void check_pair(std::string_view op, const Tensor& pred, const Tensor& target) {
  LINEA_CHECK(pred.defined() && target.defined(), "[{}] pred and target must be defined", op);
  LINEA_CHECK(pred.shape() == target.shape(), "[{}] pred of shape {} and target of shape {} differ", op,
              shape_str(pred.shape()), shape_str(target.shape()));
  LINEA_CHECK(is_floating(pred.dtype()) && pred.dtype() == target.dtype(),
              "[{}] expects floating pred and target of one dtype, got {} and {}", op, pred.dtype(), target.dtype());
  LINEA_CHECK(pred.device() == target.device(), "[{}] pred on {} and target on {} differ", op, pred.device(),
              target.device());
}

Tensor reduce(const Tensor& loss, Reduction reduction) {
  switch (reduction) {
    case Reduction::Mean: return mean(loss);
    case Reduction::Sum: return sum(loss);
    case Reduction::None: return loss;
  }
  return loss;
}

}  // namespace

Tensor mse_loss(const Tensor& pred, const Tensor& target, Reduction reduction) {
  check_pair("mse_loss", pred, target);
  const Tensor d = pred - target;
  return reduce(d * d, reduction);
}

Tensor nll_loss(const Tensor& log_probs, const Tensor& targets, Reduction reduction, int64_t ignore_index) {
  LINEA_CHECK(log_probs.defined() && targets.defined(), "[nll_loss] log_probs and targets must be defined");
  LINEA_CHECK(log_probs.dim() == 2 && targets.dim() == 1 && targets.size(0) == log_probs.size(0),
              "[nll_loss] expects log_probs [N, C] and targets [N], got shapes {} and {}",
              shape_str(log_probs.shape()), shape_str(targets.shape()));
  LINEA_CHECK(is_floating(log_probs.dtype()) && targets.dtype() == DType::Int64,
              "[nll_loss] expects floating log_probs and int64 targets, got {} and {}", log_probs.dtype(),
              targets.dtype());
  LINEA_CHECK(log_probs.device() == targets.device(), "[nll_loss] log_probs on {} and targets on {} differ",
              log_probs.device(), targets.device());
  const int64_t C = log_probs.size(1);
  const Options i64(DType::Int64, targets.device());
  const Tensor counted = ne(targets, scalar(static_cast<double>(ignore_index), i64));
  const Tensor idx = where(counted, targets, scalar(0, i64));  // an ignored row reads class 0, then weighs 0
  const Tensor bad = lt(idx, scalar(0, i64)).to(DType::Int64) + ge(idx, scalar(double(C), i64)).to(DType::Int64);
  if (sum(bad).item() != 0) {
    const std::vector<int64_t> t = targets.to_vector_as<int64_t>(), b = bad.to_vector_as<int64_t>();
    for (size_t r = 0; r < t.size(); ++r)
      LINEA_CHECK(b[r] == 0, "[nll_loss] target {} at index {} is out of range for C = {} classes (valid: 0..{}, "
                  "or ignore_index {})", t[r], r, C, C - 1, ignore_index);
  }
  const Tensor picked = gather(log_probs, 1, idx.unsqueeze(1)).squeeze(1);
  const Tensor loss = -where(counted, picked, scalar(0, {log_probs.dtype(), log_probs.device()}));
  if (reduction == Reduction::Mean)  // 0 / 0 = NaN with no counted row, as in PyTorch
    return sum(loss) / sum(counted).to(log_probs.dtype());
  return reduce(loss, reduction);
}

Tensor smooth_l1_loss(const Tensor& pred, const Tensor& target, Reduction reduction, double beta) {
  check_pair("smooth_l1_loss", pred, target);
  LINEA_CHECK(beta >= 0, "[smooth_l1_loss] beta must be >= 0, got {}", beta);
  const Tensor d = pred - target, a = abs(d);
  if (beta == 0) return reduce(a, reduction);  // the quadratic branch would divide by 0
  const Tensor quadratic = d * d * (0.5 / beta), linear = a - 0.5 * beta;
  return reduce(where(lt(a, scalar(beta, {a.dtype(), a.device()})), quadratic, linear), reduction);
}

Tensor binary_cross_entropy(const Tensor& probs, const Tensor& target, Reduction reduction) {
  check_pair("binary_cross_entropy", probs, target);
  const Options o(probs.dtype(), probs.device());
  // One number to the host: how many probabilities fall outside [0, 1] (NaN passes, as in PyTorch).
  const int64_t outside = static_cast<int64_t>(sum(lt(probs, scalar(0, o)).to(DType::Int64) +
                                                   gt(probs, scalar(1, o)).to(DType::Int64)).item());
  LINEA_CHECK(outside == 0, "[binary_cross_entropy] every probability must be in [0, 1]; {} of {} are not (pass "
              "logits to binary_cross_entropy_with_logits instead)", outside, probs.numel());
  auto forward = [](const std::vector<Tensor>& in) {
    const Tensor &p = in[0], &t = in[1];
    const Tensor lp = clamp(log(p), -100, std::numeric_limits<double>::infinity());
    const Tensor l1p = clamp(log(1.0 - p), -100, std::numeric_limits<double>::infinity());
    return Forward{-(t * lp + (1.0 - t) * l1p), {p, t, lp, l1p}};
  };
  auto backward = [](const std::vector<Tensor>& saved, const Tensor& g) -> std::vector<Tensor> {
    const Tensor &p = saved[0], &t = saved[1], &lp = saved[2], &l1p = saved[3];
    const Tensor denom = clamp(p * (1.0 - p), 1e-12, std::numeric_limits<double>::infinity());
    return {g * (p - t) / denom, g * (l1p - lp)};
  };
  auto composite = [](const std::vector<Tensor>& in) {
    const Tensor &p = in[0], &t = in[1];
    return -(t * clamp(log(p), -100, std::numeric_limits<double>::infinity()) +
             (1.0 - t) * clamp(log(1.0 - p), -100, std::numeric_limits<double>::infinity()));
  };
  return reduce(custom_function("binary_cross_entropy", {probs, target}, forward, backward, composite), reduction);
}

Tensor binary_cross_entropy_with_logits(const Tensor& logits, const Tensor& target, Reduction reduction) {
  check_pair("binary_cross_entropy_with_logits", logits, target);
  return reduce(softplus(logits) - logits * target, reduction);
}

}  // namespace linea::nn
