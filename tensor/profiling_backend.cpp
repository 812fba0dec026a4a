// The backend that backend(device) hands out while the profiler records (profiler.h): each
// kernel call is passed on to the device's real backend, timed, and recorded with its cost —
// FLOPs for the matrix products and attention, bytes read + written for everything else.
#include "linea/tensor/profiling_backend.h"

#include <array>
#include <chrono>

#include <fmt/format.h>

#include "linea/tensor/profiler.h"

namespace linea {

namespace {

// Bytes a kernel touches in t: a broadcast (stride-0) dim is read once, not once per use.
double touched(const Tensor& t) {
  if (!t.defined()) return 0;
  double n = double(itemsize(t.dtype()));
  for (int64_t d = 0; d < t.dim(); ++d)
    if (t.strides()[d] != 0) n *= double(t.shape()[d]);
  return n;
}

double touched(std::initializer_list<const Tensor*> ts) {
  double n = 0;
  for (const Tensor* t : ts) n += touched(*t);
  return n;
}

// "unary.<name>" / "binary.<name>", from the op tables (tensor/ops.h): no list of names here.
const char* unary_name(UnaryOp op) {
  switch (op) {
#define LINEA_CASE(Name, str, ...) \
  case UnaryOp::Name: return "unary." str;
    LINEA_UNARY_OPS(LINEA_CASE)
#undef LINEA_CASE
  }
  return "unary.?";  // not reached
}

const char* binary_name(BinaryOp op) {
  switch (op) {
#define LINEA_CASE(Name, str, ...) \
  case BinaryOp::Name: return "binary." str;
    LINEA_BINARY_OPS(LINEA_CASE)
#undef LINEA_CASE
  }
  return "binary.?";  // not reached
}

const char* reduce_name(ReduceOp op) {
  static constexpr const char* names[] = {"reduce.sum", "reduce.max", "reduce.min", "reduce.argmax",
                                          "reduce.logsumexp"};
  return names[static_cast<int>(op)];
}

// "gemm B x [M x K]·[K x N]", ^T on an operand stored transposed (its rows strided, not its columns).
std::string gemm_shape(const Tensor& a, const Tensor& b) {
  auto t = [](const Tensor& x) { return x.strides()[2] == 1 ? "" : "^T"; };
  return fmt::format("gemm {}x[{}x{}]{}·[{}x{}]{}", a.size(0), a.size(1), a.size(2), t(a), b.size(1), b.size(2), t(b));
}

// Times f() and records it under op.
template <class F>
void timed(std::string_view op, double flops, double bytes, F&& f) {
  const auto t = std::chrono::steady_clock::now();
  f();
  Profiler::record(op, std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count(), flops, bytes);
}

class ProfilingBackend final : public Backend {
 public:
  explicit ProfilingBackend(Backend& inner) : in_(inner) {}

  std::shared_ptr<Storage> allocate(std::size_t nbytes) override {
    std::shared_ptr<Storage> s;
    timed("allocate", 0, 0, [&] { s = in_.allocate(nbytes); });
    return s;
  }
  void copy_from_host(Storage& dst, std::size_t off, const void* src, std::size_t n) override {
    timed("copy_from_host", 0, 2.0 * double(n), [&] { in_.copy_from_host(dst, off, src, n); });
  }
  void copy_to_host(void* dst, const Storage& src, std::size_t off, std::size_t n) override {
    timed("copy_to_host", 0, 2.0 * double(n), [&] { in_.copy_to_host(dst, src, off, n); });
  }

  void copy(const Tensor& src, const Tensor& dst) override {
    timed(src.dtype() == dst.dtype() ? "copy" : "copy.cast", 0, touched({&src, &dst}), [&] { in_.copy(src, dst); });
  }
  void fill(const Tensor& dst, double v) override {
    timed("fill", 0, touched(dst), [&] { in_.fill(dst, v); });
  }
  void unary(UnaryOp op, const Tensor& x, const Tensor& out, double p0, double p1) override {
    timed(unary_name(op), 0, touched({&x, &out}), [&] { in_.unary(op, x, out, p0, p1); });
  }
  void binary(BinaryOp op, const Tensor& a, const Tensor& b, const Tensor& out) override {
    timed(binary_name(op), 0, touched({&a, &b, &out}), [&] { in_.binary(op, a, b, out); });
  }
  void activation_with_grad(UnaryOp op, const Tensor& x, const Tensor& y, const Tensor& dydx) override {
    timed(std::string(unary_name(op)) + " + grad", 0, touched({&x, &y, &dydx}),
          [&] { in_.activation_with_grad(op, x, y, dydx); });
  }
  void where(const Tensor& c, const Tensor& a, const Tensor& b, const Tensor& out) override {
    timed("where", 0, touched({&c, &a, &b, &out}), [&] { in_.where(c, a, b, out); });
  }

