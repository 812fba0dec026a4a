// layer_norm and rms_norm: checks, one fused forward kernel, and the backward beneath it.
#include "linea/autograd/ops_norm.h"

#include <algorithm>
#include <vector>

#include "linea/autograd/function.h"
#include "linea/autograd/ops_elementwise.h"
#include "linea/autograd/ops_reduce.h"
#include "linea/tensor/backend.h"
#include "linea/tensor/creation.h"
#include "linea/tensor/error.h"

namespace linea {

namespace {

void check_norm_inputs(std::string_view op, const Tensor& x, const Tensor& weight, const Tensor& bias, double eps) {
  LINEA_CHECK(x.defined() && is_floating(x.dtype()) && x.dim() >= 1,
              "[{}] x must be a floating tensor with at least 1 dim, got {}", op,
              x.defined() ? fmt::format("{} {}", shape_str(x.shape()), x.dtype()) : "an undefined tensor");
  LINEA_CHECK(eps >= 0, "[{}] eps must be >= 0, got {}", op, eps);
  for (const auto& [what, t] : {std::pair{"weight", &weight}, std::pair{"bias", &bias}}) {
    if (!t->defined()) continue;
    LINEA_CHECK(t->shape() == Shape{x.shape().back()} && t->dtype() == x.dtype() && t->device() == x.device(),
                "[{}] {} must be [{}] {} on {} to match x {}, got {} {} on {}", op, what, x.shape().back(), x.dtype(),
                x.device().str(), shape_str(x.shape()), shape_str(t->shape()), t->dtype(), t->device().str());
  }
}

// The tensor the kernel reads: detached, contiguous; undefined stays undefined.
Tensor kernel_input(const Tensor& t) { return t.defined() ? t.detach().contiguous() : t; }

// Whether the backward needs this optional parameter's gradient; the kernel skips the undefined.
bool wants_grad(const Tensor& t) { return t.defined() && t.requires_grad(); }

// Where the backward writes dx: into g itself when the engine's copy is the only one (the kernels
// allow dx = dy), which is in cache from the op that made it, where a new tensor would first be
// read into cache to be written (measured: docs/benchmarks.md, "Other kernels and steps").
Tensor grad_target(const Tensor& g, const Tensor& x) {
  return autograd::exclusive(g) && g.shape() == x.shape() && g.dtype() == x.dtype() ? g : empty_like(x);
}

// The norms' rows are independent, so the kernels may take them in any order: in the order they
// lie in memory when x's elements fill one contiguous block with the last dim innermost (the
// [B, H, N, e] heads of a [B, N, H·e] tensor, as the causal MHLA's out_norm gets them). The kernels
// then run on that block as it lies and the output keeps x's layout, which spares copying x into
// a contiguous tensor and, where the heads are merged after, copying the output back.
struct RowOrder {
  std::vector<int64_t> perm, inverse;  // both empty: x is taken as it is (contiguous, or copied)
  Tensor rows(const Tensor& t) const { return perm.empty() ? t : t.permute(perm); }
  Tensor back(const Tensor& t) const { return inverse.empty() ? t : t.permute(inverse); }
};

RowOrder row_order(const Tensor& x) {
  const int64_t n = x.dim();
  if (n < 2 || x.is_contiguous() || x.strides().back() != 1) return {};
  std::vector<int64_t> perm(n);
  for (int64_t i = 0; i < n; ++i) perm[i] = i;
  std::stable_sort(perm.begin(), perm.end() - 1,
                   [&](int64_t a, int64_t b) { return x.strides()[a] > x.strides()[b]; });
  if (!x.permute(perm).is_contiguous()) return {};
  std::vector<int64_t> inverse(n);
  for (int64_t i = 0; i < n; ++i) inverse[perm[i]] = i;
  return {perm, inverse};
}

// The norms' gradients as recorded ops over the live inputs, for create_graph: x normalised over
// its last dim (centred first for layer_norm), xhat = (x - mu) * rstd, and with gh = g * w,
// dx = rstd * (gh - [mean(gh)] - xhat * mean(gh * xhat)), dw = sum of g * xhat, db = sum of g.
std::vector<Tensor> norm_grads(const Tensor& g, const Tensor& x, const Tensor& w, const Tensor& b, double eps,
                               bool centre, bool gw, bool gb) {
  const Tensor xm = centre ? x - mean(x, {-1}, true) : x;
  const Tensor rstd = rsqrt(mean(xm * xm, {-1}, true) + eps), xhat = xm * rstd;
  const Tensor gh = w.defined() ? g * w : g;
  Tensor inner = gh - xhat * mean(gh * xhat, {-1}, true);
  if (centre) inner = inner - mean(gh, {-1}, true);
  return {rstd * inner, gw ? autograd::sum_to(g * xhat, w.shape()) : Tensor(),
          gb ? autograd::sum_to(g, b.shape()) : Tensor()};
}

// The norm's input i as the kernel read it (xc: rows in `order`), back in the input's layout,
// attached to its graph.
Tensor live(const Tensor& saved, const RowOrder& order, size_t i) {
  return saved.defined() ? autograd::saved_input(order.back(saved), i) : saved;
}

}  // namespace

Tensor layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps) {
  check_norm_inputs("layer_norm", x, weight, bias, eps);
  const RowOrder order = row_order(x);
  Tensor xc = kernel_input(order.rows(x)), w = kernel_input(weight), b = kernel_input(bias);
  const int64_t n = x.shape().back(), rows = n == 0 ? 0 : x.numel() / n;
  Tensor out = empty(xc.shape(), x.dtype(), x.device());
  Tensor mean = empty({rows}, x.dtype(), x.device()), rstd = empty({rows}, x.dtype(), x.device());
  Backend& be = backend(x.device());
  be.layernorm_forward(xc, w, b, eps, out, mean, rstd);
  return autograd::record(
      "layer_norm", order.back(out), {x, weight, bias},
      [xc, w, b, mean, rstd, order, gw = wants_grad(weight), gb = wants_grad(bias), &be, eps](const Tensor& g) {
        if (autograd::grad_enabled())  // create_graph
          return norm_grads(g, live(xc, order, 0), live(w, {}, 1), live(b, {}, 2), eps, true, gw, gb);
        const Tensor gr = order.rows(g);
        Tensor dx = grad_target(gr, xc), dw = gw ? empty_like(w) : Tensor();
        Tensor db = gb ? empty_like(b) : Tensor();
        be.layernorm_backward(gr.contiguous(), xc, w, mean, rstd, dx, dw, db);
        return std::vector<Tensor>{order.back(dx), dw, db};
      });
}

