// Elementwise ops: each forward runs a backend kernel into a fresh contiguous tensor, and its
// backward sits right beneath it. Backward lambdas run with grad mode off and are written with the
// public ops; binary ops undo broadcasting with autograd::sum_to.
#include "linea/autograd/ops_elementwise.h"

#include <cmath>

#include "linea/autograd/function.h"
#include "linea/tensor/backend.h"
#include "linea/tensor/creation.h"
#include "linea/tensor/error.h"

namespace linea {

using autograd::record;
using autograd::saved_input;
using autograd::saved_output;
using autograd::sum_to;
using autograd::Saves;

namespace {

// A 0-d constant with x's dtype and device (broadcasts against anything).
Tensor like(const Tensor& x, double v) { return scalar(v, {x.dtype(), x.device()}); }

void check_floating(std::string_view op, const Tensor& x) {
  LINEA_CHECK(is_floating(x.dtype()), "[{}] expected a floating dtype (float32 or float64), got {}", op, x.dtype());
}

void check_not_bool(std::string_view op, const Tensor& x) {
  LINEA_CHECK(x.dtype() != DType::Bool, "[{}] not defined for bool tensors", op);
}

// Runs a unary kernel into a fresh tensor. Records nothing: forwards record themselves, and
// backwards use it for the derivative kernels (ClampMask, Sign, ...).
Tensor apply(UnaryOp k, const Tensor& x, double p0 = 0, double p1 = 0) {
  Tensor out = empty(x.shape(), x.dtype(), x.device());
  backend(x.device()).unary(k, x, out, p0, p1);
  return out;
}

// An activation whose derivative costs about what the activation does (the same exp): when x needs
// a gradient, y and f'(x) come out of one pass (Backend::activation_with_grad) and the backward is
// g·f'(x), instead of evaluating f' again there. f'(x) is kept in place of x: the same memory.
// The product goes into g where the engine's copy is the only one (the MLP's: its dh comes fresh
// from the product that made it): a new output would first be read into cache to be written.
// f'(x) is a constant of the graph, so the node is differentiable once; `instead` names the
// composite that create_graph can go through.
Tensor activation(std::string name, UnaryOp op, const Tensor& x, const char* instead) {
  if (!autograd::needs_grad({x})) return record(std::move(name), apply(op, x), {x}, nullptr);  // anomaly mode's check
  Tensor y = empty(x.shape(), x.dtype(), x.device()), d = empty(x.shape(), x.dtype(), x.device());
  backend(x.device()).activation_with_grad(op, x, y, d);
  Tensor out = record(std::move(name), y, {x}, [d](const Tensor& g) -> std::vector<Tensor> {
    if (!autograd::exclusive(g) || g.shape() != d.shape()) return {g * d};
    backend(g.device()).binary(BinaryOp::Mul, g, d, g);
    return {g};
  });
  autograd::once_differentiable(out, instead);
  return out;
}

// A stride-0 view of x at `shape` for the kernels (they take operands already broadcast).
Tensor expand_to(const Tensor& x, const Shape& shape) { return x.shape() == shape ? x : x.detach().expand(shape); }

// What a binary op accepts: comparisons/where take any dtype, arithmetic no bool, div/pow floats.
enum class Kind { Any, Arith, Floating };

// The dtype rule of ops_elementwise.h plus the device check: returns a and b converted to the one
// dtype the kernel runs in. Converted operands are integers, which never carry gradients.
std::pair<Tensor, Tensor> operands(std::string_view op, const Tensor& a, const Tensor& b, Kind kind) {
  LINEA_CHECK(a.device() == b.device(), "[{}] operands are on different devices: {} and {}", op, a.device(),
              b.device());
  const DType ta = a.dtype(), tb = b.dtype();
  LINEA_CHECK(!(is_floating(ta) && is_floating(tb) && ta != tb),
              "[{}] operands have different floating dtypes {} and {}; convert one with .to() first", op, ta, tb);
  const DType t = is_floating(ta) ? ta : is_floating(tb) ? tb : promote(ta, tb);
  LINEA_CHECK(kind != Kind::Arith || t != DType::Bool, "[{}] arithmetic on bool tensors is not supported", op);
  LINEA_CHECK(kind != Kind::Floating || is_floating(t),
              "[{}] expected a floating operand, got {} and {}; convert with .to() first", op, ta, tb);
  return {ta == t ? a : a.to(t), tb == t ? b : b.to(t)};
}

// Runs a binary kernel on a and b (one dtype) broadcast to each other.
Tensor apply(BinaryOp k, std::string_view op, const Tensor& a, const Tensor& b, DType out_dtype) {
  Shape shape = broadcast_shapes(op, a.shape(), b.shape());
  Tensor out = empty(shape, out_dtype, a.device());
  backend(a.device()).binary(k, expand_to(a, shape), expand_to(b, shape), out);
  return out;
}

}  // namespace

Tensor activation_backward(BinaryOp op, const Tensor& g, const Tensor& x) {
  LINEA_CHECK(g.shape() == x.shape() && g.dtype() == x.dtype(),
              "[{}] the gradient ({}, {}) must match the forward's input ({}, {})", op_name(op), shape_str(g.shape()),
              g.dtype(), shape_str(x.shape()), x.dtype());
  return apply(op, op_name(op), g, x, x.dtype());
}

// ---------------------------------------------------------------------------------------------
// unary

Tensor neg(const Tensor& x) {
  check_not_bool("neg", x);
  return record("neg", apply(UnaryOp::Neg, x), {x}, [](const Tensor& g) -> std::vector<Tensor> { return {neg(g)}; });
}

Tensor exp(const Tensor& x) {
  check_floating("exp", x);
  Tensor out = apply(UnaryOp::Exp, x);
  return record("exp", out, {x},
                [y = out.detach()](const Tensor& g) -> std::vector<Tensor> { return {g * saved_output(y)}; },
                Saves::InputsAndOutput);
}

Tensor log(const Tensor& x) {
  check_floating("log", x);
  return record("log", apply(UnaryOp::Log, x), {x},
                [x = x.detach()](const Tensor& g) -> std::vector<Tensor> { return {g / saved_input(x, 0)}; });
}

Tensor sqrt(const Tensor& x) {
  check_floating("sqrt", x);
  Tensor out = apply(UnaryOp::Sqrt, x);
  return record("sqrt", out, {x},
                [y = out.detach()](const Tensor& g) -> std::vector<Tensor> { return {g / (saved_output(y) * 2.0)}; },
                Saves::InputsAndOutput);
}

Tensor rsqrt(const Tensor& x) {
  check_floating("rsqrt", x);
  Tensor out = apply(UnaryOp::Rsqrt, x);
  // d x^(-1/2) = -1/2 x^(-3/2) = -1/2 y^3
  return record("rsqrt", out, {x},
                [y = out.detach()](const Tensor& g) -> std::vector<Tensor> {
                  const Tensor Y = saved_output(y);
                  return {g * (Y * Y * Y * -0.5)};
                },
                Saves::InputsAndOutput);
}

Tensor tanh(const Tensor& x) {
  check_floating("tanh", x);
  Tensor out = apply(UnaryOp::Tanh, x);
  return record("tanh", out, {x},
                [y = out.detach()](const Tensor& g) -> std::vector<Tensor> {
                  const Tensor Y = saved_output(y);
                  return {g * (1.0 - Y * Y)};
                },
                Saves::InputsAndOutput);
}

Tensor sin(const Tensor& x) {
  check_floating("sin", x);
  Tensor out = apply(UnaryOp::Sin, x);
  return record("sin", out, {x}, [x = x.detach()](const Tensor& g) -> std::vector<Tensor> {
    return {g * cos(saved_input(x, 0))};
  });
}

Tensor cos(const Tensor& x) {
  check_floating("cos", x);
  Tensor out = apply(UnaryOp::Cos, x);
  return record("cos", out, {x}, [x = x.detach()](const Tensor& g) -> std::vector<Tensor> {
    return {-(g * sin(saved_input(x, 0)))};
  });
}

Tensor sigmoid(const Tensor& x) {
  check_floating("sigmoid", x);
  Tensor out = apply(UnaryOp::Sigmoid, x);
  return record("sigmoid", out, {x},
                [y = out.detach()](const Tensor& g) -> std::vector<Tensor> {
                  const Tensor Y = saved_output(y);
                  return {g * Y * (1.0 - Y)};
                },
                Saves::InputsAndOutput);
}

Tensor relu(const Tensor& x) {
  check_not_bool("relu", x);
  return record("relu", apply(UnaryOp::Relu, x), {x}, [x = x.detach()](const Tensor& g) -> std::vector<Tensor> {
    // Under create_graph (grad mode on in a backward) the same mask as a recorded where.
    if (autograd::grad_enabled()) return {where(gt(x, like(x, 0)), g, like(g, 0))};
    return {activation_backward(BinaryOp::ReluBackward, g, x)};
  });
}

Tensor gelu(const Tensor& x, GeluApprox approx) {
  check_floating("gelu", x);
  return activation("gelu", approx == GeluApprox::Erf ? UnaryOp::GeluErf : UnaryOp::GeluTanh, x,
                    "write GELU's tanh form with linea ops: "
                    "0.5 * x * (1 + tanh(0.7978845608 * (x + 0.044715 * x^3)))");
}

Tensor silu(const Tensor& x) {
  check_floating("silu", x);
  return activation("silu", UnaryOp::Silu, x, "use x * sigmoid(x)");
}

// Composed: where's backward hands g to x > 0 and the product's scales it by the slope elsewhere.
Tensor leaky_relu(const Tensor& x, double negative_slope) {
  check_floating("leaky_relu", x);
  return where(gt(x, scalar(0, {x.dtype(), x.device()})), x, x * negative_slope);
}

Tensor softplus(const Tensor& x) {
  check_floating("softplus", x);
  // d/dx log(1 + e^x) = e^x / (1 + e^x) = sigmoid(x)
  return record("softplus", apply(UnaryOp::Softplus, x), {x}, [x = x.detach()](const Tensor& g) -> std::vector<Tensor> {
    return {g * sigmoid(saved_input(x, 0))};
  });
}

Tensor abs(const Tensor& x) {
  check_not_bool("abs", x);
  // d|x| = sign(x), 0 at the kink like PyTorch.
  return record("abs", apply(UnaryOp::Abs, x), {x}, [x = x.detach()](const Tensor& g) -> std::vector<Tensor> {
    return {g * apply(UnaryOp::Sign, x)};
  });
}

Tensor pow(const Tensor& x, double exponent) {
  check_floating("pow", x);
  return record("pow", apply(UnaryOp::PowScalar, x, exponent), {x},
                [x = x.detach(), exponent](const Tensor& g) -> std::vector<Tensor> {
                  return {g * pow(saved_input(x, 0), exponent - 1) * exponent};
                });
}

Tensor clamp(const Tensor& x, double lo, double hi) {
  check_not_bool("clamp", x);
  LINEA_CHECK(!std::isnan(lo) && !std::isnan(hi), "[clamp] a bound is NaN: [{}, {}]", lo, hi);
  LINEA_CHECK(lo <= hi, "[clamp] lower bound {} is above upper bound {}", lo, hi);
  // The gradient passes where x is inside [lo, hi] (bounds included) and is 0 where clamped.
  return record("clamp", apply(UnaryOp::Clamp, x, lo, hi), {x},
                [x = x.detach(), lo, hi](const Tensor& g) -> std::vector<Tensor> {
                  return {g * apply(UnaryOp::ClampMask, x, lo, hi)};
                });
}

// ---------------------------------------------------------------------------------------------
// binary (broadcasting)

Tensor add(const Tensor& a, const Tensor& b) {
  auto [x, y] = operands("add", a, b, Kind::Arith);
  return record("add", apply(BinaryOp::Add, "add", x, y, x.dtype()), {a, b},
                [sa = a.shape(), sb = b.shape(), ga = a.requires_grad(), gb = b.requires_grad()](
                    const Tensor& g) -> std::vector<Tensor> {
                  return {ga ? sum_to(g, sa) : Tensor(), gb ? sum_to(g, sb) : Tensor()};
                });
}

Tensor sub(const Tensor& a, const Tensor& b) {
  auto [x, y] = operands("sub", a, b, Kind::Arith);
  return record("sub", apply(BinaryOp::Sub, "sub", x, y, x.dtype()), {a, b},
                [sa = a.shape(), sb = b.shape(), ga = a.requires_grad(), gb = b.requires_grad()](
                    const Tensor& g) -> std::vector<Tensor> {
                  return {ga ? sum_to(g, sa) : Tensor(), gb ? sum_to(neg(g), sb) : Tensor()};
                });
}

Tensor mul(const Tensor& a, const Tensor& b) {
  auto [x, y] = operands("mul", a, b, Kind::Arith);
  return record("mul", apply(BinaryOp::Mul, "mul", x, y, x.dtype()), {a, b},
                [x = x.detach(), y = y.detach(), ga = a.requires_grad(), gb = b.requires_grad()](
                    const Tensor& g) -> std::vector<Tensor> {
                  return {ga ? sum_to(g * saved_input(y, 1), x.shape()) : Tensor(),
                          gb ? sum_to(g * saved_input(x, 0), y.shape()) : Tensor()};
                });
}

Tensor div(const Tensor& a, const Tensor& b) {
  auto [x, y] = operands("div", a, b, Kind::Floating);
  Tensor out = apply(BinaryOp::Div, "div", x, y, x.dtype());
  // d(x/y)/dx = 1/y, d(x/y)/dy = -x/y^2 = -out/y
  return record("div", out, {a, b},
                [y = y.detach(), out = out.detach(), sa = a.shape(), ga = a.requires_grad(),
                 gb = b.requires_grad()](const Tensor& g) -> std::vector<Tensor> {
                  Tensor gy = g / saved_input(y, 1);
                  return {ga ? sum_to(gy, sa) : Tensor(),
                          gb ? sum_to(neg(gy * saved_output(out)), y.shape()) : Tensor()};
                },
                Saves::InputsAndOutput);
}

Tensor pow(const Tensor& a, const Tensor& b) {
  auto [x, y] = operands("pow", a, b, Kind::Floating);
  Tensor out = apply(BinaryOp::Pow, "pow", x, y, x.dtype());
  // d x^y/dx = y x^(y-1); d x^y/dy = x^y log(x), taken as 0 where x <= 0 (no real log there;
  // PyTorch gives NaN for x < 0).
  return record("pow", out, {a, b},
                [x = x.detach(), y = y.detach(), out = out.detach(), ga = a.requires_grad(),
                 gb = b.requires_grad()](const Tensor& g) -> std::vector<Tensor> {
                  const Tensor X = saved_input(x, 0), Y = saved_input(y, 1);
                  Tensor dx, dy;
                  if (ga) dx = sum_to(g * Y * pow(X, Y - 1.0), x.shape());
                  if (gb)
                    dy = sum_to(g * where(gt(X, like(x, 0)), saved_output(out) * log(X), like(x, 0)), y.shape());
                  return {dx, dy};
                },
                Saves::InputsAndOutput);
}

namespace {
// maximum/minimum backward: the gradient goes to the operand that won, and is split half/half
// on ties (as PyTorch does), so that the sum of both gradients is always g.
Tensor winner_grad(const Tensor& g, const Tensor& wins, const Tensor& ties, const Shape& shape) {
  return sum_to(where(wins, g, where(ties, g * 0.5, like(g, 0))), shape);
}

Tensor min_or_max(std::string_view op, BinaryOp k, const Tensor& a, const Tensor& b) {
  auto [x, y] = operands(op, a, b, Kind::Arith);
  const bool is_max = k == BinaryOp::Maximum;
  return record(std::string(op), apply(k, op, x, y, x.dtype()), {a, b},
                [x = x.detach(), y = y.detach(), is_max, ga = a.requires_grad(), gb = b.requires_grad()](
                    const Tensor& g) -> std::vector<Tensor> {
                  Tensor ties = eq(x, y);
                  return {ga ? winner_grad(g, is_max ? gt(x, y) : lt(x, y), ties, x.shape()) : Tensor(),
                          gb ? winner_grad(g, is_max ? lt(x, y) : gt(x, y), ties, y.shape()) : Tensor()};
                });
}
}  // namespace

Tensor maximum(const Tensor& a, const Tensor& b) { return min_or_max("maximum", BinaryOp::Maximum, a, b); }
Tensor minimum(const Tensor& a, const Tensor& b) { return min_or_max("minimum", BinaryOp::Minimum, a, b); }

// ---------------------------------------------------------------------------------------------
// comparisons: a bool result, nothing recorded

namespace {
Tensor compare(std::string_view op, BinaryOp k, const Tensor& a, const Tensor& b) {
  auto [x, y] = operands(op, a, b, Kind::Any);
  return apply(k, op, x, y, DType::Bool);
}
}  // namespace

Tensor eq(const Tensor& a, const Tensor& b) { return compare("eq", BinaryOp::Eq, a, b); }
Tensor ne(const Tensor& a, const Tensor& b) { return compare("ne", BinaryOp::Ne, a, b); }
Tensor lt(const Tensor& a, const Tensor& b) { return compare("lt", BinaryOp::Lt, a, b); }
Tensor le(const Tensor& a, const Tensor& b) { return compare("le", BinaryOp::Le, a, b); }
Tensor gt(const Tensor& a, const Tensor& b) { return compare("gt", BinaryOp::Gt, a, b); }
Tensor ge(const Tensor& a, const Tensor& b) { return compare("ge", BinaryOp::Ge, a, b); }

// ---------------------------------------------------------------------------------------------
// where, tril, triu

Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b) {
  LINEA_CHECK(cond.dtype() == DType::Bool, "[where] cond must be bool, got {}", cond.dtype());
  LINEA_CHECK(cond.device() == a.device(), "[where] cond is on {} but the operands on {}", cond.device(), a.device());
  auto [x, y] = operands("where", a, b, Kind::Any);
  Shape shape = broadcast_shapes("where", cond.shape(), broadcast_shapes("where", x.shape(), y.shape()));
  Tensor out = empty(shape, x.dtype(), x.device());
  backend(x.device()).where(expand_to(cond, shape), expand_to(x, shape), expand_to(y, shape), out);
  // Each branch gets g where it was picked and 0 elsewhere; cond gets nothing.
  return record("where", out, {cond, a, b},
                [c = cond.detach(), sa = a.shape(), sb = b.shape(), ga = a.requires_grad(),
                 gb = b.requires_grad()](const Tensor& g) -> std::vector<Tensor> {
                  Tensor zero = like(g, 0);
                  return {Tensor(), ga ? sum_to(where(c, g, zero), sa) : Tensor(),
                          gb ? sum_to(where(c, zero, g), sb) : Tensor()};
                });
}

