// CPU elementwise kernels: unary math (and the derivatives backward needs), binary arithmetic and
// comparisons, where.
//
// Every kernel has the same shape: for_each_run (strided.h) hands over runs along the innermost
// dim and splits big tensors over OpenMP threads. Inside a run, contiguous operands get a plain
// indexed loop that -O3 -march=native vectorises; broadcast operands (stride 0) are hoisted out of
// the loop; anything else takes the strided loop. The op is picked by a switch *outside* the loop,
// so each inner loop is one small lambda the compiler inlines.
#include <cmath>
#include <limits>
#include <type_traits>

#include "linea/tensor/cpu/cpu_backend.h"
#include "linea/tensor/cpu/strided.h"
#include "linea/tensor/cpu/vec_math.h"
#include "linea/tensor/kernel_checks.h"

namespace linea::cpu {

namespace {

using Off2 = std::array<int64_t, 2>;
using Off3 = std::array<int64_t, 3>;

// out[i] = f(x[i]); out is contiguous, so its inner stride is always 1.
template <class O, class T, class F>
void map1(const Tensor& x, const Tensor& out, F f) {
  const T* px = x.data<T>();
  O* po = out.data<O>();
  for_each_run<2>(out.shape(), {&out.strides(), &x.strides()}, [&](const Off2& off, int64_t n, const Off2& st) {
    O* o = po + off[0];
    const T* a = px + off[1];
    if (st[1] == 1) {
      for (int64_t i = 0; i < n; ++i) o[i] = f(a[i]);
    } else {
      for (int64_t i = 0; i < n; ++i) o[i] = f(a[i * st[1]]);
    }
  });
}

// out[i] = f(a[i], b[i]).
template <class O, class T, class F>
void map2(const Tensor& a, const Tensor& b, const Tensor& out, F f) {
  const T* pa = a.data<T>();
  const T* pb = b.data<T>();
  O* po = out.data<O>();
  for_each_run<3>(out.shape(), {&out.strides(), &a.strides(), &b.strides()},
                  [&](const Off3& off, int64_t n, const Off3& st) {
                    O* o = po + off[0];
                    const T* x = pa + off[1];
                    const T* y = pb + off[2];
                    if (st[1] == 1 && st[2] == 1) {
                      for (int64_t i = 0; i < n; ++i) o[i] = f(x[i], y[i]);
                    } else if (st[1] == 1 && st[2] == 0) {  // b broadcast along the run (a scalar, say)
                      const T yv = *y;
                      for (int64_t i = 0; i < n; ++i) o[i] = f(x[i], yv);
                    } else if (st[1] == 0 && st[2] == 1) {
                      const T xv = *x;
                      for (int64_t i = 0; i < n; ++i) o[i] = f(xv, y[i]);
                    } else {
                      for (int64_t i = 0; i < n; ++i) o[i] = f(x[i * st[1]], y[i * st[2]]);
                    }
                  });
}

// A double parameter as T; for integers, saturate first (casting an out-of-range double, such as
// clamp's +-inf bounds, to an integer is undefined behaviour).
template <class T>
T param(double v) {
  if constexpr (std::is_integral_v<T>) {
    if (v >= static_cast<double>(std::numeric_limits<T>::max())) return std::numeric_limits<T>::max();
    if (v <= static_cast<double>(std::numeric_limits<T>::lowest())) return std::numeric_limits<T>::lowest();
  }
  return static_cast<T>(v);
}

// sigmoid, stable for every x: for x < -88 (float32) exp(-x) overflows to +inf and 1/(1+inf) = 0
// is the right answer; for large x, exp(-x) = 0 gives 1 (vexp keeps both ends, see vec_math.h). IEEE infinities make the branch-free form
// exact at both ends, and the branchy "e = exp(-|x|); x >= 0 ? 1/(1+e) : e/(1+e)" ran 4x slower
// on random signs (measured). Requires no -ffinite-math-only.
template <class T>
T sigmoid(T x) {
  return T(1) / (T(1) + vexp(-x));
}

constexpr double kSqrt2OverPi = 0.7978845608028654;  // sqrt(2/pi)
constexpr double kGeluC = 0.044715;
constexpr double kInvSqrt2 = 0.7071067811865476;
constexpr double kInvSqrt2Pi = 0.3989422804014327;  // 1/sqrt(2 pi)

template <class T>
void unary_typed(UnaryOp op, const Tensor& x, const Tensor& out, double p0d, double p1d) {
  const T p0 = param<T>(p0d), p1 = param<T>(p1d);
  // Ops that make sense for integers too.
  switch (op) {
    case UnaryOp::Neg: return map1<T, T>(x, out, [](T v) { return T(-v); });
    case UnaryOp::Abs: return map1<T, T>(x, out, [](T v) { return v < 0 ? T(-v) : v; });
    case UnaryOp::Sign: return map1<T, T>(x, out, [](T v) { return T((v > 0) - (v < 0)); });
    case UnaryOp::Relu: return map1<T, T>(x, out, [](T v) { return v > 0 ? v : T(0); });
    // max/min written so that NaN propagates (a comparison with NaN is false).
    case UnaryOp::Clamp: return map1<T, T>(x, out, [=](T v) { return v < p0 ? p0 : (v > p1 ? p1 : v); });
    case UnaryOp::ClampMask: return map1<T, T>(x, out, [=](T v) { return T(v >= p0 && v <= p1); });
    default: break;
  }
  if constexpr (std::is_floating_point_v<T>) {
    const T k = T(kSqrt2OverPi), c = T(kGeluC);
    switch (op) {
      case UnaryOp::Exp: return map1<T, T>(x, out, [](T v) { return vexp(v); });
      case UnaryOp::Log: return map1<T, T>(x, out, [](T v) { return std::log(v); });
      case UnaryOp::Sqrt: return map1<T, T>(x, out, [](T v) { return std::sqrt(v); });
      case UnaryOp::Rsqrt: return map1<T, T>(x, out, [](T v) { return T(1) / std::sqrt(v); });
      case UnaryOp::Tanh: return map1<T, T>(x, out, [](T v) { return std::tanh(v); });
      case UnaryOp::Sigmoid: return map1<T, T>(x, out, [](T v) { return sigmoid(v); });
      case UnaryOp::Silu: return map1<T, T>(x, out, [](T v) { return v * sigmoid(v); });
      case UnaryOp::PowScalar: return map1<T, T>(x, out, [=](T v) { return std::pow(v, p0); });
      // GPT-2's 0.5 x (1 + tanh(u)), u = sqrt(2/pi) (x + 0.044715 x^3), computed as x sigmoid(2u):
      // the same function, and our exp vectorises where libm's tanh does not.
      case UnaryOp::GeluTanh:
        return map1<T, T>(x, out, [=](T v) { return v * sigmoid(T(2) * k * (v + c * v * v * v)); });
      case UnaryOp::GeluErf:
        // x * Phi(x) with Phi(x) = erfc(-x/sqrt2)/2: erfc keeps the far negative tail accurate,
        // where 1 + erf(x/sqrt2) would cancel to 0.
        return map1<T, T>(x, out, [](T v) { return T(0.5) * v * verfc(-v * T(kInvSqrt2)); });
      case UnaryOp::ReluGrad: return map1<T, T>(x, out, [](T v) { return T(v > 0); });
      case UnaryOp::SiluGrad:
        return map1<T, T>(x, out, [](T v) {
          const T s = sigmoid(v);
          return s * (T(1) + v * (T(1) - s));
        });
      case UnaryOp::GeluTanhGrad:  // d/dx x s(2u) = s + 2 x s (1 - s) u'
        return map1<T, T>(x, out, [=](T v) {
          const T s = sigmoid(T(2) * k * (v + c * v * v * v));
          const T ds = s * (T(1) - s);
          // Once the sigmoid has saturated, ds is 0 and the second term must be too (x^2 may be inf).
          return s + (ds == 0 ? T(0) : T(2) * v * ds * k * (T(1) + T(3) * c * v * v));
        });
      case UnaryOp::GeluErfGrad:  // Phi(x) + x phi(x)
        return map1<T, T>(x, out, [](T v) {
          return T(0.5) * verfc(-v * T(kInvSqrt2)) + v * T(kInvSqrt2Pi) * vexp(T(-0.5) * v * v);
        });
      default: break;
    }
  }
  kernel_checks::unary_unsupported(op, dtype_v<T>);
}

template <class T>
void binary_typed(BinaryOp op, const Tensor& a, const Tensor& b, const Tensor& out) {
  switch (op) {
    case BinaryOp::Eq: return map2<bool, T>(a, b, out, [](T x, T y) { return x == y; });
    case BinaryOp::Ne: return map2<bool, T>(a, b, out, [](T x, T y) { return x != y; });
    case BinaryOp::Lt: return map2<bool, T>(a, b, out, [](T x, T y) { return x < y; });
    case BinaryOp::Le: return map2<bool, T>(a, b, out, [](T x, T y) { return x <= y; });
    case BinaryOp::Gt: return map2<bool, T>(a, b, out, [](T x, T y) { return x > y; });
    case BinaryOp::Ge: return map2<bool, T>(a, b, out, [](T x, T y) { return x >= y; });
    default: break;
  }
  if constexpr (!std::is_same_v<T, bool>) {
    switch (op) {
      case BinaryOp::Add: return map2<T, T>(a, b, out, [](T x, T y) { return T(x + y); });
      case BinaryOp::Sub: return map2<T, T>(a, b, out, [](T x, T y) { return T(x - y); });
      case BinaryOp::Mul: return map2<T, T>(a, b, out, [](T x, T y) { return T(x * y); });
      // NaN propagates like PyTorch: x != x is true only for NaN.
      case BinaryOp::Maximum: return map2<T, T>(a, b, out, [](T x, T y) { return (x > y || x != x) ? x : y; });
      case BinaryOp::Minimum: return map2<T, T>(a, b, out, [](T x, T y) { return (x < y || x != x) ? x : y; });
      default: break;
    }
  }
  if constexpr (std::is_floating_point_v<T>) {
    switch (op) {
      case BinaryOp::Div: return map2<T, T>(a, b, out, [](T x, T y) { return x / y; });
      case BinaryOp::Pow: return map2<T, T>(a, b, out, [](T x, T y) { return std::pow(x, y); });
      default: break;
    }
  }
  kernel_checks::binary_unsupported(op, dtype_v<T>);
}

}  // namespace

void CpuBackend::unary(UnaryOp op, const Tensor& x, const Tensor& out, double p0, double p1) {
  kernel_checks::unary(op, x, out);
  dispatch(x.dtype(), [&]<class T>() {
    if constexpr (std::is_same_v<T, bool>)
      kernel_checks::unary_unsupported(op, DType::Bool);
    else
      unary_typed<T>(op, x, out, p0, p1);
  });
}

void CpuBackend::binary(BinaryOp op, const Tensor& a, const Tensor& b, const Tensor& out) {
  kernel_checks::binary(op, a, b, out);
  dispatch(a.dtype(), [&]<class T>() { binary_typed<T>(op, a, b, out); });
}

void CpuBackend::where(const Tensor& cond, const Tensor& a, const Tensor& b, const Tensor& out) {
  kernel_checks::where(cond, a, b, out);
  dispatch(out.dtype(), [&]<class T>() {
    const bool* pc = cond.data<bool>();
    const T* pa = a.data<T>();
    const T* pb = b.data<T>();
    T* po = out.data<T>();
    using Off4 = std::array<int64_t, 4>;
    for_each_run<4>(out.shape(), {&out.strides(), &cond.strides(), &a.strides(), &b.strides()},
                    [&](const Off4& off, int64_t n, const Off4& st) {
                      T* o = po + off[0];
                      const bool* c = pc + off[1];
                      const T* x = pa + off[2];
                      const T* y = pb + off[3];
                      if (st[1] == 1 && st[2] == 1 && st[3] == 1) {
                        for (int64_t i = 0; i < n; ++i) o[i] = c[i] ? x[i] : y[i];
                      } else {
                        for (int64_t i = 0; i < n; ++i) o[i] = c[i * st[1]] ? x[i * st[2]] : y[i * st[3]];
                      }
                    });
  });
}

}  // namespace linea::cpu
