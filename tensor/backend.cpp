// The kernel interface's shared half (backend.h): the registry of device backends, and each
// kernel's public method, which checks its arguments once for every device, times the call while
// linea::Profiler records and calls the device's do_ kernel. Each profile row is recorded with
// its cost: FLOPs for the matrix products and attention, bytes read + written for the rest.
#include "linea/tensor/backend.h"

#include <array>
#include <chrono>
#include <string>

#include <fmt/format.h>

#include "linea/tensor/error.h"
#include "linea/tensor/fused_checks.h"
#include "linea/tensor/kernel_checks.h"
#include "linea/tensor/profiler.h"

namespace linea {

namespace {
// A function-local static: built on first use, so a registration from another file's static
// initializer finds it constructed, whatever the order of initialisation.
std::array<BackendProvider, 2>& providers() {
  static std::array<BackendProvider, 2> p{};
  return p;
}
}  // namespace

void register_backend(DeviceType type, BackendProvider provider) { providers()[static_cast<int>(type)] = provider; }

Backend& backend(Device device) {
  if (device.is_cpu()) return cpu::instance();
  LINEA_CHECK(device.index == 0, "[backend] only one GPU (cuda:0) is supported, got {}", device);
  const BackendProvider provider = providers()[static_cast<int>(device.type)];
  Backend* b = provider != nullptr ? provider() : nullptr;
  LINEA_CHECK(b != nullptr, "[backend] no backend for device {}: {}", device,
              device.is_cuda() ? "this build or machine has no CUDA support (see linea::cuda::is_available())"
                               : "no backend registered for this device type");
  return *b;
}

namespace {

// ---- the profile rows ----

// Times one kernel call while the profiler records; otherwise costs one predictable branch.
// record() is called after the kernel returned, so a kernel that throws leaves no row.
class KernelTimer {
 public:
  KernelTimer() : on_(Profiler::active()) {
    if (on_) [[unlikely]] start_ = std::chrono::steady_clock::now();
  }
  explicit operator bool() const { return on_; }
  void record(std::string_view op, double flops, double bytes) const {
    const std::chrono::duration<double> t = std::chrono::steady_clock::now() - start_;
    Profiler::record(op, t.count(), flops, bytes);
  }