Tensor rms_norm(const Tensor& x, const Tensor& weight, double eps) {
  check_norm_inputs("rms_norm", x, weight, Tensor(), eps);
  const RowOrder order = row_order(x);
  Tensor xc = kernel_input(order.rows(x)), w = kernel_input(weight);
  const int64_t n = x.shape().back(), rows = n == 0 ? 0 : x.numel() / n;
  Tensor out = empty(xc.shape(), x.dtype(), x.device());
  Tensor rstd = empty({rows}, x.dtype(), x.device());
  Backend& be = backend(x.device());
  be.rmsnorm_forward(xc, w, eps, out, rstd);
  return autograd::record("rms_norm", order.back(out), {x, weight},
                          [xc, w, rstd, order, gw = wants_grad(weight), &be, eps](const Tensor& g) {
                            if (autograd::grad_enabled()) {  // create_graph
                              std::vector<Tensor> d = norm_grads(g, live(xc, order, 0), live(w, {}, 1), Tensor(),
                                                                 eps, false, gw, false);
                              return std::vector<Tensor>{d[0], d[1]};
                            }
                            const Tensor gr = order.rows(g);
                            Tensor dx = grad_target(gr, xc), dw = gw ? empty_like(w) : Tensor();
                            be.rmsnorm_backward(gr.contiguous(), xc, w, rstd, dx, dw);
                            return std::vector<Tensor>{order.back(dx), dw};
                          });
}

}  // namespace linea
