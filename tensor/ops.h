// The ops every backend implements, each elementwise op defined once: its enum value, its name
// in errors, the dtypes it takes and its formula on one element. The CPU kernels
// (tensor/cpu/cpu_elementwise.cpp) and the CUDA kernels (cuda/elementwise.cu) both run the
// formulas from these tables, so a new elementwise op is one line here (docs/testing.md, "Adding an op").
//
// Plain C++ with no fmt and no Tensor: nvcc compiles it too. A formula is an expression in
//   v (unary) or a, b (binary): the elements, of type T
//   p0, p1: the op's two double parameters, converted to T (clamp's bounds, pow's exponent)
//   M: the device's libm, M::exp, M::log, M::log1p, M::sqrt, M::tanh, M::pow, and
//      M::erfc_tail(z, e) = erfc(z) for z >= 0 where the caller already holds e = exp(-z^2). The
//      CPU passes its vectorisable float32 exp and erfc (vec_math.h), CUDA its expf/erfcf, so the
//      two agree to a few ulp in float32 and exactly where both call the same libm function.
#pragma once
#include <type_traits>

#include "linea/tensor/dtype.h"
#include "linea/tensor/feature_map.h"

#ifdef __CUDACC__
#define LINEA_HD __host__ __device__ __forceinline__
#else
#define LINEA_HD inline
#endif