 private:
  bool on_;
  std::chrono::steady_clock::time_point start_;
};

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

}  // namespace

// ======== primitives ========

std::shared_ptr<Storage> Backend::allocate(std::size_t nbytes) {
  const KernelTimer timer;
  std::shared_ptr<Storage> s = do_allocate(nbytes);
  if (timer) timer.record("allocate", 0, 0);
  return s;
}

void Backend::copy_from_host(Storage& dst, std::size_t off, const void* src, std::size_t nbytes) {
  LINEA_CHECK(off + nbytes <= dst.nbytes, "[copy_from_host] {} bytes at offset {} overflow a {}-byte storage", nbytes,
              off, dst.nbytes);
  const KernelTimer timer;
  do_copy_from_host(dst, off, src, nbytes);
  if (timer) timer.record("copy_from_host", 0, 2.0 * double(nbytes));
}

void Backend::copy_to_host(void* dst, const Storage& src, std::size_t off, std::size_t nbytes) {
  LINEA_CHECK(off + nbytes <= src.nbytes, "[copy_to_host] {} bytes at offset {} overflow a {}-byte storage", nbytes,
              off, src.nbytes);
  const KernelTimer timer;
  do_copy_to_host(dst, src, off, nbytes);
  if (timer) timer.record("copy_to_host", 0, 2.0 * double(nbytes));
}

void Backend::copy(const Tensor& src, const Tensor& dst) {
  LINEA_CHECK(src.shape() == dst.shape(), "[copy] shape mismatch: src {} vs dst {}", shape_str(src.shape()),
              shape_str(dst.shape()));
  const KernelTimer timer;
  do_copy(src, dst);
  if (timer) timer.record(src.dtype() == dst.dtype() ? "copy" : "copy.cast", 0, touched({&src, &dst}));
}

void Backend::fill(const Tensor& dst, double value) {
  const KernelTimer timer;
  do_fill(dst, value);
  if (timer) timer.record("fill", 0, touched(dst));
}

void Backend::unary(UnaryOp op, const Tensor& x, const Tensor& out, double p0, double p1) {
  kernel_checks::unary(op, x, out);
  const KernelTimer timer;
  do_unary(op, x, out, p0, p1);
  if (timer) timer.record(unary_name(op), 0, touched({&x, &out}));
}

void Backend::binary(BinaryOp op, const Tensor& a, const Tensor& b, const Tensor& out) {
  kernel_checks::binary(op, a, b, out);
  const KernelTimer timer;
  do_binary(op, a, b, out);
  if (timer) timer.record(binary_name(op), 0, touched({&a, &b, &out}));
}

void Backend::where(const Tensor& cond, const Tensor& a, const Tensor& b, const Tensor& out) {
  kernel_checks::where(cond, a, b, out);
  const KernelTimer timer;
  do_where(cond, a, b, out);
  if (timer) timer.record("where", 0, touched({&cond, &a, &b, &out}));
}

void Backend::activation_with_grad(UnaryOp op, const Tensor& x, const Tensor& y, const Tensor& dydx) {
  kernel_checks::activation_with_grad(op, x, y, dydx);
  const KernelTimer timer;
  do_activation_with_grad(op, x, y, dydx);
  if (timer) timer.record(std::string(unary_name(op)) + " + grad", 0, touched({&x, &y, &dydx}));
}

void Backend::do_activation_with_grad(UnaryOp op, const Tensor& x, const Tensor& y, const Tensor& dydx) {
  do_unary(op, x, y, 0, 0);
  do_fill(dydx, 1.0);
  do_binary(activation_backward_op(op), dydx, x, dydx);  // elementwise, so dydx may be read as it is written
}

void Backend::random_uniform(const Tensor& out, uint64_t seed, uint64_t offset) {
  fused_checks::random_out(out);
  const KernelTimer timer;
  do_random_uniform(out, seed, offset);
  if (timer) timer.record("random_uniform", 0, touched(out));
}

void Backend::reduce(ReduceOp op, const Tensor& x, const Tensor& out, int64_t outer, int64_t n, int64_t inner) {
  const bool any = kernel_checks::reduce(op, x, out, outer, n, inner);
  const KernelTimer timer;
  if (any) do_reduce(op, x, out, outer, n, inner);
  if (timer) timer.record(reduce_name(op), 0, touched({&x, &out}));
}

void Backend::softmax(const Tensor& x, const Tensor& out, bool log) {
  kernel_checks::softmax(x, out);
  const KernelTimer timer;
  do_softmax(x, out, log);
  if (timer) timer.record(log ? "log_softmax" : "softmax", 0, touched({&x, &out}));
}

void Backend::softmax_backward(const Tensor& y, const Tensor& dy, const Tensor& dx, bool log) {
  kernel_checks::softmax_backward(y, dy, dx);
  const KernelTimer timer;
  do_softmax_backward(y, dy, dx, log);
  if (timer) timer.record(log ? "log_softmax_backward" : "softmax_backward", 0, touched({&y, &dy, &dx}));
}

void Backend::cumsum(const Tensor& x, const Tensor& out, int64_t outer, int64_t n, int64_t inner, bool exclusive,
                     bool reverse) {
  fused_checks::cumsum(x, out, outer, n, inner);
  const KernelTimer timer;
  do_cumsum(x, out, outer, n, inner, exclusive, reverse);
  if (timer) timer.record("cumsum", 0, touched({&x, &out}));
}

void Backend::index_select(const Tensor& x, int64_t dim, const Tensor& idx, const Tensor& out) {
  kernel_checks::index_select(x, dim, idx, out);
  const KernelTimer timer;
  do_index_select(x, dim, idx, out);
  if (timer) timer.record("index_select", 0, touched({&idx, &out}) * 2);
}

void Backend::index_add(const Tensor& out, int64_t dim, const Tensor& idx, const Tensor& src) {
  kernel_checks::index_add(out, dim, idx, src);
  const KernelTimer timer;
  do_index_add(out, dim, idx, src);
  if (timer) timer.record("index_add", 0, touched({&idx, &src}) * 2);
}

void Backend::gather(const Tensor& x, int64_t dim, const Tensor& idx, const Tensor& out) {
  kernel_checks::gather(x, dim, idx, out);
  const KernelTimer timer;
  do_gather(x, dim, idx, out);
  if (timer) timer.record("gather", 0, touched({&idx, &out}) * 2);
}

void Backend::scatter_add(const Tensor& out, int64_t dim, const Tensor& idx, const Tensor& src) {
  kernel_checks::scatter_add(out, dim, idx, src);
  const KernelTimer timer;
  do_scatter_add(out, dim, idx, src);
  if (timer) timer.record("scatter_add", 0, touched({&idx, &src}) * 2);
}

void Backend::gemm(const Tensor& a, const Tensor& b, const Tensor& out, const Tensor& bias, const Tensor& residual) {
  kernel_checks::gemm(a, b, out, bias, residual);
  const KernelTimer timer;
  do_gemm(a, b, out, bias, residual);
  if (!timer) return;
  const double flops = 2.0 * double(out.size(0)) * double(out.size(1)) * double(out.size(2)) * double(a.size(2));
  const bool r = residual.defined();
  const std::string name = Profiler::by_shape() ? gemm_shape(a, b) + (r ? " + residual" : "") : "gemm";
  timer.record(name, flops, touched({&a, &b, &out, &bias}) + (r ? touched(residual) : 0.0));
}

// Recorded as a gemm (its flops), with the bias gradient's sums in the same row when asked for.
void Backend::linear_weight_grad(const Tensor& g, const Tensor& x, const Tensor& dw, const Tensor& db) {
  kernel_checks::linear_weight_grad(g, x, dw, db);
  const KernelTimer timer;
  do_linear_weight_grad(g, x, dw, db);
  if (!timer) return;
  const double flops = 2.0 * double(g.numel()) * double(x.size(-1));
  const std::string name = Profiler::by_shape() ? gemm_shape(g.t().unsqueeze(0), x.unsqueeze(0)) +
                                                      (db.defined() ? " + column sums" : "")
                                                : std::string("gemm");
  timer.record(name, flops, touched({&g, &x, &dw, &db}));
}

void Backend::do_linear_weight_grad(const Tensor& g, const Tensor& x, const Tensor& dw, const Tensor& db) {
  do_gemm(g.t().unsqueeze(0), x.unsqueeze(0), dw.unsqueeze(0), Tensor(), Tensor());
  if (db.defined() && db.numel() > 0) do_reduce(ReduceOp::Sum, g, db, 1, g.size(0), g.size(1));
}

// ======== fused nn kernels ========

void Backend::layernorm_forward(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps,
                                const Tensor& out, const Tensor& mean, const Tensor& rstd) {
  kernel_checks::layernorm_forward(x, weight, bias, out, mean, rstd);
  const KernelTimer timer;
  do_layernorm_forward(x, weight, bias, eps, out, mean, rstd);
  if (timer) timer.record("layernorm_forward", 0, touched({&x, &weight, &bias, &out, &mean, &rstd}));
}

void Backend::layernorm_backward(const Tensor& dy, const Tensor& x, const Tensor& weight, const Tensor& mean,
                                 const Tensor& rstd, const Tensor& dx, const Tensor& dweight, const Tensor& dbias) {
  kernel_checks::layernorm_backward(dy, x, weight, mean, rstd, dx, dweight, dbias);
  const KernelTimer timer;
  do_layernorm_backward(dy, x, weight, mean, rstd, dx, dweight, dbias);
  if (timer)
    timer.record("layernorm_backward", 0, touched({&dy, &x, &weight, &mean, &rstd, &dx, &dweight, &dbias}));
}

void Backend::rmsnorm_forward(const Tensor& x, const Tensor& weight, double eps, const Tensor& out,
                              const Tensor& rstd) {
  kernel_checks::rmsnorm_forward(x, weight, out, rstd);
  const KernelTimer timer;
  do_rmsnorm_forward(x, weight, eps, out, rstd);
  if (timer) timer.record("rmsnorm_forward", 0, touched({&x, &weight, &out, &rstd}));
}

void Backend::rmsnorm_backward(const Tensor& dy, const Tensor& x, const Tensor& weight, const Tensor& rstd,
                               const Tensor& dx, const Tensor& dweight) {
  kernel_checks::rmsnorm_backward(dy, x, weight, rstd, dx, dweight);
  const KernelTimer timer;
  do_rmsnorm_backward(dy, x, weight, rstd, dx, dweight);
  if (timer) timer.record("rmsnorm_backward", 0, touched({&dy, &x, &weight, &rstd, &dx, &dweight}));
}

void Backend::cross_entropy_forward(const Tensor& x, const Tensor& target, int64_t ignore_index,
                                    double label_smoothing, const Tensor& lse, const Tensor& loss,
                                    const Tensor& total) {
  fused_checks::cross_entropy_forward(x, target, lse, loss, total);
  const KernelTimer timer;
  do_cross_entropy_forward(x, target, ignore_index, label_smoothing, lse, loss, total);
  if (timer) timer.record("cross_entropy_forward", 0, touched({&x, &target, &lse, &loss}));
}

void Backend::cross_entropy_backward(const Tensor& x, const Tensor& target, const Tensor& lse, const Tensor& weight,
                                     int64_t ignore_index, double label_smoothing, const Tensor& dx) {
  fused_checks::cross_entropy_backward(x, target, lse, weight, dx);
  const KernelTimer timer;
  do_cross_entropy_backward(x, target, lse, weight, ignore_index, label_smoothing, dx);
  if (timer) timer.record("cross_entropy_backward", 0, touched({&x, &target, &lse, &dx}));
}

void Backend::adamw_step(const std::vector<AdamWParam>& params, double beta1, double beta2, double eps) {
  for (const AdamWParam& a : params) fused_checks::adamw(a, device_type());  // throws before anything moves
  const KernelTimer timer;
  do_adamw_step(params, beta1, beta2, eps);
  if (!timer) return;
  double bytes = 0;  // reads p, g, m, v and writes p, m, v
  for (const AdamWParam& p : params) bytes += 7 * touched(p.param);
  timer.record("adamw_step", 0, bytes);
}

void Backend::sgd_step(const std::vector<SgdParam>& params, double momentum, bool nesterov) {
  for (const SgdParam& s : params) fused_checks::sgd(s, device_type());
  const KernelTimer timer;
  do_sgd_step(params, momentum, nesterov);
  if (!timer) return;
  double bytes = 0;
  for (const SgdParam& p : params) bytes += touched({&p.param, &p.grad, &p.momentum_buffer}) * 2;
  timer.record("sgd_step", 0, bytes);
}

void Backend::sum_squares(const std::vector<Tensor>& xs, const Tensor& out) {
  fused_checks::sum_squares(xs, out);
  const KernelTimer timer;
  do_sum_squares(xs, out);
  if (!timer) return;
  double bytes = 0;
  for (const Tensor& x : xs) bytes += touched(x);
  timer.record("sum_squares", 0, bytes);
}

void Backend::scale_all(const std::vector<Tensor>& xs, double factor) {
  fused_checks::scale_all(xs, device_type());
  const KernelTimer timer;
  do_scale_all(xs, factor);
  if (!timer) return;
  double bytes = 0;  // reads and writes each
  for (const Tensor& x : xs) bytes += 2 * touched(x);
  timer.record("scale_all", 0, bytes);
}

namespace {
// FLOPs of exact attention over [BH, N, d] problems: S = q kᵀ and P v forward; the backward
// recomputes S, then dP = dout vᵀ, dv = Pᵀ dout, dq = dS k, dk = dSᵀ q. Causal: about half.
double attention_flops(const Tensor& q, const Tensor& v, bool causal, double d_terms, double dv_terms) {
  const double bh = double(q.size(0) * q.size(1)), n = double(q.size(2)), d = double(q.size(3)),
               dv = double(v.size(3));
  return 2.0 * bh * n * n * (d_terms * d + dv_terms * dv) * (causal ? 0.5 : 1.0);
}
}  // namespace

void Backend::attention_forward(const Tensor& q, const Tensor& k, const Tensor& v, double scale, bool causal,
                                const Tensor& out, const Tensor& lse, const Tensor& probs) {
  kernel_checks::attention("attention_forward", q, k, v, lse, {}, {&v, &out});
  kernel_checks::attention_probs("attention_forward", q, probs, attention_probs_size(q.size(2), q.dtype()), false);
  const KernelTimer timer;
  do_attention_forward(q, k, v, scale, causal, out, lse, probs);
  if (timer)
    timer.record("attention_forward", attention_flops(q, v, causal, 1, 1), touched({&q, &k, &v, &out, &lse, &probs}));
}

// With saved probabilities the backward skips recomputing S = q kᵀ: one product of d fewer.
void Backend::attention_backward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out,
                                 const Tensor& lse, const Tensor& probs, const Tensor& dout, double scale, bool causal,
                                 const Tensor& dq, const Tensor& dk, const Tensor& dv) {
  kernel_checks::attention("attention_backward", q, k, v, lse, {&dq, &dk}, {&v, &out, &dout, &dv});
  kernel_checks::attention_probs("attention_backward", q, probs, attention_probs_size(q.size(2), q.dtype()), true);
  const KernelTimer timer;
  do_attention_backward(q, k, v, out, lse, probs, dout, scale, causal, dq, dk, dv);
  if (timer)
    timer.record("attention_backward", attention_flops(q, v, causal, probs.defined() ? 2 : 3, 2),
                 touched({&q, &k, &v, &out, &lse, &probs, &dout, &dq, &dk, &dv}));
}