  void reduce(ReduceOp op, const Tensor& x, const Tensor& out, int64_t outer, int64_t n, int64_t inner) override {
    timed(reduce_name(op), 0, touched({&x, &out}), [&] { in_.reduce(op, x, out, outer, n, inner); });
  }
  void softmax(const Tensor& x, const Tensor& out, bool log) override {
    timed(log ? "log_softmax" : "softmax", 0, touched({&x, &out}), [&] { in_.softmax(x, out, log); });
  }
  void softmax_backward(const Tensor& y, const Tensor& dy, const Tensor& dx, bool log) override {
    timed(log ? "log_softmax_backward" : "softmax_backward", 0, touched({&y, &dy, &dx}),
          [&] { in_.softmax_backward(y, dy, dx, log); });
  }

  void layernorm_forward(const Tensor& x, const Tensor& w, const Tensor& b, double eps, const Tensor& out,
                         const Tensor& mean, const Tensor& rstd) override {
    timed("layernorm_forward", 0, touched({&x, &w, &b, &out, &mean, &rstd}),
          [&] { in_.layernorm_forward(x, w, b, eps, out, mean, rstd); });
  }
  void layernorm_backward(const Tensor& dy, const Tensor& x, const Tensor& w, const Tensor& mean, const Tensor& rstd,
                          const Tensor& dx, const Tensor& dw, const Tensor& db) override {
    timed("layernorm_backward", 0, touched({&dy, &x, &w, &mean, &rstd, &dx, &dw, &db}),
          [&] { in_.layernorm_backward(dy, x, w, mean, rstd, dx, dw, db); });
  }
  void rmsnorm_forward(const Tensor& x, const Tensor& w, double eps, const Tensor& out, const Tensor& rstd) override {
    timed("rmsnorm_forward", 0, touched({&x, &w, &out, &rstd}), [&] { in_.rmsnorm_forward(x, w, eps, out, rstd); });
  }
  void rmsnorm_backward(const Tensor& dy, const Tensor& x, const Tensor& w, const Tensor& rstd, const Tensor& dx,
                        const Tensor& dw) override {
    timed("rmsnorm_backward", 0, touched({&dy, &x, &w, &rstd, &dx, &dw}),
          [&] { in_.rmsnorm_backward(dy, x, w, rstd, dx, dw); });
  }

  void gemm(const Tensor& a, const Tensor& b, const Tensor& out, const Tensor& bias,
            const Tensor& residual) override {
    const double flops = 2.0 * double(out.size(0)) * double(out.size(1)) * double(out.size(2)) * double(a.size(2));
    const bool r = residual.defined();
    const std::string name = Profiler::by_shape() ? gemm_shape(a, b) + (r ? " + residual" : "") : "gemm";
    timed(name, flops, touched({&a, &b, &out, &bias}) + (r ? touched(residual) : 0.0),
          [&] { in_.gemm(a, b, out, bias, residual); });
  }

  // Recorded as a gemm (its flops), with the bias gradient's sums in the same row when asked for.
  void linear_weight_grad(const Tensor& g, const Tensor& x, const Tensor& dw, const Tensor& db) override {
    const double flops = 2.0 * double(g.numel()) * double(x.size(-1));
    const std::string name = Profiler::by_shape() ? gemm_shape(g.t().unsqueeze(0), x.unsqueeze(0)) +
                                                        (db.defined() ? " + column sums" : "")
                                                  : std::string("gemm");
    timed(name, flops, touched({&g, &x, &dw, &db}), [&] { in_.linear_weight_grad(g, x, dw, db); });
  }

  void index_select(const Tensor& x, int64_t dim, const Tensor& idx, const Tensor& out) override {
    timed("index_select", 0, touched({&idx, &out}) * 2, [&] { in_.index_select(x, dim, idx, out); });
  }
  void index_add(const Tensor& out, int64_t dim, const Tensor& idx, const Tensor& src) override {
    timed("index_add", 0, touched({&idx, &src}) * 2, [&] { in_.index_add(out, dim, idx, src); });
  }
  void gather(const Tensor& x, int64_t dim, const Tensor& idx, const Tensor& out) override {
    timed("gather", 0, touched({&idx, &out}) * 2, [&] { in_.gather(x, dim, idx, out); });
  }
  void scatter_add(const Tensor& out, int64_t dim, const Tensor& idx, const Tensor& src) override {
    timed("scatter_add", 0, touched({&idx, &src}) * 2, [&] { in_.scatter_add(out, dim, idx, src); });
  }