// tril/triu are a where() with a [rows, cols] mask broadcast over the batch dims, so their
// gradient (the same mask applied to g) comes from where's backward.
Tensor tril(const Tensor& x, int64_t k) {
  LINEA_CHECK(x.dim() >= 2, "[tril] needs at least 2 dims, got shape {}", shape_str(x.shape()));
  return where(tril_mask(x.size(-2), x.size(-1), k, x.device()), x, like(x, 0));
}

Tensor triu(const Tensor& x, int64_t k) {
  LINEA_CHECK(x.dim() >= 2, "[triu] needs at least 2 dims, got shape {}", shape_str(x.shape()));
  return where(triu_mask(x.size(-2), x.size(-1), k, x.device()), x, like(x, 0));
}

// ---------------------------------------------------------------------------------------------
// operators

Tensor operator-(const Tensor& x) { return neg(x); }
Tensor operator+(const Tensor& a, const Tensor& b) { return add(a, b); }
Tensor operator-(const Tensor& a, const Tensor& b) { return sub(a, b); }
Tensor operator*(const Tensor& a, const Tensor& b) { return mul(a, b); }
Tensor operator/(const Tensor& a, const Tensor& b) { return div(a, b); }
Tensor operator+(const Tensor& a, double b) { return add(a, like(a, b)); }
Tensor operator-(const Tensor& a, double b) { return sub(a, like(a, b)); }
Tensor operator*(const Tensor& a, double b) { return mul(a, like(a, b)); }
Tensor operator/(const Tensor& a, double b) { return div(a, like(a, b)); }
Tensor operator+(double a, const Tensor& b) { return add(like(b, a), b); }
Tensor operator-(double a, const Tensor& b) { return sub(like(b, a), b); }
Tensor operator*(double a, const Tensor& b) { return mul(like(b, a), b); }
Tensor operator/(double a, const Tensor& b) { return div(like(b, a), b); }

}  // namespace linea
