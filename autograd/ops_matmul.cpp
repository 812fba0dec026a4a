// matmul with NumPy semantics on the [batch, M, K] @ [batch, K, N] gemm kernel.
//
// 1-d operands are promoted (a vector on the left is a [1, K] row, on the right a [K, 1] column)
// and the added dim is left out of the result. Leading batch dims broadcast by expand(), i.e. with
// zero strides: a [B, T, C] @ [C, N] product never copies the weight B times.
#include "linea/autograd/ops_matmul.h"

#include <optional>

#include "linea/autograd/function.h"
#include "linea/autograd/ops_reduce.h"
#include "linea/tensor/backend.h"
#include "linea/tensor/error.h"

namespace linea {

namespace {

// The one stride that walks t's first nb dims as a single flattened dim, if there is one (size-1
// dims do not matter; a fully broadcast batch has stride 0).
std::optional<int64_t> flat_batch_stride(const Tensor& t, int64_t nb) {
  std::optional<int64_t> stride;
  int64_t span = 1;
  for (int64_t d = nb - 1; d >= 0; --d) {
    if (t.shape()[d] == 1) continue;
    if (stride && t.strides()[d] != *stride * span) return std::nullopt;
    if (!stride) stride = t.strides()[d];
    span *= t.shape()[d];
  }
  return stride.value_or(0);
}

// a [..., M, K] @ b [..., K, N] (+ bias [N]) (+ residual, out's shape) -> out [..., M, N], all with
// the same nb batch dims. One kernel call when the batch dims flatten in every operand; that fails only
// when some but not all of them are broadcast ([2, 1] against [1, 5], say), and then we loop over
// the first batch dim.
void gemm_nd(const Tensor& a, const Tensor& b, const Tensor& out, int64_t nb, const Tensor& bias,
             const Tensor& residual = Tensor()) {
  auto sa = flat_batch_stride(a, nb), sb = flat_batch_stride(b, nb), so = flat_batch_stride(out, nb);
  auto sr = residual.defined() ? flat_batch_stride(residual, nb) : std::optional<int64_t>(0);
  if (sa && sb && so && sr) {
    const int64_t batch = numel(Shape(out.shape().begin(), out.shape().begin() + nb));
    auto as3 = [&](const Tensor& t, int64_t s) {
      return t.as_strided({batch, t.shape()[nb], t.shape()[nb + 1]}, {s, t.strides()[nb], t.strides()[nb + 1]},
                          t.offset());
    };
    backend(out.device()).gemm(as3(a, *sa), as3(b, *sb), as3(out, *so), bias,
                               residual.defined() ? as3(residual, *sr) : Tensor());
    return;
  }
  for (int64_t i = 0; i < out.shape()[0]; ++i)
    gemm_nd(a.select(0, i), b.select(0, i), out.select(0, i), nb - 1, bias,
            residual.defined() ? residual.select(0, i) : Tensor());
}

}  // namespace

namespace {
// Operand i of a matmul as the backward saved it (a 1-d operand promoted to 2 dims), attached to
// its graph for create_graph: the promotion is redone on the attached tensor, so it is recorded.
Tensor promoted_input(const Tensor& saved, const Shape& shape, size_t i) {
  if (saved.shape() == shape) return autograd::saved_input(saved, i);
  return autograd::saved_input(saved.reshape(shape), i).reshape(saved.shape());
}
}  // namespace

Tensor matmul(const Tensor& a, const Tensor& b) {
  LINEA_CHECK(a.dim() >= 1 && b.dim() >= 1, "[matmul] both operands need at least 1 dim, got shapes {} and {}",
              shape_str(a.shape()), shape_str(b.shape()));
  LINEA_CHECK(a.dtype() == b.dtype(), "[matmul] dtype mismatch: {} @ {} (convert one with .to())", a.dtype(),
              b.dtype());
  LINEA_CHECK(is_floating(a.dtype()), "[matmul] expected float32 or float64 operands, got {}", a.dtype());
  LINEA_CHECK(a.device() == b.device(), "[matmul] operands on different devices: {} and {}", a.device(), b.device());

  const Tensor A = a.dim() == 1 ? a.detach().unsqueeze(0) : a.detach();
  const Tensor B = b.dim() == 1 ? b.detach().unsqueeze(1) : b.detach();
  const int64_t M = A.size(-2), K = A.size(-1), N = B.size(-1);
  LINEA_CHECK(B.size(-2) == K, "[matmul] shape mismatch: {} @ {} (inner dims {} and {} differ)",
              shape_str(a.shape()), shape_str(b.shape()), K, B.size(-2));
  const Shape a_batch(A.shape().begin(), A.shape().end() - 2), b_batch(B.shape().begin(), B.shape().end() - 2);
  Shape batch;
  try {
    batch = broadcast_shapes("matmul", a_batch, b_batch);
  } catch (const Error&) {
    throw Error(fmt::format("[matmul] batch dims of {} and {} cannot be broadcast together", shape_str(a.shape()),
                            shape_str(b.shape())));
  }
  auto with = [&batch](int64_t r, int64_t c) {
    Shape s = batch;
    s.push_back(r);
    s.push_back(c);
    return s;
  };

  Shape out_shape = batch;
  if (a.dim() > 1) out_shape.push_back(M);
  if (b.dim() > 1) out_shape.push_back(N);
  Tensor out = empty(out_shape, a.dtype(), a.device());
  const Shape full = with(M, N);  // out including the promoted dims
  gemm_nd(A.expand(with(M, K)), B.expand(with(K, N)), out.as_strided(full, contiguous_strides(full), 0),
          static_cast<int64_t>(batch.size()), Tensor());

  return autograd::record(
      "matmul", out, {a, b},
      [A_saved = A, B_saved = B, full, K, N, a_shape = a.shape(), b_shape = b.shape(), need_a = a.requires_grad(),
       need_b = b.requires_grad()](const Tensor& g) -> std::vector<Tensor> {
        // Under create_graph (grad mode on) the operands are read with their graph.
        const bool live = autograd::grad_enabled();
        const Tensor A = live ? promoted_input(A_saved, a_shape, 0) : A_saved;
        const Tensor B = live ? promoted_input(B_saved, b_shape, 1) : B_saved;
        // dA = g @ B^T and dB = A^T @ g, summed over the batch dims each operand was broadcast along.
        const Tensor G = g.reshape(full);
        Tensor da, db;
        if (need_a) da = autograd::sum_to(matmul(G, B.transpose(-1, -2)), A.shape()).reshape(a_shape);
        if (need_b && B.dim() == 2 && A.dim() > 2) {
          // A weight shared by every batch: fold the batch into one [batch*M, K]^T @ [batch*M, N].
          db = matmul(A.reshape({-1, K}).t(), G.reshape({-1, N})).reshape(b_shape);
        } else if (need_b) {
          db = autograd::sum_to(matmul(A.transpose(-1, -2), G), B.shape()).reshape(b_shape);
        }
        return {da, db};
      });
}

namespace {

void check_linear(const char* op, const Tensor& x, const Tensor& weight, const Tensor& bias) {
  LINEA_CHECK(x.dim() >= 1 && weight.dim() == 2 && x.size(-1) == weight.size(1) &&
                  (!bias.defined() || (bias.dim() == 1 && bias.size(0) == weight.size(0))),
              "[{}] expected x [..., in], weight [out, in], bias [out], got {}, {}, {}", op, shape_str(x.shape()),
              shape_str(weight.shape()), bias.defined() ? shape_str(bias.shape()) : std::string("none"));
  LINEA_CHECK(x.dtype() == weight.dtype() && (!bias.defined() || bias.dtype() == x.dtype()) && is_floating(x.dtype()),
              "[{}] x, weight, bias must share float32 or float64, got {} / {} / {}", op, x.dtype(), weight.dtype(),
              bias.defined() ? fmt::format("{}", bias.dtype()) : std::string("none"));
  LINEA_CHECK(x.device() == weight.device() && (!bias.defined() || bias.device() == x.device()),
              "[{}] operands on different devices: x on {}, weight on {}, bias on {}", op, x.device(),
              weight.device(), bias.defined() ? fmt::format("{}", bias.device()) : std::string("none"));
}

// x · weightᵀ (+ bias) (+ residual), inputs checked. The bias and the residual are the gemm's
// epilogue (Backend::gemm), added as the product is stored: neither costs a pass over the output.
Tensor linear_impl(const char* op, const Tensor& x, const Tensor& weight, const Tensor& bias, const Tensor& residual) {
  const int64_t in = weight.size(1), out_f = weight.size(0);
  const Tensor X = x.detach(), W = weight.detach(), A = X.dim() == 1 ? X.unsqueeze(0) : X;
  Shape full = A.shape(), w_full = A.shape();
  full.back() = out_f;
  w_full[w_full.size() - 2] = in;
  w_full.back() = out_f;
  Shape out_shape = x.shape();
  out_shape.back() = out_f;
  Tensor out = empty(out_shape, x.dtype(), x.device());
  gemm_nd(A, W.t().expand(w_full), out.as_strided(full, contiguous_strides(full), 0),
          static_cast<int64_t>(full.size()) - 2, bias.defined() ? bias.detach().contiguous() : Tensor(),
          residual.defined() ? residual.detach().contiguous().reshape(full) : Tensor());
  const int64_t rows = numel(Shape(x.shape().begin(), x.shape().end() - 1));

  return autograd::record(
      op, out, {x, weight, bias, residual},
      [X, W, rows, in, out_f, need_x = x.requires_grad(), need_w = weight.requires_grad(),
       need_b = bias.defined() && bias.requires_grad(),
       need_r = residual.defined() && residual.requires_grad()](const Tensor& g) -> std::vector<Tensor> {
        // dx = g·W, dW = gᵀ·x over every row, db = the column sums of g: with dW, in one call,
        // which the CPU runs in one pass over g (Backend::linear_weight_grad). The residual's is g.
        const Tensor G = g.reshape({rows, out_f});
        Tensor dx, dw, db;
        if (autograd::grad_enabled()) {  // create_graph: the same sums as recorded ops, on the live inputs
          if (need_x) dx = matmul(G, autograd::saved_input(W, 1)).reshape(X.shape());
          if (need_w) dw = matmul(G.t(), autograd::saved_input(X, 0).reshape({rows, in}));
          if (need_b) db = sum(G, {0});
          return {dx, dw, db, need_r ? g : Tensor()};
        }
        if (need_x) dx = matmul(G, W).reshape(X.shape());
        if (need_w) {
          const Tensor Gc = G.contiguous(), Xc = X.reshape({rows, in}).contiguous();
          dw = empty({out_f, in}, G.dtype(), G.device());
          if (need_b) db = empty({out_f}, G.dtype(), G.device());
          backend(G.device()).linear_weight_grad(Gc, Xc, dw, db);
        } else if (need_b) {
          db = sum(G, {0});
        }
        return {dx, dw, db, need_r ? g : Tensor()};
      });
}

}  // namespace

Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias) {
  if (!bias.defined()) return matmul(x, weight.t());
  check_linear("linear", x, weight, bias);
  return linear_impl("linear", x, weight, bias, Tensor());
}

Tensor linear_add(const Tensor& x, const Tensor& weight, const Tensor& bias, const Tensor& residual) {
  check_linear("linear_add", x, weight, bias);
  LINEA_CHECK(residual.defined(), "[linear_add] needs a residual (linear computes the product alone)");
  Shape out_shape = x.shape();
  out_shape.back() = weight.size(0);
  LINEA_CHECK(residual.shape() == out_shape && residual.dtype() == x.dtype() && residual.device() == x.device(),
              "[linear_add] residual must be the output's {} {} on {}, got {} {} on {}", shape_str(out_shape),
              x.dtype(), x.device(), shape_str(residual.shape()), residual.dtype(), residual.device());
  return linear_impl("linear_add", x, weight, bias, residual);
}

}  // namespace linea
