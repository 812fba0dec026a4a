// Argument checks of the fused kernels for nn/ (backend.h: losses, optimizer steps, random
// numbers, cumsum, MHLA), run once by each Backend method (backend.cpp) before the device's
// kernel, so every device rejects the same inputs with the same message.
#pragma once
#include <cstdint>
#include <utility>

#include "linea/tensor/backend.h"

#include "linea/tensor/error.h"

namespace linea::fused_checks {

// x [rows, C] contiguous floating and target [rows] contiguous int64; returns (rows, C).
inline std::pair<int64_t, int64_t> rows_of(const char* op, const Tensor& x, const Tensor& target) {
  LINEA_CHECK(x.dim() == 2 && x.is_contiguous() && is_floating(x.dtype()),
              "[{}] x must be a contiguous floating [rows, C] tensor, got {} {}", op, x.dtype(),
              shape_str(x.shape()));
  LINEA_CHECK(target.dtype() == DType::Int64 && target.is_contiguous() && target.shape() == Shape{x.size(0)},
              "[{}] target must be contiguous int64 [{}], got {} {}", op, x.size(0), target.dtype(),
              shape_str(target.shape()));
  return {x.size(0), x.size(1)};
}

// t is float64 [rows] (contiguous when asked; else any stride, e.g. a stride-0 broadcast).
inline void f64_rows(const char* op, const char* what, const Tensor& t, int64_t rows, bool contiguous) {
  LINEA_CHECK(t.dtype() == DType::Float64 && t.shape() == Shape{rows} && (!contiguous || t.is_contiguous()),
              "[{}] {} must be float64 [{}]{}, got {} {}", op, what, rows, contiguous ? " contiguous" : "",
              t.dtype(), shape_str(t.shape()));
}

inline void cross_entropy_forward(const Tensor& x, const Tensor& target, const Tensor& lse, const Tensor& loss,
                                  const Tensor& total) {
  const auto rc = rows_of("cross_entropy_forward", x, target);
  f64_rows("cross_entropy_forward", "lse", lse, rc.first, true);
  f64_rows("cross_entropy_forward", "loss", loss, rc.first, true);
  LINEA_CHECK(!total.defined() || (total.dim() == 0 && total.dtype() == DType::Float64),
              "[cross_entropy_forward] total must be 0-d float64, got {} {}", total.dtype(),
              shape_str(total.shape()));
}

inline void cross_entropy_backward(const Tensor& x, const Tensor& target, const Tensor& lse, const Tensor& weight,
                                   const Tensor& dx) {
  const auto rc = rows_of("cross_entropy_backward", x, target);
  f64_rows("cross_entropy_backward", "lse", lse, rc.first, true);
  f64_rows("cross_entropy_backward", "weight", weight, rc.first, false);
  LINEA_CHECK(dx.is_contiguous() && dx.shape() == x.shape() && dx.dtype() == x.dtype(),
              "[cross_entropy_backward] dx must be contiguous {} {}, got {} {}", x.dtype(), shape_str(x.shape()),
              dx.dtype(), shape_str(dx.shape()));
}

// An optimizer's parameter: contiguous floating, on the backend's device type.
inline void param(const char* op, const Tensor& p, DeviceType device) {
  LINEA_CHECK(p.is_contiguous() && is_floating(p.dtype()) && p.device().type == device,
              "[{}] parameters must be contiguous float32/float64 tensors on this backend's device, got {} {} on {}",
              op, p.dtype(), shape_str(p.shape()), p.device());
}

// A parameter's gradient or state buffer: contiguous, and shaped, typed and placed like p.
inline void like_param(const char* op, const char* what, const Tensor& t, const Tensor& p) {
  LINEA_CHECK(t.is_contiguous() && t.shape() == p.shape() && t.dtype() == p.dtype() && t.device() == p.device(),
              "[{}] {} must be a contiguous {} {} on {} like its parameter, got {} {} on {}", op, what, p.dtype(),
              shape_str(p.shape()), p.device(), t.dtype(), shape_str(t.shape()), t.device());
}

inline void adamw(const Backend::AdamWParam& a, DeviceType device) {
  param("adamw_step", a.param, device);
  like_param("adamw_step", "grad", a.grad, a.param);
  like_param("adamw_step", "exp_avg", a.exp_avg, a.param);
  like_param("adamw_step", "exp_avg_sq", a.exp_avg_sq, a.param);
}

inline void sgd(const Backend::SgdParam& s, DeviceType device) {
  param("sgd_step", s.param, device);
  like_param("sgd_step", "grad", s.grad, s.param);
  if (s.momentum_buffer.defined()) like_param("sgd_step", "momentum_buffer", s.momentum_buffer, s.param);
}

inline void sum_squares(const std::vector<Tensor>& xs, const Tensor& out) {
  LINEA_CHECK(out.is_contiguous() && out.dtype() == DType::Float64 && out.shape() == Shape({int64_t(xs.size())}),
              "[sum_squares] needs a contiguous float64 out [{}] (one sum per tensor), got {} {}", xs.size(),
              out.dtype(), shape_str(out.shape()));
  for (size_t t = 0; t < xs.size(); ++t)
    LINEA_CHECK(xs[t].is_contiguous() && is_floating(xs[t].dtype()) && xs[t].device() == out.device(),
                "[sum_squares] tensor {} must be contiguous and floating on out's device ({}), got {} {} on {}{}", t,
                out.device(), xs[t].dtype(), shape_str(xs[t].shape()), xs[t].device(),
                xs[t].is_contiguous() ? "" : " (not contiguous)");
}

inline void scale_all(const std::vector<Tensor>& xs, DeviceType device) {
  for (size_t t = 0; t < xs.size(); ++t)
    LINEA_CHECK(xs[t].is_contiguous() && is_floating(xs[t].dtype()) && xs[t].device().type == device &&
                    xs[t].device() == xs[0].device(),
                "[scale_all] tensor {} must be contiguous and floating, on this backend's device like tensor 0 "
                "({}), got {} {} on {}{}",
                t, xs[0].device(), xs[t].dtype(), shape_str(xs[t].shape()), xs[t].device(),
                xs[t].is_contiguous() ? "" : " (not contiguous)");
}

inline void random_out(const Tensor& out) {
  LINEA_CHECK(out.is_contiguous() && is_floating(out.dtype()),
              "[random_uniform] out must be a contiguous float32/float64 tensor, got {} {}", out.dtype(),
              shape_str(out.shape()));
}

inline void cumsum(const Tensor& x, const Tensor& out, int64_t outer, int64_t n, int64_t inner) {
  LINEA_CHECK(x.is_contiguous() && out.is_contiguous() && x.dtype() == out.dtype() && x.numel() == out.numel() &&
                  outer >= 0 && n >= 0 && inner >= 0 && outer * n * inner == x.numel(),
              "[cumsum] x and out must be contiguous, of one dtype and {} = {}x{}x{} elements, got {} {} and {} {}",
              outer * n * inner, outer, n, inner, x.dtype(), shape_str(x.shape()), out.dtype(),
              shape_str(out.shape()));
  LINEA_CHECK(is_floating(x.dtype()) || x.dtype() == DType::Int64,
              "[cumsum] supports float32, float64 and int64, got {}", x.dtype());
}

// A per-token operand or result: [B, H, N, e] with unit stride along e.
inline void mhla_rows(const char* op, const char* what, const Tensor& t, const Backend::MHLADims& g, int64_t e,
                      DType dtype) {
  LINEA_CHECK(t.shape() == Shape({g.B, g.H, g.N, e}) && t.dtype() == dtype && t.strides()[3] == 1,
              "[{}] {} must be {} [{}, {}, {}, {}] with unit stride along the last dim, got {} {} (strides {})", op,
              what, dtype, g.B, g.H, g.N, e, t.dtype(), shape_str(t.shape()), shape_str(t.strides()));
}

// The fused MHLA kernels (backend.h, "fused MHLA"): q, k [B, H, N, d] and v [B, H, N, dv] with
// unit stride along the last dim (rows at any strides: the heads of a [B, N, H·e] projection are
// read in place), and mix [M, M] contiguous, of one floating dtype, M = ceil(N / block_len).
// Returns their dims (backend.h).
inline Backend::MHLADims mhla(const char* op, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& mix,
                              const Backend::MHLAArgs& a) {
  LINEA_CHECK(q.dim() == 4 && k.shape() == q.shape() && v.dim() == 4 && v.size(0) == q.size(0) &&
                  v.size(1) == q.size(1) && v.size(2) == q.size(2),
              "[{}] expected q, k [B, H, N, d] and v [B, H, N, dv], got {} / {} / {}", op, shape_str(q.shape()),
              shape_str(k.shape()), shape_str(v.shape()));
  LINEA_CHECK(is_floating(q.dtype()) && k.dtype() == q.dtype() && v.dtype() == q.dtype() && mix.dtype() == q.dtype(),
              "[{}] q, k, v, mix must share float32 or float64, got {} / {} / {} / {}", op, q.dtype(), k.dtype(),
              v.dtype(), mix.dtype());
  LINEA_CHECK(a.causal || !a.normalised, "[{}] the normalised form is causal linear attention's: causal only", op);
  Backend::MHLADims g{q.size(0), q.size(1), q.size(0) * q.size(1), q.size(2), q.size(3), v.size(3), a.block_len, 0};
  LINEA_CHECK(g.N > 0 && g.d > 0 && g.dv > 0 && g.L > 0, "[{}] empty input or block_len <= 0: q {}, block_len {}", op,
              shape_str(q.shape()), g.L);
  mhla_rows(op, "q", q, g, g.d, q.dtype());
  mhla_rows(op, "k", k, g, g.d, q.dtype());
  mhla_rows(op, "v", v, g, g.dv, q.dtype());
  g.M = (g.N + g.L - 1) / g.L;
  LINEA_CHECK(mix.dim() == 2 && mix.size(0) == g.M && mix.size(1) == g.M && mix.is_contiguous(),
              "[{}] mix must be contiguous [{}, {}], got {}", op, g.M, g.M, shape_str(mix.shape()));
  return g;
}

// mhla(), then the tensors the forward saves for the backward (backend.h, "fused MHLA"): s and sh
// [BH, M, d, dv+1] non-causal or normalised, [BH, M, d, dv] causal; r [BH, N] but for plain causal.
inline Backend::MHLADims mhla_saved(const char* op, const Tensor& q, const Tensor& k, const Tensor& v,
                                    const Tensor& mix, const Backend::MHLAArgs& a, const Tensor& s, const Tensor& sh,
                                    const Tensor& r) {
  const Backend::MHLADims g = mhla(op, q, k, v, mix, a);
  const bool ones = !a.causal || a.normalised;  // the summaries carry V's ones column
  const int64_t cols = ones ? g.dv + 1 : g.dv;
  for (const Tensor* t : {&s, &sh, &r})
    if (t->defined())
      LINEA_CHECK(t->dtype() == q.dtype() && t->is_contiguous(),
                  "[{}] s, sh and r must be contiguous tensors of q's dtype {}, got {} {}", op, q.dtype(),
                  shape_str(t->shape()), t->dtype());
  LINEA_CHECK(s.defined() && sh.defined() && s.numel() == g.BH * g.M * g.d * cols && sh.numel() == s.numel() &&
                  (!ones || (r.defined() && r.numel() == g.BH * g.N)),
              "[{}] s {} / sh {} / r {} do not fit q {} and v {} ({})", op, shape_str(s.shape()),
              shape_str(sh.shape()), r.defined() ? shape_str(r.shape()) : "undefined", shape_str(q.shape()),
              shape_str(v.shape()), !a.causal ? "non-causal" : a.normalised ? "causal, normalised" : "causal");
  return g;
}

}  // namespace linea::fused_checks
