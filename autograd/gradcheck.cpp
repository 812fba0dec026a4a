#include "linea/autograd/gradcheck.h"

#include <cmath>

#include "linea/autograd/graph.h"
#include "linea/autograd/ops_elementwise.h"
#include "linea/autograd/ops_index.h"
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

namespace {
// d sum(u * f(xs)) / d wrt_i for a fixed random u (from `seed`), zeros where f does not depend on
// wrt_i; with a graph when create_graph. Grad mode is on inside: gradcheck evaluates its
// function under NoGradGuard for the differences, and a first gradient needs a graph.
std::vector<Tensor> first_gradients(const GradcheckFn& f, const std::vector<Tensor>& xs, const std::vector<Tensor>& wrt,
                                    uint64_t seed, bool create_graph) {
  struct Restore {
    bool mode;
    ~Restore() { autograd::set_grad_enabled(mode); }
  } restore{autograd::grad_enabled()};
  autograd::set_grad_enabled(true);
  const Tensor y = f(xs);
  LINEA_CHECK(y.requires_grad(), "[gradgradcheck] f's output does not depend on any input that requires grad");
  Generator gen(seed);
  const Tensor u = randn(y.shape(), gen, {DType::Float64, y.device()});
  std::vector<Tensor> gs = autograd::grad({sum(mul(u, y))}, wrt, {}, create_graph, create_graph, true);
  for (size_t i = 0; i < gs.size(); ++i)
    if (!gs[i].defined()) gs[i] = zeros(wrt[i].shape(), {DType::Float64, wrt[i].device()});
  return gs;
}
}  // namespace

GradcheckResult gradgradcheck(const GradcheckFn& f, const std::vector<Tensor>& inputs, GradcheckOptions opts) {
  std::vector<Tensor> wrt;  // the inputs that require grad, in order
  for (const Tensor& x : inputs)
    if (x.requires_grad()) wrt.push_back(x);
  LINEA_CHECK(!wrt.empty(), "[gradgradcheck] no input requires grad");
  const uint64_t seed = opts.seed;
  // G: the first gradients, flattened into one vector, as a function of the inputs.
  auto first_gradient = [&](const std::vector<Tensor>& xs) {
    std::vector<Tensor> gs = first_gradients(f, xs, wrt, seed, true), flat;
    for (size_t i = 0; i < gs.size(); ++i) {
      // A constant gradient (f linear in x_i) has a zero second derivative: adding 0 * x_i keeps
      // that exact while giving gradcheck a graph to differentiate.
      if (!gs[i].requires_grad()) gs[i] = gs[i] + mul(wrt[i], scalar(0.0, {DType::Float64, wrt[i].device()}));
      flat.push_back(gs[i].reshape({-1}));
    }
    return cat(flat, 0);
  };
  // The recorded backward must give the plain backward's first gradient: the differences below
  // only check the recorded one against itself.
  const std::vector<double> recorded = first_gradient(inputs).to_vector();
  std::vector<double> plain;
  for (const Tensor& g : first_gradients(f, inputs, wrt, seed, false)) {
    const std::vector<double> v = g.to_vector();
    plain.insert(plain.end(), v.begin(), v.end());
  }
  for (size_t e = 0; e < plain.size(); ++e) {
    const double err = std::abs(recorded[e] - plain[e]);
    if (!(err <= opts.atol + opts.rtol * std::abs(plain[e])))
      return {false, fmt::format("[gradgradcheck] the first gradient under create_graph differs from backward's: "
                                 "element {} of the flattened gradients is {:.10g}, backward gives {:.10g}",
                                 e, recorded[e], plain[e]), err, {}};
  }
  opts.seed = seed + 1;  // the weighting of the first gradient: independent of u
  GradcheckResult r = gradcheck(first_gradient, inputs, opts);
  if (!r.ok) r.message = "[gradgradcheck] second order: " + r.message;
  return r;
}

}  // namespace linea
