// Cooperative reductions for row kernels (reduce.cu, norm.cu). A "group" of G threads owns one
// row: a single warp (G = 32, for short rows: no barriers, several rows per block) or the whole
// block (G = blockDim.x, for long rows: warps combine through shared memory). Device code only:
// include from .cu files.
//
// A reducer R is any type with `using State = ...` and `static __device__ void merge(State& a,
// const State& b)`, commutative and associative up to rounding. The merge order is fixed by the
// lane layout, so results are the same run to run.
#pragma once
#include <cstdint>
#include <cstring>

namespace linea::cuda {

inline constexpr int kThreads = 256;    // threads per block of every row kernel
inline constexpr int kWarpRowMax = 1024;  // rows up to this length get one warp each
// Work that splits a reduction over more blocks aims at about this many threads in flight (the
// resident threads of a full H100/H200: 132 SMs x 2048) ...
inline constexpr int64_t kTargetThreads = int64_t{1} << 18;
// ... in at most this many pieces, which bounds the serial loop of the pass that merges them.
inline constexpr int64_t kMaxSplits = 1024;

inline int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// The value of lane (lane ^ mask), for any trivially copyable State (double, int64, bool, small
// structs): it travels as 32-bit words, since __shfl_xor_sync only takes built-in types. All 32
// lanes must call it, hence the full mask.
template <class S>
__device__ __forceinline__ S shfl_xor(const S& v, int mask) {
  constexpr int kWords = (sizeof(S) + 3) / 4;
  unsigned w[kWords] = {};
  memcpy(w, &v, sizeof(S));
#pragma unroll
  for (int k = 0; k < kWords; ++k) w[k] = __shfl_xor_sync(0xffffffffu, w[k], mask);
  S r;
  memcpy(&r, w, sizeof(S));
  return r;
}

// Butterfly over the 32 lanes of a warp: every lane ends with the merge of all 32 values.
template <class R>
__device__ __forceinline__ typename R::State warp_allreduce(typename R::State v) {
#pragma unroll
  for (int mask = 16; mask > 0; mask >>= 1) R::merge(v, shfl_xor(v, mask));
  return v;
}

// Every thread of the group gets the merge of the group's values. For G > 32 the group is the
// whole block (blockDim.x == G) and buf is a __shared__ State[G / 32]; every thread of the block
// must call it the same number of times (it contains barriers).
template <int G, class R>
__device__ __forceinline__ typename R::State group_allreduce(typename R::State v, typename R::State* buf) {
  static_assert(G % 32 == 0 && G <= 1024, "a group is one warp or a whole block of whole warps");
  v = warp_allreduce<R>(v);
  if constexpr (G > 32) {
    __syncthreads();  // an earlier call may still be reading buf
    if (threadIdx.x % 32 == 0) buf[threadIdx.x / 32] = v;
    __syncthreads();
    // Each thread merges the per-warp results itself, in warp order: no second shuffle round,
    // and every thread sees the same bits.
    v = buf[0];
    for (int w = 1; w < G / 32; ++w) R::merge(v, buf[w]);
  }
  return v;
}

// The row loop of every group kernel: f(row, lane) for each row this thread's group owns (group
// g of block b takes row b * (kThreads / G) + g, then strides by the whole grid), lane being the
// thread's index in its group. The row is the same for all G threads of a group, so inside f they
// may call group_allreduce together. Launch with group_blocks(rows, G) blocks of kThreads.
template <int G, class F>
__device__ __forceinline__ void for_each_group_row(int64_t rows, F&& f) {
  constexpr int kGroups = kThreads / G;
  const int lane = threadIdx.x % G;
  for (int64_t r = static_cast<int64_t>(blockIdx.x) * kGroups + threadIdx.x / G; r < rows;
       r += static_cast<int64_t>(gridDim.x) * kGroups)
    f(r, lane);
}

// The most common reducer: a sum in double (float32 data is summed in double, like the CPU).
struct SumDouble {
  using State = double;
  static __device__ void merge(double& a, const double& b) { a += b; }
};

// exp in the element type: expf for float32 (within 2 ulp, like the CPU's vexp), exp for float64.
__device__ __forceinline__ float exp_t(float x) { return expf(x); }
__device__ __forceinline__ double exp_t(double x) { return exp(x); }

// Grid of 256-thread blocks for `tasks` rows handled by groups of G threads.
inline unsigned group_blocks(int64_t tasks, int group) {
  const int64_t per_block = kThreads / group;
  int64_t b = (tasks + per_block - 1) / per_block;
  if (b < 1) b = 1;
  return static_cast<unsigned>(b > (int64_t{1} << 20) ? (int64_t{1} << 20) : b);  // grid-stride loops do the rest
}

}  // namespace linea::cuda
