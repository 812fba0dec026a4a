#include "linea/nn/loss.h"

#include <limits>

#include "linea/autograd/function.h"
#include "linea/autograd/ops_elementwise.h"
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
