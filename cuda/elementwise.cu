// CUDA elementwise kernels: copy with dtype conversion, fill, unary math (and the derivatives
// backward needs), binary arithmetic and comparisons, where. The formulas are ops.h's tables,
// the ones the CPU backend runs too; float32 uses CUDA's expf/erfcf where the CPU uses its own
// vectorisable polynomials (vec_math.h), so the two agree to a few ulp.
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

#include "linea/cuda/cuda_backend.h"
#include "linea/tensor/kernel_checks.h"


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

// The device's libm for the formulas of ops.h: float and double overloads of the full-precision
// functions (nvcc does not substitute the fast intrinsics without --use_fast_math).
struct CudaMath {
  static __device__ __forceinline__ float exp(float x) { return expf(x); }
  static __device__ __forceinline__ double exp(double x) { return ::exp(x); }
  static __device__ __forceinline__ float log(float x) { return logf(x); }
  static __device__ __forceinline__ double log(double x) { return ::log(x); }
  static __device__ __forceinline__ float log1p(float x) { return log1pf(x); }
  static __device__ __forceinline__ double log1p(double x) { return ::log1p(x); }
  static __device__ __forceinline__ float sqrt(float x) { return sqrtf(x); }
  static __device__ __forceinline__ double sqrt(double x) { return ::sqrt(x); }
  static __device__ __forceinline__ float tanh(float x) { return tanhf(x); }
  static __device__ __forceinline__ double tanh(double x) { return ::tanh(x); }
  static __device__ __forceinline__ float sin(float x) { return sinf(x); }
  static __device__ __forceinline__ double sin(double x) { return ::sin(x); }
  static __device__ __forceinline__ float cos(float x) { return cosf(x); }
  static __device__ __forceinline__ double cos(double x) { return ::cos(x); }
  // erfc(z), z >= 0; the e = exp(-z^2) the CPU's version multiplies in goes unused here.
  static __device__ __forceinline__ float erfc_tail(float z, float) { return erfcf(z); }
  static __device__ __forceinline__ double erfc_tail(double z, double) { return ::erfc(z); }
  static __device__ __forceinline__ float pow(float x, float y) { return powf(x, y); }
  static __device__ __forceinline__ double pow(double x, double y) { return ::pow(x, y); }
};

// One table entry of ops.h as a device functor (unary: op(v; p0, p1); binary: op(a, b)).
template <class Op, class T>
struct UnaryFn {
  T p0, p1;
  __device__ __forceinline__ T operator()(T v) const { return Op::template apply<CudaMath>(v, p0, p1); }
};
template <class Op, class T>
struct BinaryFn {
  __device__ __forceinline__ auto operator()(T a, T b) const { return Op::template apply<CudaMath>(a, b); }
};

// ---------------------------------------------------------------- host side

// Kernels that only move elements (where, same-dtype copy, fill) need the width, not the type.
template <std::size_t N>
using Bits = std::conditional_t<N == 1, uint8_t, std::conditional_t<N == 4, uint32_t, uint64_t>>;

template <class F>
void dispatch_bits(DType t, F&& f) {
  dispatch(t, [&]<class T>() { f.template operator()<Bits<sizeof(T)>>(); });
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

// false: op is not defined for T (nothing launched); the domains are ops.h's, as on the CPU.
template <class T>
bool unary_typed(UnaryOp op, const TensorArg& x, const TensorArg& out, double p0d, double p1d) {
  const T p0 = param<T>(p0d), p1 = param<T>(p1d);
  return visit(op, [&]<class Op>() {
    if constexpr (in_domain<T>(Op::domain))
      return run_map1<T>(x, out, UnaryFn<Op, T>{p0, p1});
    else
      return false;
  });
}

template <class T>
bool binary_typed(BinaryOp op, const TensorArg& a, const TensorArg& b, const TensorArg& out) {
  return visit(op, [&]<class Op>() {
    if constexpr (in_domain<T>(Op::domain))
      return run_map2<T, std::conditional_t<Op::domain == Domain::Compare, bool, T>>(a, b, out, BinaryFn<Op, T>{});
    else
      return false;
  });
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
  dispatch(src.dtype, [&]<class S>() {
    dispatch(dst.dtype, [&]<class D>() {
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
  dispatch(dst.dtype, [&]<class T>() {
    const T v = static_cast<T>(value);  // converted once on the host, as the CPU does
    using U = Bits<sizeof(T)>;
    U bits;
    std::memcpy(&bits, &v, sizeof(T));
    launch(ix, n, Fill<U>{static_cast<U*>(dst.data), bits});
  });
}

// out (contiguous, x's dtype) = op(x; p0, p1). Returns false, launching nothing, when op is not
// defined for x's dtype (ops.h's domains, as on the CPU).
bool launch_unary(UnaryOp op, const TensorArg& x, const TensorArg& out, double p0, double p1) {
  return dispatch(x.dtype, [&]<class T>() { return unary_typed<T>(op, x, out, p0, p1); });
}

// out (contiguous) = op(a, b); a and b share a dtype, out is Bool for comparisons. Returns false,
// launching nothing, when op is not defined for the dtype (ops.h's domains).
bool launch_binary(BinaryOp op, const TensorArg& a, const TensorArg& b, const TensorArg& out) {
  return dispatch(a.dtype, [&]<class T>() { return binary_typed<T>(op, a, b, out); });
}

// out (contiguous) = cond ? a : b; cond is Bool, a, b and out share a dtype.
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

// ---- CudaBackend::do_unary, do_binary, do_where ----
// The launchers above; the errors for a dtype without a kernel are the CPU's (tensor/kernel_checks.h).
// copy and fill are in cuda_memory.cpp, beside the host transfers.

void CudaBackend::do_unary(UnaryOp op, const Tensor& x, const Tensor& out, double p0, double p1) {
  const char* name = op_name(op);
  if (!launch_unary(op, arg(x, name), arg(out, name), p0, p1))
    kernel_checks::unary_unsupported(op, x.dtype());
  check_launch("elementwise unary");
}

void CudaBackend::do_binary(BinaryOp op, const Tensor& a, const Tensor& b, const Tensor& out) {
  const char* name = op_name(op);
  if (!launch_binary(op, arg(a, name), arg(b, name), arg(out, name)))
    kernel_checks::binary_unsupported(op, a.dtype());
  check_launch("elementwise binary");
}

void CudaBackend::do_where(const Tensor& cond, const Tensor& a, const Tensor& b, const Tensor& out) {
  launch_where(arg(cond, "where"), arg(a, "where"), arg(b, "where"), arg(out, "where"));
  check_launch("elementwise where");
}

}  // namespace linea::cuda
