#include "linea/autograd/gradcheck.h"

#include <cmath>

#include "linea/autograd/graph.h"
#include "linea/autograd/ops_elementwise.h"
#include "linea/autograd/ops_reduce.h"
#include "linea/tensor/backend.h"
#include "linea/tensor/creation.h"
#include "linea/tensor/error.h"

namespace linea {

namespace {
// Storage offsets (in elements) of a view's elements in row-major logical order.
std::vector<int64_t> element_offsets(const Tensor& t) {
  std::vector<int64_t> offs;
  offs.reserve(static_cast<size_t>(t.numel()));
  Shape idx(t.dim(), 0);
  for (int64_t n = 0; n < t.numel(); ++n) {
    int64_t off = t.offset();
    for (int64_t d = 0; d < t.dim(); ++d) off += idx[d] * t.strides()[d];
    offs.push_back(off);
    for (int64_t d = t.dim() - 1; d >= 0 && ++idx[d] == t.shape()[d]; --d) idx[d] = 0;
  }
  return offs;
}

double dot(const std::vector<double>& a, const std::vector<double>& b) {
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
  return s;
}
}  // namespace

GradcheckResult gradcheck(const GradcheckFn& f, const std::vector<Tensor>& inputs, GradcheckOptions opts) {
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Tensor& x = inputs[i];
    LINEA_CHECK(!x.requires_grad() || (x.dtype() == DType::Float64 && x.is_leaf()),
                "[gradcheck] input {} must be a float64 leaf tensor, got {}{}", i, x.dtype(),
                x.is_leaf() ? "" : " (not a leaf)");
  }

  // Analytic: one backward of L = sum(u * y).
  for (Tensor x : inputs)
    if (x.requires_grad()) x.zero_grad();
  Tensor y = f(inputs);
  LINEA_CHECK(y.dtype() == DType::Float64, "[gradcheck] f must return float64, got {}", y.dtype());
  Generator gen(opts.seed);
  Tensor u = randn(y.shape(), gen, {DType::Float64, y.device()});
  LINEA_CHECK(y.requires_grad(), "[gradcheck] f's output does not depend on any input that requires grad");
  sum(mul(u, y)).backward();
  const std::vector<double> uv = u.to_vector();

  auto loss = [&]() {
    NoGradGuard guard;
    return dot(uv, f(inputs).to_vector());
  };

  GradcheckResult res;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Tensor& x = inputs[i];
    if (!x.requires_grad()) continue;
    Tensor g = x.grad();
    std::vector<double> analytic = g.defined() ? g.to_vector() : std::vector<double>(x.numel(), 0.0);
    std::vector<int64_t> offs = element_offsets(x);
    for (size_t e = 0; e < offs.size(); ++e) {
      // A 0-d view of the element, written through its backend: x may live on any device.
      const Tensor v = x.as_strided({}, {}, offs[e]);
      auto set = [&](double value) { backend(x.device()).fill(v, value); };
      const double orig = v.item();
      set(orig + opts.eps);
      const double lp = loss();
      set(orig - opts.eps);
      const double lm = loss();
      set(orig);
      const double numeric = (lp - lm) / (2 * opts.eps);
      const double err = std::abs(analytic[e] - numeric);
      const double ratio = err / (opts.atol + opts.rtol * std::abs(numeric));
      res.max_abs_error = std::max(res.max_abs_error, err);
      // NaN compares false both ways: a NaN gradient is the worst element and a failure.
      if (res.worst.input < 0 || !(ratio <= res.worst.ratio)) {
        const double rel = err == 0 ? 0 : err / std::abs(numeric);
        res.worst = {static_cast<int>(i), multi_index(static_cast<int64_t>(e), x.shape()), analytic[e], numeric,
                     err, rel, std::isnan(ratio) ? INFINITY : ratio};
      }
      if (res.ok && !(ratio <= 1)) {
        res.ok = false;
        res.message = fmt::format(
            "[gradcheck] input {} (shape {}), element [{}]: analytic {:.10g} vs numeric {:.10g} (|diff| {:.3g} > "
            "atol {} + rtol {} * |numeric|)",
            i, shape_str(x.shape()), fmt::join(multi_index(static_cast<int64_t>(e), x.shape()), ", "), analytic[e],
            numeric, err, opts.atol, opts.rtol);
      }
    }
  }
  for (Tensor x : inputs)
    if (x.requires_grad()) x.zero_grad();
  return res;
}

}  // namespace linea