void Backend::mhla_forward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& mix, const MHLAArgs& a,
                           const Tensor& out, const Tensor& s, const Tensor& sh, const Tensor& r) {
  const MHLADims g = fused_checks::mhla_saved("mhla_forward", q, k, v, mix, a, s, sh, r);
  fused_checks::mhla_rows("mhla_forward", "out", out, g, g.dv, q.dtype());
  const KernelTimer timer;
  do_mhla_forward(q, k, v, mix, a, out, s, sh, r);
  if (timer) timer.record("mhla_forward", 0, touched({&q, &k, &v, &out, &s, &sh}));
}

void Backend::mhla_backward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& mix, const MHLAArgs& a,
                            const Tensor& out, const Tensor& s, const Tensor& sh, const Tensor& r, const Tensor& grad,
                            const Tensor& dq, const Tensor& dk, const Tensor& dv, const Tensor& dmix) {
  const char* op = "mhla_backward";
  const MHLADims g = fused_checks::mhla_saved(op, q, k, v, mix, a, s, sh, r);
  fused_checks::mhla_rows(op, "out", out, g, g.dv, q.dtype());
  fused_checks::mhla_rows(op, "grad", grad, g, g.dv, q.dtype());
  fused_checks::mhla_rows(op, "dq", dq, g, g.d, q.dtype());
  fused_checks::mhla_rows(op, "dk", dk, g, g.d, q.dtype());
  fused_checks::mhla_rows(op, "dv", dv, g, g.dv, q.dtype());
  LINEA_CHECK(dmix.numel() == mix.numel() && dmix.is_contiguous() && dmix.dtype() == q.dtype(),
              "[mhla_backward] dmix must be a contiguous {} tensor shaped like mix {}, got {} {}", q.dtype(),
              shape_str(mix.shape()), dmix.dtype(), shape_str(dmix.shape()));
  const KernelTimer timer;
  do_mhla_backward(q, k, v, mix, a, out, s, sh, r, grad, dq, dk, dv, dmix);
  if (timer) timer.record("mhla_backward", 0, touched({&q, &k, &v, &grad, &dq, &dk, &dv, &s, &sh}));
}

}  // namespace linea