namespace linea {

// Which dtypes an op has a kernel for. Unary: Integer = every dtype but bool, Floating = float32
// and float64. Binary: Compare = every dtype (the result is bool), Arith = all but bool,
// Floating = float32 and float64.
enum class Domain { Integer, Floating, Compare, Arith };

template <class T>
constexpr bool in_domain(Domain d) {
  if constexpr (std::is_same_v<T, bool>) return d == Domain::Compare;
  else if constexpr (std::is_floating_point_v<T>) return true;
  else return d != Domain::Floating;
}

namespace op_math {

constexpr double kSqrt2OverPi = 0.7978845608028654;  // sqrt(2/pi)
constexpr double kGeluC = 0.044715;
constexpr double kInvSqrt2 = 0.7071067811865476;
constexpr double kInvSqrt2Pi = 0.3989422804014327;  // 1/sqrt(2 pi)

// NaN is the only value unequal to itself; integers have none.
template <class T>
LINEA_HD bool is_nan(T v) {
  if constexpr (std::is_floating_point_v<T>) return v != v;
  else return false;
}

// max(v, 0) with NaN propagated like PyTorch's relu (a bare "v > 0 ? v : 0" turns NaN into 0).
// Shared by the relu op and MHLA's relu feature maps on both backends.
template <class T>
LINEA_HD T relu(T v) {
  return (v > T(0) || is_nan(v)) ? v : T(0);
}

// uint8 has no negative values (and compilers warn about comparing it with 0).
template <class T>
LINEA_HD T abs(T v) {
  if constexpr (std::is_unsigned_v<T>) return v;
  else return v < T(0) ? T(-v) : v;
}
template <class T>
LINEA_HD T sign(T v) {
  if constexpr (std::is_unsigned_v<T>) return T(v > T(0));
  else return T((v > T(0)) - (v < T(0)));
}

// 1 / (1 + exp(-x)), stable for every x through IEEE infinities: exp(-x) = inf gives 0, and for
// large x exp(-x) = 0 gives 1. The branchy "e = exp(-|x|); x >= 0 ? 1/(1+e) : e/(1+e)" is slower
// on the CPU on random signs (measured: docs/benchmarks.md, "LayerNorm, lane sums and elementwise
// math"). Requires no -ffinite-math-only.
template <class M, class T>
LINEA_HD T sigmoid(T x) {
  return T(1) / (T(1) + M::exp(-x));
}

// GPT-2's 0.5 x (1 + tanh(u)), u = sqrt(2/pi) (x + 0.044715 x^3), computed as x sigmoid(2u):
// the same function, and an exp vectorises on the CPU where libm's tanh does not.
template <class M, class T>
LINEA_HD T gelu_tanh_sigmoid(T v) {
  return sigmoid<M>(T(2) * T(kSqrt2OverPi) * (v + T(kGeluC) * v * v * v));
}

// d/dx x s(2u) = s + 2 x s (1 - s) u', given s = gelu_tanh_sigmoid(x)
template <class T>
LINEA_HD T gelu_tanh_grad_from(T v, T s) {
  const T k = T(kSqrt2OverPi), c = T(kGeluC);
  const T ds = s * (T(1) - s);
  // Once the sigmoid has saturated, ds is 0 and the second term must be too (x^2 may be inf).
  return s + (ds == T(0) ? T(0) : T(2) * v * ds * k * (T(1) + T(3) * c * v * v));
}
template <class M, class T>
LINEA_HD T gelu_tanh_grad(T v) {
  return gelu_tanh_grad_from(v, gelu_tanh_sigmoid<M>(v));
}

// The standard normal's Phi(x), given e = exp(-x^2/2), which GELU's derivative needs anyway for
// phi(x) = e / sqrt(2 pi). The left tail Phi(-|x|) = erfc(|x|/sqrt2)/2 keeps the far negative
// side accurate, where 1 + erf(x/sqrt2) would cancel to 0; and the CPU's erfc reuses e.
template <class M, class T>
LINEA_HD T normal_cdf(T v, T e) {
  const T tail = T(0.5) * M::erfc_tail(abs(v) * T(kInvSqrt2), e);
  return v < T(0) ? tail : T(1) - tail;
}

// d/dx x Phi(x) = Phi(x) + x phi(x), given e = exp(-x^2/2) and cdf = Phi(x)
template <class T>
LINEA_HD T gelu_erf_grad_from(T v, T e, T cdf) {
  return cdf + v * T(kInvSqrt2Pi) * e;
}
template <class M, class T>
LINEA_HD T gelu_erf_grad(T v) {
  const T e = M::exp(T(-0.5) * v * v);
  return gelu_erf_grad_from(v, e, normal_cdf<M>(v, e));
}

template <class T>
LINEA_HD T silu_grad_from(T v, T s) {  // s = sigmoid(x)
  return s * (T(1) + v * (T(1) - s));
}
template <class M, class T>
LINEA_HD T silu_grad(T v) {
  return silu_grad_from(v, sigmoid<M>(v));
}

// An activation and its derivative from one evaluation (Backend::activation_with_grad): f(x) is
// returned and f'(x) written to d, sharing the exp that both need. The expressions are the unary
// op's and its *Backward's above, so the values are theirs.
template <class M, class T>
LINEA_HD T gelu_erf_with_grad(T v, T& d) {
  const T e = M::exp(T(-0.5) * v * v);
  const T cdf = normal_cdf<M>(v, e);
  d = gelu_erf_grad_from(v, e, cdf);
  return v * cdf;
}
template <class M, class T>
LINEA_HD T gelu_tanh_with_grad(T v, T& d) {
  const T s = gelu_tanh_sigmoid<M>(v);
  d = gelu_tanh_grad_from(v, s);
  return v * s;
}
template <class M, class T>
LINEA_HD T silu_with_grad(T v, T& d) {
  const T s = sigmoid<M>(v);
  d = silu_grad_from(v, s);
  return v * s;
}

}  // namespace op_math

// X(Enum, "name", Domain, formula): every unary op. ClampMask is the derivative clamp's backward
// evaluates at x (autograd/ops_elementwise.cpp).
// Every formula propagates NaN like PyTorch: a NaN input gives a NaN output (a comparison with NaN
// is false, so max/min-style selects test for it). Sign and ClampMask, the derivatives abs and
// clamp's backward multiply by, are 0 at NaN, as in PyTorch's. `linea-check nan` checks every op.
#define LINEA_UNARY_OPS(X)                                                                         \
  X(Neg, "neg", Integer, T(-v))                                                                    \
  X(Exp, "exp", Floating, M::exp(v))                                                               \
  X(Log, "log", Floating, M::log(v))                                                               \
  X(Sqrt, "sqrt", Floating, M::sqrt(v))                                                            \
  X(Rsqrt, "rsqrt", Floating, T(1) / M::sqrt(v))                                                   \
  X(Tanh, "tanh", Floating, M::tanh(v))                                                            \
  X(Sin, "sin", Floating, M::sin(v))                                                               \
  X(Cos, "cos", Floating, M::cos(v))                                                               \
  X(Sigmoid, "sigmoid", Floating, op_math::sigmoid<M>(v))                                          \
  X(Relu, "relu", Integer, op_math::relu(v))                                                          \
  X(GeluTanh, "gelu", Floating, v * op_math::gelu_tanh_sigmoid<M>(v))                              \
  X(GeluErf, "gelu", Floating, v * op_math::normal_cdf<M>(v, M::exp(T(-0.5) * v * v)))             \
  X(Silu, "silu", Floating, v * op_math::sigmoid<M>(v))                                            \
  X(Abs, "abs", Integer, op_math::abs(v))                                                          \
  X(Sign, "sign", Integer, op_math::sign(v))                                                       \
  X(PowScalar, "pow", Floating, M::pow(v, p0))                                                     \
  X(Clamp, "clamp", Integer, v < p0 ? p0 : (v > p1 ? p1 : v))                                      \
  /* log(1 + e^x) = max(x, 0) + log1p(e^-|x|): no overflow for large x, no cancellation */         \
  X(Softplus, "softplus", Floating, op_math::relu(v) + M::log1p(M::exp(-op_math::abs(v))))            \
  X(ClampMask, "clamp_mask", Integer, T(v >= p0 && v <= p1)) /* 1 inside [p0, p1], else 0 */

// X(Enum, "name", Domain, formula): every binary op. Comparisons write a bool. The *Backward
// entries are activations' backwards, a = the incoming gradient and b = the forward's input x:
// one pass over memory instead of a derivative kernel and then a multiply.
#define LINEA_BINARY_OPS(X)                                                                        \
  X(Add, "add", Arith, T(a + b))                                                                   \
  X(Sub, "sub", Arith, T(a - b))                                                                   \
  X(Mul, "mul", Arith, T(a * b))                                                                   \
  X(Div, "div", Floating, T(a / b))                                                                \
  X(Pow, "pow", Floating, M::pow(a, b))                                                            \
  /* NaN propagates like PyTorch: a != a is true only for NaN */                                   \
  X(Maximum, "maximum", Arith, (a > b || a != a) ? a : b)                                          \
  X(Minimum, "minimum", Arith, (a < b || a != a) ? a : b)                                          \
  X(Eq, "eq", Compare, a == b)                                                                     \
  X(Ne, "ne", Compare, a != b)                                                                     \
  X(Lt, "lt", Compare, a < b)                                                                      \
  X(Le, "le", Compare, a <= b)                                                                     \
  X(Gt, "gt", Compare, a > b)                                                                      \
  X(Ge, "ge", Compare, a >= b)                                                                     \
  X(ReluBackward, "relu_backward", Floating, a * T(b > T(0)))                                      \
  X(GeluTanhBackward, "gelu_tanh_backward", Floating, a * op_math::gelu_tanh_grad<M>(b))           \
  X(GeluErfBackward, "gelu_erf_backward", Floating, a * op_math::gelu_erf_grad<M>(b))              \
  X(SiluBackward, "silu_backward", Floating, a * op_math::silu_grad<M>(b))

#define LINEA_OP_ENUM(Name, ...) Name,
enum class UnaryOp { LINEA_UNARY_OPS(LINEA_OP_ENUM) };
enum class BinaryOp { LINEA_BINARY_OPS(LINEA_OP_ENUM) };
#undef LINEA_OP_ENUM

// Reductions are not elementwise: each backend writes its own kernels (reduce.cu, cpu_reduce.cpp).
enum class ReduceOp { Sum, Max, Min, ArgMax, LogSumExp };

// Unary<UnaryOp::X> / Binary<BinaryOp::X>: the table entry as a type. name and domain, and
// apply<M>(...) evaluating the formula with the libm M.
template <UnaryOp op> struct Unary;
template <BinaryOp op> struct Binary;

#define LINEA_UNARY_TYPE(Name, str, dom, ...)                                        \
  template <> struct Unary<UnaryOp::Name> {                                          \
    static constexpr const char* name = str;                                         \
    static constexpr Domain domain = Domain::dom;                                    \
    template <class M, class T>                                                      \
    static LINEA_HD T apply(T v, [[maybe_unused]] T p0, [[maybe_unused]] T p1) {     \
      return __VA_ARGS__;                                                            \
    }                                                                                \
  };
LINEA_UNARY_OPS(LINEA_UNARY_TYPE)
#undef LINEA_UNARY_TYPE

#define LINEA_BINARY_TYPE(Name, str, dom, ...)                      \
  template <> struct Binary<BinaryOp::Name> {                       \
    static constexpr const char* name = str;                        \
    static constexpr Domain domain = Domain::dom;                   \
    template <class M, class T>                                     \
    static LINEA_HD auto apply(T a, T b) {                          \
      return __VA_ARGS__;                                           \
    }                                                               \
  };
LINEA_BINARY_OPS(LINEA_BINARY_TYPE)
#undef LINEA_BINARY_TYPE

// visit(op, f) calls f.template operator()<Unary<op>>() (or Binary<op>) for a runtime op: the
// one switch over the table, which the backends' kernels and the name lookups share.
template <class F>
decltype(auto) visit(UnaryOp op, F&& f) {
#define LINEA_UNARY_CASE(Name, ...) \
  case UnaryOp::Name: return f.template operator()<Unary<UnaryOp::Name>>();
  switch (op) { LINEA_UNARY_OPS(LINEA_UNARY_CASE) }
#undef LINEA_UNARY_CASE
  return f.template operator()<Unary<UnaryOp::Neg>>();  // not reached: the switch covers every op
}

template <class F>
decltype(auto) visit(BinaryOp op, F&& f) {
#define LINEA_BINARY_CASE(Name, ...) \
  case BinaryOp::Name: return f.template operator()<Binary<BinaryOp::Name>>();
  switch (op) { LINEA_BINARY_OPS(LINEA_BINARY_CASE) }
#undef LINEA_BINARY_CASE
  return f.template operator()<Binary<BinaryOp::Add>>();  // not reached
}

// The activations Backend::activation_with_grad evaluates with their derivative, and the
// backward op each has in the binary table (its default implementation's second pass).
inline bool has_activation_grad(UnaryOp op) {
  return op == UnaryOp::GeluErf || op == UnaryOp::GeluTanh || op == UnaryOp::Silu;
}
inline BinaryOp activation_backward_op(UnaryOp op) {
  return op == UnaryOp::GeluErf    ? BinaryOp::GeluErfBackward
         : op == UnaryOp::GeluTanh ? BinaryOp::GeluTanhBackward
                                   : BinaryOp::SiluBackward;
}

// The name errors carry and the domain, looked up in the tables.
inline const char* op_name(UnaryOp op) {
  switch (op) {
#define LINEA_CASE(Name, str, dom, ...) \
  case UnaryOp::Name: return str;
    LINEA_UNARY_OPS(LINEA_CASE)
#undef LINEA_CASE
  }
  return "?";  // not reached
}
inline const char* op_name(BinaryOp op) {
  switch (op) {
#define LINEA_CASE(Name, str, dom, ...) \
  case BinaryOp::Name: return str;
    LINEA_BINARY_OPS(LINEA_CASE)
#undef LINEA_CASE
  }
  return "?";  // not reached
}
inline Domain op_domain(UnaryOp op) {
  switch (op) {
#define LINEA_CASE(Name, str, dom, ...) \
  case UnaryOp::Name: return Domain::dom;
    LINEA_UNARY_OPS(LINEA_CASE)
#undef LINEA_CASE
  }
  return Domain::Floating;  // not reached
}
inline Domain op_domain(BinaryOp op) {
  switch (op) {
#define LINEA_CASE(Name, str, dom, ...) \
  case BinaryOp::Name: return Domain::dom;
    LINEA_BINARY_OPS(LINEA_CASE)
#undef LINEA_CASE
  }
  return Domain::Floating;  // not reached
}

}  // namespace linea
