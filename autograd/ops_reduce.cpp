// Reductions and softmax, each forward with its backward beneath it.
//
// Every reduction funnels into one kernel call over a contiguous x read as [outer, n, inner]:
// when the reduced dims are adjacent, a contiguous x already has that layout (no copy); otherwise
// the reduced dims are permuted to the end and made contiguous, so [outer = kept, n = reduced,
// inner = 1]. The output comes out with the kept dims in their original order either way.
#include "linea/autograd/ops_reduce.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "linea/autograd/function.h"
#include "linea/autograd/ops_elementwise.h"
#include "linea/tensor/backend.h"
#include "linea/tensor/creation.h"
#include "linea/tensor/error.h"

namespace linea {

namespace {

struct Reduction {
  std::vector<bool> reduced;  // per dim of x
  Shape out_shape;            // as returned (honours keepdim)
  Shape keep_shape;           // with size-1 dims in place of the reduced ones: g broadcasts from here
  int64_t n = 1;              // number of elements folded into each output
};

Reduction plan(std::string_view op, const Tensor& x, const std::vector<int64_t>& dims, bool keepdim) {
  Reduction r;
  const int64_t nd = x.dim();
  r.reduced.assign(nd, dims.empty());
  for (int64_t d : dims) {
    int64_t w = wrap_dim(op, d, nd);
    if (nd == 0) continue;  // a 0-d tensor accepts dim 0 / -1 and has nothing to reduce
    LINEA_CHECK(!r.reduced[w], "[{}] dim {} appears more than once in dims ({})", op, d, fmt::join(dims, ", "));
    r.reduced[w] = true;
  }
  for (int64_t d = 0; d < nd; ++d) {
    r.keep_shape.push_back(r.reduced[d] ? 1 : x.shape()[d]);
    if (r.reduced[d]) r.n *= x.shape()[d];
    if (!r.reduced[d] || keepdim) r.out_shape.push_back(r.reduced[d] ? 1 : x.shape()[d]);
  }
  return r;
}

// Runs the kernel for `r` on x (no autograd) into a fresh tensor of r.out_shape.
Tensor reduce_forward(ReduceOp op, const Tensor& x, const Reduction& r, DType out_dtype) {
  Tensor src = x.detach();
  const int64_t nd = x.dim();
  int64_t first = nd, last = -1;  // span of reduced dims
  for (int64_t d = 0; d < nd; ++d)
    if (r.reduced[d]) first = std::min(first, d), last = std::max(last, d);
  bool adjacent = true;
  for (int64_t d = first; d <= last; ++d) adjacent = adjacent && r.reduced[d];

  int64_t outer = 1, inner = 1;
  if (last < 0) {
    src = src.contiguous();  // nothing reduced (0-d x): a copy through the kernel
    outer = x.numel();
  } else if (adjacent) {
    src = src.contiguous();
    for (int64_t d = 0; d < first; ++d) outer *= x.shape()[d];
    for (int64_t d = last + 1; d < nd; ++d) inner *= x.shape()[d];
  } else {
    std::vector<int64_t> perm;
    for (int64_t d = 0; d < nd; ++d)
      if (!r.reduced[d]) perm.push_back(d), outer *= x.shape()[d];
    for (int64_t d = 0; d < nd; ++d)
      if (r.reduced[d]) perm.push_back(d);
    src = src.permute(perm).contiguous();
  }
  Tensor out = empty(r.out_shape, out_dtype, x.device());
  backend(x.device()).reduce(op, src, out, outer, r.n, inner);
  return out;
}

// g (of r.out_shape) broadcast back over x's shape, as a zero-stride view.
Tensor expand_back(const Tensor& g, const Reduction& r, const Shape& x_shape) {
  return g.reshape(r.keep_shape).expand(x_shape);
}

void check_nonempty(std::string_view op, const Tensor& x, const Reduction& r) {
  LINEA_CHECK(r.n > 0, "[{}] cannot reduce over a dim of size 0 (input shape {})", op, shape_str(x.shape()));
}

}  // namespace

// ---- sum ----
Tensor sum(const Tensor& x, std::vector<int64_t> dims, bool keepdim) {
  Reduction r = plan("sum", x, dims, keepdim);
  // Integer and bool sums count in int64 (a sum of bools is a count, not a bool).
  const Tensor src = is_floating(x.dtype()) ? x : x.detach().to(DType::Int64);
  Tensor out = reduce_forward(ReduceOp::Sum, src, r, src.dtype());
  return autograd::record("sum", out, {x}, [r, shape = x.shape()](const Tensor& g) -> std::vector<Tensor> {
    return {expand_back(g, r, shape)};
  });
}

// ---- mean = sum / n (sum's backward does the rest) ----
Tensor mean(const Tensor& x, std::vector<int64_t> dims, bool keepdim) {
  LINEA_CHECK(is_floating(x.dtype()), "[mean] expected a floating dtype (float32 or float64), got {}", x.dtype());
  Reduction r = plan("mean", x, dims, keepdim);
  return sum(x, dims, keepdim) / static_cast<double>(r.n);
}

// ---- var: two passes (mean, then squared deviations), never E[x^2] - E[x]^2 ----
// n - correction <= 0 divides by zero and gives inf/NaN, like PyTorch.
Tensor var(const Tensor& x, std::vector<int64_t> dims, bool keepdim, int64_t correction) {
  LINEA_CHECK(is_floating(x.dtype()), "[var] expected a floating dtype (float32 or float64), got {}", x.dtype());
  Reduction r = plan("var", x, dims, keepdim);
  const double denom = static_cast<double>(r.n - correction);
  Tensor out, centered;
  {
    NoGradGuard no_grad;
    centered = x - mean(x, dims, /*keepdim=*/true);
    out = sum(centered * centered, dims, keepdim) / denom;
  }
  return autograd::record("var", out, {x}, [r, centered, denom, shape = x.shape()](const Tensor& g) {
    // d var / dx = 2 (x - mean) / (n - correction); the mean's own dependence on x cancels out
    // because the deviations sum to zero. Under create_graph the deviations must be a function of
    // x: c -> c - mean(c) is x -> x - mean(x), linear, so applied to the deviations attached as x
    // (their mean is 0) it gives the same values with the graph of x - mean(x).
    Tensor c = centered;
    if (autograd::grad_enabled()) {
      c = autograd::saved_input(centered, 0);
      c = c - autograd::sum_to(c, r.keep_shape) / static_cast<double>(r.n);
    }
    return std::vector<Tensor>{expand_back(g, r, shape) * c * (2.0 / denom)};
  });
}

// ---- max / min: the gradient goes to the elements equal to the result; k tied elements get
// g / k each (a subgradient; PyTorch's full reductions do the same) ----
namespace {
Tensor extreme(std::string_view name, ReduceOp op, const Tensor& x, const std::vector<int64_t>& dims, bool keepdim) {
  Reduction r = plan(name, x, dims, keepdim);
  check_nonempty(name, x, r);
  Tensor out = reduce_forward(op, x, r, x.dtype());
  return autograd::record(std::string(name), out, {x}, [r, x = x.detach(), res = out.detach()](const Tensor& g) {
    Tensor hit = eq(x, expand_back(res, r, x.shape())).to(x.dtype());
    Tensor ties = reduce_forward(ReduceOp::Sum, hit, r, x.dtype());
    return std::vector<Tensor>{hit * expand_back(g / ties, r, x.shape())};
  }, autograd::Saves::InputsAndOutput);
}
}  // namespace

Tensor max(const Tensor& x, std::vector<int64_t> dims, bool keepdim) {
  return extreme("max", ReduceOp::Max, x, dims, keepdim);
}

Tensor min(const Tensor& x, std::vector<int64_t> dims, bool keepdim) {
  return extreme("min", ReduceOp::Min, x, dims, keepdim);
}

// ---- argmax (not differentiable) ----
Tensor argmax(const Tensor& x, int64_t dim, bool keepdim) {
  Reduction r = plan("argmax", x, {dim}, keepdim);
  check_nonempty("argmax", x, r);
  return reduce_forward(ReduceOp::ArgMax, x, r, DType::Int64);
}

// ---- logsumexp: d/dx = exp(x - lse) = softmax over the reduced dims ----
Tensor logsumexp(const Tensor& x, std::vector<int64_t> dims, bool keepdim) {
  LINEA_CHECK(is_floating(x.dtype()), "[logsumexp] expected a floating dtype (float32 or float64), got {}",
              x.dtype());
  Reduction r = plan("logsumexp", x, dims, keepdim);
  Tensor out = reduce_forward(ReduceOp::LogSumExp, x, r, x.dtype());
  return autograd::record("logsumexp", out, {x}, [r, x = x.detach(), res = out.detach()](const Tensor& g) {
    const Tensor lse = expand_back(autograd::saved_output(res), r, x.shape());
    return std::vector<Tensor>{exp(autograd::saved_input(x, 0) - lse) * expand_back(g, r, x.shape())};
  }, autograd::Saves::InputsAndOutput);
}

// ---- softmax / log_softmax: the fused row kernels work on the last dim; another dim is swapped
// to the end (and back) with a transpose + contiguous copy ----
namespace {
Tensor softmax_impl(std::string_view name, const Tensor& x, int64_t dim, bool log) {
  LINEA_CHECK(is_floating(x.dtype()), "[{}] expected a floating dtype (float32 or float64), got {}", name,
              x.dtype());
  const int64_t d = wrap_dim(name, dim, x.dim());
  const int64_t last = std::max<int64_t>(x.dim() - 1, 0);
  // to_last / from_last are the same swap; when d is already last they are plain no-ops.
  auto swap = [d, last](const Tensor& t) { return d == last ? t.contiguous() : t.transpose(d, last).contiguous(); };

  Tensor xt = swap(x.detach());
  Tensor yt = empty(xt.shape(), xt.dtype(), xt.device());
  backend(x.device()).softmax(xt, yt, log);
  Tensor out = d == last ? yt : swap(yt);
  // yt may be `out` itself: capture a detached handle (no reference cycle).
  return autograd::record(std::string(name), out, {x}, [yt = yt.detach(), swap, log, d](const Tensor& g) {
    if (autograd::grad_enabled()) {  // create_graph: the kernel's formula as recorded ops, in x's layout
      const Tensor y = autograd::saved_output(swap(yt));
      return std::vector<Tensor>{log ? g - exp(y) * sum(g, {d}, true) : y * (g - sum(g * y, {d}, true))};
    }
    Tensor gt = swap(g);
    Tensor dxt = empty(gt.shape(), gt.dtype(), gt.device());
    backend(gt.device()).softmax_backward(yt, gt, dxt, log);
    return std::vector<Tensor>{swap(dxt)};
  }, autograd::Saves::InputsAndOutput);
}
}  // namespace

Tensor softmax(const Tensor& x, int64_t dim) { return softmax_impl("softmax", x, dim, false); }
Tensor log_softmax(const Tensor& x, int64_t dim) { return softmax_impl("log_softmax", x, dim, true); }

}  // namespace linea