  void cross_entropy_forward(const Tensor& x, const Tensor& t, int64_t ignore, double ls, const Tensor& lse,
                             const Tensor& loss, const Tensor& total) override {
    timed("cross_entropy_forward", 0, touched({&x, &t, &lse, &loss}),
          [&] { in_.cross_entropy_forward(x, t, ignore, ls, lse, loss, total); });
  }
  void cross_entropy_backward(const Tensor& x, const Tensor& t, const Tensor& lse, const Tensor& w, int64_t ignore,
                              double ls, const Tensor& dx) override {
    timed("cross_entropy_backward", 0, touched({&x, &t, &lse, &dx}),
          [&] { in_.cross_entropy_backward(x, t, lse, w, ignore, ls, dx); });
  }
  void adamw_step(const std::vector<AdamWParam>& params, double b1, double b2, double eps) override {
    double bytes = 0;  // reads p, g, m, v and writes p, m, v
    for (const AdamWParam& p : params) bytes += 7 * touched(p.param);
    timed("adamw_step", 0, bytes, [&] { in_.adamw_step(params, b1, b2, eps); });
  }
  void sgd_step(const std::vector<SgdParam>& params, double momentum, bool nesterov) override {
    double bytes = 0;
    for (const SgdParam& p : params) bytes += touched({&p.param, &p.grad, &p.momentum_buffer}) * 2;
    timed("sgd_step", 0, bytes, [&] { in_.sgd_step(params, momentum, nesterov); });
  }
  void sum_squares(const std::vector<Tensor>& xs, const Tensor& out) override {
    double bytes = 0;
    for (const Tensor& x : xs) bytes += touched(x);
    timed("sum_squares", 0, bytes, [&] { in_.sum_squares(xs, out); });
  }
  void scale_all(const std::vector<Tensor>& xs, double factor) override {
    double bytes = 0;  // reads and writes each
    for (const Tensor& x : xs) bytes += 2 * touched(x);
    timed("scale_all", 0, bytes, [&] { in_.scale_all(xs, factor); });
  }
  void random_uniform(const Tensor& out, uint64_t seed, uint64_t offset) override {
    timed("random_uniform", 0, touched(out), [&] { in_.random_uniform(out, seed, offset); });
  }
  void cumsum(const Tensor& x, const Tensor& out, int64_t outer, int64_t n, int64_t inner, bool exclusive,
              bool reverse) override {
    timed("cumsum", 0, touched({&x, &out}), [&] { in_.cumsum(x, out, outer, n, inner, exclusive, reverse); });
  }

  bool has_fused_mhla(bool causal) const override { return in_.has_fused_mhla(causal); }
  bool has_fused_causal_normaliser() const override { return in_.has_fused_causal_normaliser(); }
  void mhla_forward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& mix, const MHLAArgs& a,
                    const Tensor& out, const Tensor& s, const Tensor& sh, const Tensor& r) override {
    timed("mhla_forward", 0, touched({&q, &k, &v, &out, &s, &sh}),
          [&] { in_.mhla_forward(q, k, v, mix, a, out, s, sh, r); });
  }
  void mhla_backward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& mix, const MHLAArgs& a,
                     const Tensor& out, const Tensor& s, const Tensor& sh, const Tensor& r, const Tensor& grad,
                     const Tensor& dq, const Tensor& dk, const Tensor& dv, const Tensor& dmix) override {
    timed("mhla_backward", 0, touched({&q, &k, &v, &grad, &dq, &dk, &dv, &s, &sh}),
          [&] { in_.mhla_backward(q, k, v, mix, a, out, s, sh, r, grad, dq, dk, dv, dmix); });
  }

  // FLOPs of exact attention over [BH, N, d] problems: S = q kᵀ and P v forward; the backward
  // recomputes S, then dP = dout vᵀ, dv = Pᵀ dout, dq = dS k, dk = dSᵀ q. Causal: about half.
  static double attention_flops(const Tensor& q, const Tensor& v, bool causal, double d_terms, double dv_terms) {
    const double bh = double(q.size(0) * q.size(1)), n = double(q.size(2)), d = double(q.size(3)),
                 dv = double(v.size(3));
    return 2.0 * bh * n * n * (d_terms * d + dv_terms * dv) * (causal ? 0.5 : 1.0);
  }
  int64_t attention_probs_size(int64_t N, DType dtype) const override { return in_.attention_probs_size(N, dtype); }
  void attention_forward(const Tensor& q, const Tensor& k, const Tensor& v, double scale, bool causal,
                         const Tensor& out, const Tensor& lse, const Tensor& probs) override {
    timed("attention_forward", attention_flops(q, v, causal, 1, 1), touched({&q, &k, &v, &out, &lse, &probs}),
          [&] { in_.attention_forward(q, k, v, scale, causal, out, lse, probs); });
  }
  // With saved probabilities the backward skips recomputing S = q kᵀ: one product of d fewer.
  void attention_backward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out, const Tensor& lse,
                          const Tensor& probs, const Tensor& dout, double scale, bool causal, const Tensor& dq,
                          const Tensor& dk, const Tensor& dv) override {
    timed("attention_backward", attention_flops(q, v, causal, probs.defined() ? 2 : 3, 2),
          touched({&q, &k, &v, &out, &lse, &probs, &dout, &dq, &dk, &dv}),
          [&] { in_.attention_backward(q, k, v, out, lse, probs, dout, scale, causal, dq, dk, dv); });
  }

 private:
  Backend& in_;
};

}  // namespace

Backend& profiling_backend(Backend& inner, Device device) {
  // One wrapper per device type, made on first use and kept (backends live as long as the process).
  static std::array<std::unique_ptr<ProfilingBackend>, 2> wrappers;
  auto& w = wrappers[static_cast<int>(device.type)];
  if (!w) w = std::make_unique<ProfilingBackend>(inner);
  return *w;
}

}  // namespace linea
