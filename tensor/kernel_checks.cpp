// The bodies of kernel_checks.h's checks: out of line so that the header stays fmt-free and the
// .cu files can call them.
#include "linea/tensor/kernel_checks.h"

#include "linea/tensor/error.h"

namespace linea::kernel_checks {

void gemm(const Tensor& a, const Tensor& b, const Tensor& out, const Tensor& bias, const Tensor& residual) {
  LINEA_CHECK(a.dim() == 3 && b.dim() == 3 && out.dim() == 3, "[gemm] expected 3-d operands, got {} @ {} -> {}",
              shape_str(a.shape()), shape_str(b.shape()), shape_str(out.shape()));
  const struct {
    int64_t batch, M, N, K;
  } g{out.shape()[0], out.shape()[1], out.shape()[2], a.shape()[2]};
  LINEA_CHECK(a.shape() == Shape({g.batch, g.M, g.K}) && b.shape() == Shape({g.batch, g.K, g.N}) && out.is_contiguous(),
              "[gemm] shapes {} @ {} -> {} do not match [batch, M, K] @ [batch, K, N] -> [batch, M, N]",
              shape_str(a.shape()), shape_str(b.shape()), shape_str(out.shape()));
  LINEA_CHECK(a.dtype() == b.dtype() && a.dtype() == out.dtype(), "[gemm] dtype mismatch: {} @ {} -> {}", a.dtype(),
              b.dtype(), out.dtype());
  dispatch_floating(out.dtype(), "gemm", []<class T>() {});
  LINEA_CHECK(!bias.defined() || (bias.shape() == Shape({g.N}) && bias.dtype() == out.dtype() &&
                                  bias.is_contiguous() && bias.device() == out.device()),
              "[gemm] bias must be a contiguous {} [{}] on {} for out {}, got {} {} on {}", out.dtype(), g.N,
              out.device(), shape_str(out.shape()), bias.dtype(), shape_str(bias.shape()), bias.device());
  LINEA_CHECK(!residual.defined() || (residual.shape() == out.shape() && residual.dtype() == out.dtype() &&
                                      residual.is_contiguous() && residual.device() == out.device()),
              "[gemm] residual must be a contiguous {} {} on {} like out, got {} {} on {}", out.dtype(),
              shape_str(out.shape()), out.device(), residual.dtype(), shape_str(residual.shape()), residual.device());
  LINEA_CHECK(!residual.defined() || residual.storage() != out.storage() || residual.data_ptr() == out.data_ptr(),
              "[gemm] residual must be out itself or not overlap it: it shares out's storage at another offset");
}

void linear_weight_grad(const Tensor& g, const Tensor& x, const Tensor& dw, const Tensor& db) {
  LINEA_CHECK(g.dim() == 2 && x.dim() == 2 && dw.dim() == 2 && g.size(0) == x.size(0) &&
                  dw.shape() == Shape({g.size(1), x.size(1)}) && (!db.defined() || db.shape() == Shape({g.size(1)})),
              "[linear_weight_grad] expected g [rows, out], x [rows, in], dw [out, in], db [out], got {}, {}, {}, {}",
              shape_str(g.shape()), shape_str(x.shape()), shape_str(dw.shape()),
              db.defined() ? shape_str(db.shape()) : std::string("none"));
  LINEA_CHECK(g.is_contiguous() && x.is_contiguous() && dw.is_contiguous() && (!db.defined() || db.is_contiguous()),
              "[linear_weight_grad] every operand must be contiguous");
  LINEA_CHECK(x.dtype() == g.dtype() && dw.dtype() == g.dtype() && (!db.defined() || db.dtype() == g.dtype()),
              "[linear_weight_grad] dtype mismatch: g {}, x {}, dw {}", g.dtype(), x.dtype(), dw.dtype());
  LINEA_CHECK(x.device() == g.device() && dw.device() == g.device() && (!db.defined() || db.device() == g.device()),
              "[linear_weight_grad] operands on different devices: g on {}, x on {}, dw on {}", g.device(),
              x.device(), dw.device());
}

void row_geometry(const char* op, const Tensor& x, Operands rowwise, Operands per_row, Operands per_feature) {
  LINEA_CHECK(x.is_contiguous() && x.dim() >= 1, "[{}] x must be contiguous with at least 1 dim, got {}", op,
              shape_str(x.shape()));
  const int64_t n = x.shape().back(), rows = n == 0 ? 0 : x.numel() / n;
  auto check = [&](Operands list, const Shape& shape) {
    for (auto [what, t] : list) {
      if (!t->defined()) continue;
      LINEA_CHECK(t->is_contiguous() && t->shape() == shape && t->dtype() == x.dtype(),
                  "[{}] {} must be contiguous {} {}, got {} {} (contiguous: {})", op, what, shape_str(shape),
                  x.dtype(), shape_str(t->shape()), t->dtype(), t->is_contiguous());
    }
  };
  check(rowwise, x.shape());
  check(per_row, {rows});
  check(per_feature, {n});
}

void layernorm_forward(const Tensor& x, const Tensor& weight, const Tensor& bias, const Tensor& out,
                       const Tensor& mean, const Tensor& rstd) {
  row_geometry("layernorm_forward", x, {{"out", &out}}, {{"mean", &mean}, {"rstd", &rstd}},
               {{"weight", &weight}, {"bias", &bias}});
  LINEA_CHECK(out.defined() && mean.defined() && rstd.defined(), "[layernorm_forward] out, mean, rstd are required");
  dispatch_floating(x.dtype(), "layernorm_forward", []<class T>() {});
}

void layernorm_backward(const Tensor& dy, const Tensor& x, const Tensor& weight, const Tensor& mean,
                        const Tensor& rstd, const Tensor& dx, const Tensor& dweight, const Tensor& dbias) {
  row_geometry("layernorm_backward", x, {{"dy", &dy}, {"dx", &dx}}, {{"mean", &mean}, {"rstd", &rstd}},
               {{"weight", &weight}, {"dweight", &dweight}, {"dbias", &dbias}});
  LINEA_CHECK(dy.defined() && dx.defined() && mean.defined() && rstd.defined(),
              "[layernorm_backward] dy, dx, mean, rstd are required");
  dispatch_floating(x.dtype(), "layernorm_backward", []<class T>() {});
}

void rmsnorm_forward(const Tensor& x, const Tensor& weight, const Tensor& out, const Tensor& rstd) {
  row_geometry("rmsnorm_forward", x, {{"out", &out}}, {{"rstd", &rstd}}, {{"weight", &weight}});
  LINEA_CHECK(out.defined() && rstd.defined(), "[rmsnorm_forward] out and rstd are required");
  dispatch_floating(x.dtype(), "rmsnorm_forward", []<class T>() {});
}

void rmsnorm_backward(const Tensor& dy, const Tensor& x, const Tensor& weight, const Tensor& rstd, const Tensor& dx,
                      const Tensor& dweight) {
  row_geometry("rmsnorm_backward", x, {{"dy", &dy}, {"dx", &dx}}, {{"rstd", &rstd}},
               {{"weight", &weight}, {"dweight", &dweight}});
  LINEA_CHECK(dy.defined() && dx.defined() && rstd.defined(), "[rmsnorm_backward] dy, dx, rstd are required");
  dispatch_floating(x.dtype(), "rmsnorm_backward", []<class T>() {});
}

bool reduce(ReduceOp op, const Tensor& x, const Tensor& out, int64_t outer, int64_t n, int64_t inner) {
  LINEA_CHECK(x.is_contiguous() && out.is_contiguous(), "[reduce] operands must be contiguous");
  LINEA_CHECK(x.numel() == outer * n * inner && out.numel() == outer * inner,
              "[reduce] x {} / out {} do not match [outer={}, n={}, inner={}]", shape_str(x.shape()),
              shape_str(out.shape()), outer, n, inner);
  LINEA_CHECK(n > 0 || op == ReduceOp::Sum || op == ReduceOp::LogSumExp,
              "[reduce] max/min/argmax over an empty dim (n = 0) has no result");
  if (outer * inner == 0) return false;
  if (op == ReduceOp::LogSumExp) dispatch_floating(x.dtype(), "logsumexp", []<class T>() {});
  const DType want = op == ReduceOp::ArgMax ? DType::Int64 : x.dtype();
  LINEA_CHECK(out.dtype() == want, "[reduce] output dtype {} should be {}", out.dtype(), want);
  return true;
}

void softmax(const Tensor& x, const Tensor& out) {
  LINEA_CHECK(x.is_contiguous() && out.is_contiguous() && x.shape() == out.shape() && x.dtype() == out.dtype(),
              "[softmax] x {} {} and out {} {} must be contiguous with one shape and dtype", shape_str(x.shape()),
              x.dtype(), shape_str(out.shape()), out.dtype());
}

void softmax_backward(const Tensor& y, const Tensor& dy, const Tensor& dx) {
  LINEA_CHECK(y.is_contiguous() && dy.is_contiguous() && dx.is_contiguous() && y.shape() == dy.shape() &&
                  y.shape() == dx.shape() && y.dtype() == dy.dtype() && y.dtype() == dx.dtype(),
              "[softmax_backward] y {}, dy {}, dx {} must be contiguous with one shape and dtype",
              shape_str(y.shape()), shape_str(dy.shape()), shape_str(dx.shape()));
}

void elementwise_out(const char* op, const Tensor& out, const Tensor& in) {
  LINEA_CHECK(out.is_contiguous() && out.shape() == in.shape(),
              "[{}] internal: out (shape {}) must be contiguous and shaped like the input {}", op,
              shape_str(out.shape()), shape_str(in.shape()));
}

void unary(UnaryOp op, const Tensor& x, const Tensor& out) {
  elementwise_out(op_name(op), out, x);
  LINEA_CHECK(out.dtype() == x.dtype(), "[{}] internal: out dtype {} differs from input dtype {}", op_name(op),
              out.dtype(), x.dtype());
}

void binary(BinaryOp op, const Tensor& a, const Tensor& b, const Tensor& out) {
  elementwise_out(op_name(op), out, a);
  elementwise_out(op_name(op), out, b);
  const bool compare = op_domain(op) == Domain::Compare;
  LINEA_CHECK(a.dtype() == b.dtype() && out.dtype() == (compare ? DType::Bool : a.dtype()),
              "[{}] internal: dtypes {}, {} -> {} do not match", op_name(op), a.dtype(), b.dtype(), out.dtype());
}

void where(const Tensor& cond, const Tensor& a, const Tensor& b, const Tensor& out) {
  elementwise_out("where", out, cond);
  elementwise_out("where", out, a);
  elementwise_out("where", out, b);
  LINEA_CHECK(cond.dtype() == DType::Bool && a.dtype() == out.dtype() && b.dtype() == out.dtype(),
              "[where] internal: dtypes cond {}, a {}, b {} -> {} do not match", cond.dtype(), a.dtype(), b.dtype(),
              out.dtype());
}

void activation_with_grad(UnaryOp op, const Tensor& x, const Tensor& y, const Tensor& dydx) {
  LINEA_CHECK(has_activation_grad(op), "[activation_with_grad] {} has no derivative kernel (gelu and silu do)",
              op_name(op));
  LINEA_CHECK(is_floating(x.dtype()), "[{}] expected a floating dtype (float32 or float64), got {}", op_name(op),
              x.dtype());
  for (const Tensor* t : {&y, &dydx}) {
    LINEA_CHECK(t->is_contiguous() && t->shape() == x.shape() && t->dtype() == x.dtype(),
                "[{}] y and dydx must be contiguous {} tensors shaped like x {}, got {} {}{}", op_name(op), x.dtype(),
                shape_str(x.shape()), t->dtype(), shape_str(t->shape()), t->is_contiguous() ? "" : " (strided)");
    LINEA_CHECK(t->device() == x.device(), "[{}] x is on {} but y or dydx is on {}", op_name(op), x.device(),
                t->device());
  }
}

void unary_unsupported(UnaryOp op, DType t) {
  LINEA_CHECK(t != DType::Bool, "[{}] not defined for bool tensors", op_name(op));
  throw Error(fmt::format("[{}] expected a floating dtype (float32 or float64), got {}", op_name(op), t));
}

void binary_unsupported(BinaryOp op, DType t) {
  throw Error(fmt::format("[{}] not supported for dtype {}{}", op_name(op), t,
                          t == DType::Bool ? "" : " (needs float32 or float64)"));
}

void attention(const char* op, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& lse,
               std::initializer_list<const Tensor*> like_q, std::initializer_list<const Tensor*> like_v) {
  LINEA_CHECK(q.dim() == 4 && k.shape() == q.shape() && v.dim() == 4 && v.size(0) == q.size(0) &&
                  v.size(1) == q.size(1) && v.size(2) == q.size(2) &&
                  lse.shape() == Shape({q.size(0) * q.size(1), q.size(2)}) && lse.is_contiguous() &&
                  lse.dtype() == q.dtype(),
              "[{}] expected q, k [B, H, N, d], v [B, H, N, dv] and a contiguous lse [B·H, N] of q's dtype, got {} / "
              "{} / {} / {} {}",
              op, shape_str(q.shape()), shape_str(k.shape()), shape_str(v.shape()), lse.dtype(),
              shape_str(lse.shape()));
  // Rows: unit stride along the last dim, any other strides (the heads of a projection, in place).
  auto check = [&](const Tensor& t, const Tensor& like) {
    LINEA_CHECK(t.dtype() == q.dtype() && t.shape() == like.shape() && t.strides()[3] == 1,
                "[{}] expected a {} tensor shaped {} with unit stride along the last dim, got {} {} (strides {})", op,
                q.dtype(), shape_str(like.shape()), t.dtype(), shape_str(t.shape()), shape_str(t.strides()));
  };
  for (const Tensor* t : {&q, &k}) check(*t, *t);
  for (const Tensor* t : like_q) check(*t, q);
  for (const Tensor* t : like_v) check(*t, v);
  dispatch_floating(q.dtype(), op, []<class T>() {});
}

void attention_probs(const char* op, const Tensor& q, const Tensor& probs, int64_t size, bool required) {
  if (size == 0) {
    LINEA_CHECK(!probs.defined(), "[{}] this backend keeps no probabilities for q {} {}: probs must be undefined, got {}",
                op, shape_str(q.shape()), q.dtype(), shape_str(probs.shape()));
    return;
  }
  if (!probs.defined()) {
    LINEA_CHECK(!required, "[{}] needs the forward's probs [{}, {}] for q {} {}", op, q.size(0) * q.size(1), size,
                shape_str(q.shape()), q.dtype());
    return;
  }
  LINEA_CHECK(probs.shape() == Shape({q.size(0) * q.size(1), size}) && probs.is_contiguous() &&
                  probs.dtype() == q.dtype() && probs.device() == q.device(),
              "[{}] expected a contiguous probs [{}, {}] {} on q's device for q {}, got {} {} {}{}", op,
              q.size(0) * q.size(1), size, q.dtype(), shape_str(q.shape()), shape_str(probs.shape()), probs.dtype(),
              probs.device(), probs.is_contiguous() ? "" : " (not contiguous)");
}

void index_in_range(const char* op, bool in_range, int64_t bad_value, int64_t dim, int64_t size) {
  LINEA_CHECK(in_range, "[{}] index {} out of range for dim {} of size {}", op, bad_value, dim, size);
}

void index_common(const char* op, const Tensor& values, int64_t dim, const Tensor& idx) {
  LINEA_CHECK(dim >= 0 && dim < values.dim(), "[{}] dim {} out of range for shape {}", op, dim,
              shape_str(values.shape()));
  LINEA_CHECK(values.dtype() == DType::Float32 || values.dtype() == DType::Float64 || values.dtype() == DType::Int64,
              "[{}] values must be float32, float64 or int64, got {}", op, values.dtype());
  LINEA_CHECK(idx.dtype() == DType::Int64, "[{}] indices must be int64, got {}", op, idx.dtype());
}

void shape_but_dim(const char* op, const Tensor& a, const Tensor& b, int64_t dim, int64_t n) {
  Shape want = b.shape();
  want[dim] = n;
  LINEA_CHECK(a.shape() == want && a.dtype() == b.dtype(), "[{}] operand of shape {} {} does not match {} {}", op,
              shape_str(a.shape()), a.dtype(), shape_str(want), b.dtype());
}

void index_fits(const char* op, const Tensor& idx, const Tensor& x, int64_t dim) {
  for (int64_t d = 0; d < x.dim(); ++d)
    LINEA_CHECK(d == dim || idx.shape()[d] <= x.shape()[d], "[{}] index shape {} is larger than {} in dim {}", op,
                shape_str(idx.shape()), shape_str(x.shape()), d);
}

void index_select(const Tensor& x, int64_t dim, const Tensor& idx, const Tensor& out) {
  LINEA_CHECK(idx.dim() <= 1, "[index_select] index must be 1-d, got shape {}", shape_str(idx.shape()));
  index_common("index_select", x, dim, idx);
  shape_but_dim("index_select", out, x, dim, idx.numel());
}

void index_add(const Tensor& out, int64_t dim, const Tensor& idx, const Tensor& src) {
  LINEA_CHECK(idx.dim() <= 1, "[index_add] index must be 1-d, got shape {}", shape_str(idx.shape()));
  LINEA_CHECK(out.is_contiguous(), "[index_add] out must be contiguous");
  index_common("index_add", out, dim, idx);
  shape_but_dim("index_add", src, out, dim, idx.numel());
}

void gather(const Tensor& x, int64_t dim, const Tensor& idx, const Tensor& out) {
  LINEA_CHECK(idx.dim() == x.dim() && out.shape() == idx.shape() && out.dtype() == x.dtype(),
              "[gather] x {} {}, index {} and out {} {} do not fit", shape_str(x.shape()), x.dtype(),
              shape_str(idx.shape()), shape_str(out.shape()), out.dtype());
  index_common("gather", x, dim, idx);
  index_fits("gather", idx, x, dim);
}

void scatter_add(const Tensor& out, int64_t dim, const Tensor& idx, const Tensor& src) {
  LINEA_CHECK(idx.dim() == out.dim() && src.shape() == idx.shape() && src.dtype() == out.dtype(),
              "[scatter_add] out {} {}, index {} and src {} {} do not fit", shape_str(out.shape()), out.dtype(),
              shape_str(idx.shape()), shape_str(src.shape()), src.dtype());
  LINEA_CHECK(out.is_contiguous(), "[scatter_add] out must be contiguous");
  index_common("scatter_add", out, dim, idx);
  index_fits("scatter_add", idx, out, dim);
}

}  // namespace linea::kernel_checks
