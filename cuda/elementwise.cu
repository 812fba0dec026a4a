// CUDA elementwise kernels: copy with dtype conversion, fill, unary math (and the derivatives
// backward needs), binary arithmetic and comparisons, where. The formulas are the CPU backend's
// (tensor/cpu/cpu_elementwise.cpp) written again for the device; float32 uses CUDA's expf/erfcf
// where the CPU uses its own vectorisable polynomials (vec_math.h), so the two agree to a few ulp.
//
// Every kernel is one grid-stride loop over the output's elements. The host first coalesces the
// operands' shape (merging dims that are contiguous with each other in every operand, dropping
// size-1 dims, like the CPU's strided.h), then picks one of three paths:
// - all operands contiguous: element i of every operand is at offset i;
// - the same, float32 in and out and 16-byte aligned (unary/binary): float4 loads and stores;
// - anything else: an Indexer turns the linear index into each operand's offset (one division
//   per coalesced dim).
// The element operation is a small functor (Map1, Map2, ...) given the K operand offsets, so one
// kernel template serves every op.
#include <cuda_runtime.h>

#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>

#include "linea/cuda/launch_elementwise.h"

namespace linea::cuda {

namespace {

constexpr int kThreads = 256;

// ---------------------------------------------------------------- indexing

// K operands over one shape (coalesced, at least one dim). Passed to kernels by value.
template <int K>
struct Indexer {
  int ndim = 0;
  int64_t shape[kMaxDims] = {};
  int64_t strides[K][kMaxDims] = {};
};

// off[k] = element offset in operand k of the i-th element (row-major) of the shape.
template <int K>
__device__ __forceinline__ void offsets(const Indexer<K>& ix, int64_t i, int64_t (&off)[K]) {
#pragma unroll
  for (int k = 0; k < K; ++k) off[k] = 0;
  // Fixed trip counts (constant indices) keep shape/strides in parameter space and off[] in
  // registers. Dim 0 needs no division: what is left of i once the inner dims are divided out
  // is already its index.
#pragma unroll
  for (int d = kMaxDims - 1; d >= 1; --d) {
    if (d < ix.ndim) {
      const int64_t q = i / ix.shape[d];
      const int64_t r = i - q * ix.shape[d];
      i = q;
#pragma unroll
      for (int k = 0; k < K; ++k) off[k] += r * ix.strides[k][d];
    }
  }
#pragma unroll
  for (int k = 0; k < K; ++k) off[k] += i * ix.strides[k][0];
}

// ops[0]'s shape is every operand's shape (the callers check this).
template <int K>
Indexer<K> make_indexer(const TensorArg* const (&ops)[K]) {
  Indexer<K> ix;
  const TensorArg& s = *ops[0];
  for (int d = 0; d < s.ndim; ++d) {
    const int64_t n = s.shape[d];
    if (n == 1) continue;
    bool merge = ix.ndim > 0;
    for (int k = 0; merge && k < K; ++k) merge = ix.strides[k][ix.ndim - 1] == ops[k]->strides[d] * n;
    const int at = merge ? ix.ndim - 1 : ix.ndim++;
    ix.shape[at] = merge ? ix.shape[at] * n : n;
    for (int k = 0; k < K; ++k) ix.strides[k][at] = ops[k]->strides[d];
  }
  if (ix.ndim == 0) {  // one element (a scalar or all-ones shape)
    ix.ndim = 1;
    ix.shape[0] = 1;
    for (int k = 0; k < K; ++k) ix.strides[k][0] = 1;
  }
  return ix;
}

template <int K>
bool contiguous(const Indexer<K>& ix) {
  if (ix.ndim != 1) return false;
  for (int k = 0; k < K; ++k)
    if (ix.strides[k][0] != 1) return false;
  return true;
}

bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

// ---------------------------------------------------------------- kernels

// op(off) applies the element operation at the operands' offsets.
template <int K, bool kContiguous, class Op>
__global__ void elementwise_kernel(int64_t n, Indexer<K> ix, Op op) {
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += step) {
    int64_t off[K];
    if constexpr (kContiguous) {
#pragma unroll
      for (int k = 0; k < K; ++k) off[k] = i;
    } else {
      offsets(ix, i, off);
    }
    op(off);
  }
}

// Contiguous, 16-byte aligned float32: one float4 per iteration, then the n % 4 leftovers.
template <class F>
__global__ void map1_f32x4(float* out, const float* x, int64_t n, F f) {
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  const int64_t t = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t n4 = n / 4;
  for (int64_t i = t; i < n4; i += step) {
    const float4 v = reinterpret_cast<const float4*>(x)[i];
    reinterpret_cast<float4*>(out)[i] = make_float4(f(v.x), f(v.y), f(v.z), f(v.w));
  }
  for (int64_t i = 4 * n4 + t; i < n; i += step) out[i] = f(x[i]);
}

template <class F>
__global__ void map2_f32x4(float* out, const float* a, const float* b, int64_t n, F f) {
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  const int64_t t = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t n4 = n / 4;
  for (int64_t i = t; i < n4; i += step) {
    const float4 u = reinterpret_cast<const float4*>(a)[i];
    const float4 v = reinterpret_cast<const float4*>(b)[i];
    reinterpret_cast<float4*>(out)[i] = make_float4(f(u.x, v.x), f(u.y, v.y), f(u.z, v.z), f(u.w, v.w));
  }
  for (int64_t i = 4 * n4 + t; i < n; i += step) out[i] = f(a[i], b[i]);
}

template <int K, class Op>
void launch(const Indexer<K>& ix, int64_t n, const Op& op) {
  if (contiguous(ix))
    elementwise_kernel<K, true><<<blocks_for(n, kThreads), kThreads, 0, stream()>>>(n, ix, op);
  else
    elementwise_kernel<K, false><<<blocks_for(n, kThreads), kThreads, 0, stream()>>>(n, ix, op);
}

// ---------------------------------------------------------------- element operations

// float -> uint8 is undefined in C++ outside [0, 255] and the GPU's conversion saturates; going
// through int64 and keeping the low byte wraps, like the CPU build on x86-64.
template <class D, class S>
__device__ __forceinline__ D convert(S v) {
  if constexpr (std::is_same_v<D, uint8_t> && std::is_floating_point_v<S>)
    return static_cast<uint8_t>(static_cast<int64_t>(v));
  else
    return static_cast<D>(v);  // to bool: v != 0
}

template <class D, class S>
struct Copy {
  D* dst;
  const S* src;
  __device__ void operator()(const int64_t (&off)[2]) const { dst[off[0]] = convert<D>(src[off[1]]); }
};

template <class T>
struct Fill {
  T* dst;
  T value;
  __device__ void operator()(const int64_t (&off)[1]) const { dst[off[0]] = value; }
};

template <class O, class T, class F>
struct Map1 {
  O* out;
  const T* x;
  F f;
  __device__ void operator()(const int64_t (&off)[2]) const { out[off[0]] = f(x[off[1]]); }
};

template <class O, class T, class F>
struct Map2 {
  O* out;
  const T* a;
  const T* b;
  F f;
  __device__ void operator()(const int64_t (&off)[3]) const { out[off[0]] = f(a[off[1]], b[off[2]]); }
};

template <class T>
struct Where {
  T* out;
  const bool* cond;
  const T* a;
  const T* b;
  __device__ void operator()(const int64_t (&off)[4]) const {
    out[off[0]] = cond[off[1]] ? a[off[2]] : b[off[3]];
  }
};

// float and double overloads of the libm functions the ops use (the full-precision versions:
// nvcc does not substitute the fast intrinsics without --use_fast_math).
#define LINEA_MATH1(name, f32, f64)                                    \
  __device__ __forceinline__ float name(float x) { return f32(x); }    \
  __device__ __forceinline__ double name(double x) { return f64(x); }
LINEA_MATH1(dexp, expf, exp)
LINEA_MATH1(dlog, logf, log)
LINEA_MATH1(dsqrt, sqrtf, sqrt)
LINEA_MATH1(dtanh, tanhf, tanh)
LINEA_MATH1(derfc, erfcf, erfc)
#undef LINEA_MATH1
__device__ __forceinline__ float dpow(float x, float y) { return powf(x, y); }
__device__ __forceinline__ double dpow(double x, double y) { return pow(x, y); }

// 1 / (1 + exp(-x)): exact at both ends through IEEE infinities (exp(-x) = inf gives 0).
template <class T>
__device__ __forceinline__ T sigmoid(T x) {
  return T(1) / (T(1) + dexp(-x));
}

constexpr double kSqrt2OverPi = 0.7978845608028654;  // sqrt(2/pi)
constexpr double kGeluC = 0.044715;
constexpr double kInvSqrt2 = 0.7071067811865476;
constexpr double kInvSqrt2Pi = 0.3989422804014327;  // 1/sqrt(2 pi)

template <UOp op, class T>
struct UnaryFn {
  T p0, p1;
  __device__ __forceinline__ T operator()(T v) const {
    if constexpr (op == UOp::Neg) return T(-v);
    // uint8 has no negative values (and nvcc warns about comparing it with 0).
    else if constexpr (op == UOp::Abs && std::is_unsigned_v<T>) return v;
    else if constexpr (op == UOp::Abs) return v < T(0) ? T(-v) : v;
    else if constexpr (op == UOp::Sign && std::is_unsigned_v<T>) return T(v > T(0));
    else if constexpr (op == UOp::Sign) return T((v > T(0)) - (v < T(0)));
    else if constexpr (op == UOp::Relu) return v > T(0) ? v : T(0);
    // max/min written so that NaN propagates (a comparison with NaN is false).
    else if constexpr (op == UOp::Clamp) return v < p0 ? p0 : (v > p1 ? p1 : v);
    else if constexpr (op == UOp::ClampMask) return T(v >= p0 && v <= p1);
    else if constexpr (op == UOp::Exp) return dexp(v);
    else if constexpr (op == UOp::Log) return dlog(v);
    else if constexpr (op == UOp::Sqrt) return dsqrt(v);
    else if constexpr (op == UOp::Rsqrt) return T(1) / dsqrt(v);
    else if constexpr (op == UOp::Tanh) return dtanh(v);
    else if constexpr (op == UOp::Sigmoid) return sigmoid(v);
    else if constexpr (op == UOp::Silu) return v * sigmoid(v);
    else if constexpr (op == UOp::PowScalar) return dpow(v, p0);
    // GPT-2's 0.5 x (1 + tanh(u)), u = sqrt(2/pi) (x + 0.044715 x^3), as x sigmoid(2u).
    else if constexpr (op == UOp::GeluTanh) return v * sigmoid(T(2) * T(kSqrt2OverPi) * (v + T(kGeluC) * v * v * v));
    // x Phi(x), Phi(x) = erfc(-x/sqrt2)/2: erfc keeps the far negative tail accurate.
    else if constexpr (op == UOp::GeluErf) return T(0.5) * v * derfc(-v * T(kInvSqrt2));
    else if constexpr (op == UOp::ReluGrad) return T(v > T(0));
    else if constexpr (op == UOp::SiluGrad) {
      const T s = sigmoid(v);
      return s * (T(1) + v * (T(1) - s));
    } else if constexpr (op == UOp::GeluTanhGrad) {  // d/dx x s(2u) = s + 2 x s (1 - s) u'
      const T k = T(kSqrt2OverPi), c = T(kGeluC);
      const T s = sigmoid(T(2) * k * (v + c * v * v * v));
      const T ds = s * (T(1) - s);
      // Once the sigmoid has saturated, ds is 0 and the second term must be too (x^2 may be inf).
      return s + (ds == T(0) ? T(0) : T(2) * v * ds * k * (T(1) + T(3) * c * v * v));
    } else {
      static_assert(op == UOp::GeluErfGrad);  // Phi(x) + x phi(x)
      return T(0.5) * derfc(-v * T(kInvSqrt2)) + v * T(kInvSqrt2Pi) * dexp(T(-0.5) * v * v);
    }
  }
};

template <BOp op, class T>
struct BinaryFn {
  __device__ __forceinline__ auto operator()(T x, T y) const {
    if constexpr (op == BOp::Add) return T(x + y);
    else if constexpr (op == BOp::Sub) return T(x - y);
    else if constexpr (op == BOp::Mul) return T(x * y);
    else if constexpr (op == BOp::Div) return T(x / y);
    else if constexpr (op == BOp::Pow) return dpow(x, y);
    // NaN propagates like PyTorch: x != x is true only for NaN.
    else if constexpr (op == BOp::Maximum) return (x > y || x != x) ? x : y;
    else if constexpr (op == BOp::Minimum) return (x < y || x != x) ? x : y;
    else if constexpr (op == BOp::Eq) return x == y;
    else if constexpr (op == BOp::Ne) return x != y;
    else if constexpr (op == BOp::Lt) return x < y;
    else if constexpr (op == BOp::Le) return x <= y;
    else if constexpr (op == BOp::Gt) return x > y;
    else {
      static_assert(op == BOp::Ge);
      return x >= y;
    }
  }
};

// ---------------------------------------------------------------- host side

// f.template operator()<T>() with T the element type of t (like linea::dispatch).
template <class F>
decltype(auto) dispatch_dt(Dt t, F&& f) {
  switch (t) {
    case Dt::F32: return f.template operator()<float>();
    case Dt::F64: return f.template operator()<double>();
    case Dt::I64: return f.template operator()<int64_t>();
    case Dt::Bool: return f.template operator()<bool>();
    case Dt::U8: break;
  }
  return f.template operator()<uint8_t>();
}

// Kernels that only move elements (where, same-dtype copy, fill) need the width, not the type.
template <std::size_t N>
using Bits = std::conditional_t<N == 1, uint8_t, std::conditional_t<N == 4, uint32_t, uint64_t>>;

template <class F>
void dispatch_bits(Dt t, F&& f) {
  dispatch_dt(t, [&]<class T>() { f.template operator()<Bits<sizeof(T)>>(); });
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

template <class T, class F>
bool run_map1(const TensorArg& x, const TensorArg& out, F f) {
  const int64_t n = out.numel();
  if (n == 0) return true;
  const TensorArg* ops[2] = {&out, &x};
  const Indexer<2> ix = make_indexer<2>(ops);
  if constexpr (std::is_same_v<T, float>) {
    if (contiguous(ix) && aligned16(out.data) && aligned16(x.data)) {
      map1_f32x4<<<blocks_for((n + 3) / 4, kThreads), kThreads, 0, stream()>>>(
          static_cast<float*>(out.data), static_cast<const float*>(x.data), n, f);
      return true;
    }
  }
  launch(ix, n, Map1<T, T, F>{static_cast<T*>(out.data), static_cast<const T*>(x.data), f});
  return true;
}

template <class T, class O, class F>
bool run_map2(const TensorArg& a, const TensorArg& b, const TensorArg& out, F f) {
  const int64_t n = out.numel();
  if (n == 0) return true;
  const TensorArg* ops[3] = {&out, &a, &b};
  const Indexer<3> ix = make_indexer<3>(ops);
  if constexpr (std::is_same_v<T, float> && std::is_same_v<O, float>) {
    if (contiguous(ix) && aligned16(out.data) && aligned16(a.data) && aligned16(b.data)) {
      map2_f32x4<<<blocks_for((n + 3) / 4, kThreads), kThreads, 0, stream()>>>(
          static_cast<float*>(out.data), static_cast<const float*>(a.data), static_cast<const float*>(b.data), n, f);
      return true;
    }
  }
  launch(ix, n, Map2<O, T, F>{static_cast<O*>(out.data), static_cast<const T*>(a.data),
                              static_cast<const T*>(b.data), f});
  return true;
}

// false: op is not defined for T (nothing launched). The int-capable ops come first, as on the CPU.
template <class T>
bool unary_typed(UOp op, const TensorArg& x, const TensorArg& out, double p0d, double p1d) {
  const T p0 = param<T>(p0d), p1 = param<T>(p1d);
#define LINEA_UNARY(name) \
  case UOp::name: return run_map1<T>(x, out, UnaryFn<UOp::name, T>{p0, p1});
  switch (op) {
    LINEA_UNARY(Neg) LINEA_UNARY(Abs) LINEA_UNARY(Sign) LINEA_UNARY(Relu) LINEA_UNARY(Clamp) LINEA_UNARY(ClampMask)
    default: break;
  }
  if constexpr (std::is_floating_point_v<T>) {
    switch (op) {
      LINEA_UNARY(Exp) LINEA_UNARY(Log) LINEA_UNARY(Sqrt) LINEA_UNARY(Rsqrt) LINEA_UNARY(Tanh)
      LINEA_UNARY(Sigmoid) LINEA_UNARY(Silu) LINEA_UNARY(PowScalar) LINEA_UNARY(GeluTanh) LINEA_UNARY(GeluErf)
      LINEA_UNARY(ReluGrad) LINEA_UNARY(SiluGrad) LINEA_UNARY(GeluTanhGrad) LINEA_UNARY(GeluErfGrad)
      default: break;
    }
  }
#undef LINEA_UNARY
  return false;
}

// false: op is not defined for T. Comparisons for every dtype, arithmetic for all but bool,
// Div and Pow for floating types only (as on the CPU).
template <class T>
bool binary_typed(BOp op, const TensorArg& a, const TensorArg& b, const TensorArg& out) {
#define LINEA_BINARY(name, O) \
  case BOp::name: return run_map2<T, O>(a, b, out, BinaryFn<BOp::name, T>{});
  switch (op) {
    LINEA_BINARY(Eq, bool) LINEA_BINARY(Ne, bool) LINEA_BINARY(Lt, bool)
    LINEA_BINARY(Le, bool) LINEA_BINARY(Gt, bool) LINEA_BINARY(Ge, bool)
    default: break;
  }
  if constexpr (!std::is_same_v<T, bool>) {
    switch (op) {
      LINEA_BINARY(Add, T) LINEA_BINARY(Sub, T) LINEA_BINARY(Mul, T) LINEA_BINARY(Maximum, T) LINEA_BINARY(Minimum, T)
      default: break;
    }
  }
  if constexpr (std::is_floating_point_v<T>) {
    switch (op) {
      LINEA_BINARY(Div, T) LINEA_BINARY(Pow, T)
      default: break;
    }
  }
#undef LINEA_BINARY
  return false;
}

}  // namespace

void launch_copy(const TensorArg& src, const TensorArg& dst) {
  const int64_t n = dst.numel();
  if (n == 0) return;
  const TensorArg* ops[2] = {&dst, &src};
  const Indexer<2> ix = make_indexer<2>(ops);
  if (src.dtype == dst.dtype) {
    dispatch_bits(dst.dtype, [&]<class U>() {
      launch(ix, n, Copy<U, U>{static_cast<U*>(dst.data), static_cast<const U*>(src.data)});
    });
    return;
  }
  dispatch_dt(src.dtype, [&]<class S>() {
    dispatch_dt(dst.dtype, [&]<class D>() {
      if constexpr (!std::is_same_v<S, D>)  // same dtype went through dispatch_bits above
        launch(ix, n, Copy<D, S>{static_cast<D*>(dst.data), static_cast<const S*>(src.data)});
    });
  });
}

void launch_fill(const TensorArg& dst, double value) {
  const int64_t n = dst.numel();
  if (n == 0) return;
  const TensorArg* ops[1] = {&dst};
  const Indexer<1> ix = make_indexer<1>(ops);
  dispatch_dt(dst.dtype, [&]<class T>() {
    const T v = static_cast<T>(value);  // converted once on the host, as the CPU does
    using U = Bits<sizeof(T)>;
    U bits;
    std::memcpy(&bits, &v, sizeof(T));
    launch(ix, n, Fill<U>{static_cast<U*>(dst.data), bits});
  });
}

bool launch_unary(UOp op, const TensorArg& x, const TensorArg& out, double p0, double p1) {
  return dispatch_dt(x.dtype, [&]<class T>() {
    if constexpr (std::is_same_v<T, bool>)
      return false;  // no unary op is defined for bool
    else
      return unary_typed<T>(op, x, out, p0, p1);
  });
}

bool launch_binary(BOp op, const TensorArg& a, const TensorArg& b, const TensorArg& out) {
  return dispatch_dt(a.dtype, [&]<class T>() { return binary_typed<T>(op, a, b, out); });
}

void launch_where(const TensorArg& cond, const TensorArg& a, const TensorArg& b, const TensorArg& out) {
  const int64_t n = out.numel();
  if (n == 0) return;
  const TensorArg* ops[4] = {&out, &cond, &a, &b};
  const Indexer<4> ix = make_indexer<4>(ops);
  dispatch_bits(out.dtype, [&]<class U>() {
    launch(ix, n,
           Where<U>{static_cast<U*>(out.data), static_cast<const bool*>(cond.data), static_cast<const U*>(a.data),
                    static_cast<const U*>(b.data)});
  });
}

}  // namespace linea::cuda
