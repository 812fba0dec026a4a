// CPU elementwise kernels: unary math (and the derivatives backward needs), binary arithmetic and
// comparisons, where.
//
// Every kernel has the same shape: for_each_run (strided.h) hands over runs along the innermost
// dim and splits big tensors over OpenMP threads. Inside a run, contiguous operands get a plain
// indexed loop that -O3 vectorises for each ISA (isa_begin.h); broadcast operands (stride 0) are hoisted out of
// the loop; anything else takes the strided loop. The op is picked by a switch *outside* the loop,
// so each inner loop is one small lambda the compiler inlines. The formulas are ops.h's tables,
// shared with the CUDA kernels.
#include <cmath>
#include <limits>
#include <type_traits>

#include "linea/tensor/kernel_checks.h"
#include "linea/tensor/cpu/vec_math.h"

namespace linea::cpu {
namespace {
// The CPU's libm for the formulas of ops.h: float32 exp and erfc are vec_math.h's polynomials,
// which GCC vectorises (libm's are scalar calls); everything else, and float64, is libm. Compiled
// for the baseline like ops.h, whose formulas call it: they inline into each ISA's kernels.
struct CpuMath {
  template <class T> static T exp(T v) { return vexp(v); }
  template <class T> static T erfc_tail(T z, T e) {
    if constexpr (std::is_same_v<T, float>) return e * erfcx_f32(z);
    else return std::erfc(z);
  }
  template <class T> static T log(T v) { return std::log(v); }
  template <class T> static T log1p(T v) { return std::log1p(v); }
  template <class T> static T sqrt(T v) { return std::sqrt(v); }
  template <class T> static T tanh(T v) { return std::tanh(v); }
  template <class T> static T sin(T v) { return std::sin(v); }
  template <class T> static T cos(T v) { return std::cos(v); }
  template <class T> static T pow(T v, T p) { return std::pow(v, p); }
};
}  // namespace
}  // namespace linea::cpu

#include "linea/tensor/cpu/isa_begin.h"
#include "linea/tensor/cpu/cpu_backend.h"
#include "linea/tensor/cpu/strided.h"

namespace linea::cpu::inline LINEA_ISA_NS {

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

// y[i] = f(x[i], d[i]): two contiguous outputs, the function returning one and writing the other.
template <class T, class F>
void map1_2(const Tensor& x, const Tensor& y, const Tensor& d, F f) {
  const T* px = x.data<T>();
  T* py = y.data<T>();
  T* pd = d.data<T>();
  for_each_run<3>(y.shape(), {&y.strides(), &d.strides(), &x.strides()}, [&](const Off3& off, int64_t n, const Off3& st) {
    T* yo = py + off[0];
    T* dd = pd + off[1];
    const T* a = px + off[2];
    if (st[2] == 1) {
      for (int64_t i = 0; i < n; ++i) yo[i] = f(a[i], dd[i]);
    } else {
      for (int64_t i = 0; i < n; ++i) yo[i] = f(a[i * st[2]], dd[i]);
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


// The table entry of ops.h for op, run over every element when T is in its domain.
template <class T>
void unary_typed(UnaryOp op, const Tensor& x, const Tensor& out, double p0d, double p1d) {
  const T p0 = param<T>(p0d), p1 = param<T>(p1d);
  const bool ran = visit(op, [&]<class Op>() {
    if constexpr (in_domain<T>(Op::domain)) {
      map1<T, T>(x, out, [=](T v) { return Op::template apply<CpuMath>(v, p0, p1); });
      return true;
    }
    return false;
  });
  if (!ran) kernel_checks::unary_unsupported(op, dtype_v<T>);
}

template <class T>
void binary_typed(BinaryOp op, const Tensor& a, const Tensor& b, const Tensor& out) {
  const bool ran = visit(op, [&]<class Op>() {
    if constexpr (in_domain<T>(Op::domain)) {
      using O = std::conditional_t<Op::domain == Domain::Compare, bool, T>;
      map2<O, T>(a, b, out, [](T x, T y) { return O(Op::template apply<CpuMath>(x, y)); });
      return true;
    }
    return false;
  });
  if (!ran) kernel_checks::binary_unsupported(op, dtype_v<T>);
}

}  // namespace

void CpuBackend::do_unary(UnaryOp op, const Tensor& x, const Tensor& out, double p0, double p1) {
  dispatch(x.dtype(), [&]<class T>() { unary_typed<T>(op, x, out, p0, p1); });
}

void CpuBackend::do_binary(BinaryOp op, const Tensor& a, const Tensor& b, const Tensor& out) {
  dispatch(a.dtype(), [&]<class T>() { binary_typed<T>(op, a, b, out); });
}

void CpuBackend::do_activation_with_grad(UnaryOp op, const Tensor& x, const Tensor& y, const Tensor& dydx) {
  dispatch_floating(x.dtype(), "activation_with_grad", [&]<class T>() {
    switch (op) {
      case UnaryOp::GeluErf:
        return map1_2<T>(x, y, dydx, [](T v, T& d) { return op_math::gelu_erf_with_grad<CpuMath>(v, d); });
      case UnaryOp::GeluTanh:
        return map1_2<T>(x, y, dydx, [](T v, T& d) { return op_math::gelu_tanh_with_grad<CpuMath>(v, d); });
      default:  // Silu: kernel_checks admits no other op
        return map1_2<T>(x, y, dydx, [](T v, T& d) { return op_math::silu_with_grad<CpuMath>(v, d); });
    }
  });
}

void CpuBackend::do_where(const Tensor& cond, const Tensor& a, const Tensor& b, const Tensor& out) {
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

}  // namespace linea::cpu::inline LINEA_ISA_NS

#include "linea/tensor/cpu/isa_end.h"
