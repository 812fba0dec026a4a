// Sums in independent lanes, so the compiler vectorises a reduction: a kernel header (isa_begin.h),
// since each takes the kernel's lambda and must inline it.
#pragma once
#ifndef LINEA_ISA_NS
#error "a kernel header: include linea/tensor/cpu/isa_begin.h first"
#endif
#include <cstdint>
#include <type_traits>

namespace linea::cpu::inline LINEA_ISA_NS {

// The sum of W lanes as a halving tree: s[k] + s[k + W/2], then the same on those W/2, down to one.
// For 16 floats (every float32 lane_sum) the halves are vector registers (GCC/clang vector
// extensions): written as loops over the array, GCC stores the lanes and reloads them in narrower
// pieces, stalls on store forwarding in every row of LayerNorm, with the same sums in the same order
// (measured: docs/benchmarks.md, "LayerNorm, lane sums and elementwise math").
template <class A, int W>
A lane_tree(A* s) {
  if constexpr (std::is_same_v<A, float> && W == 16) {
    using v16 = float __attribute__((vector_size(64)));
    using v8 = float __attribute__((vector_size(32)));
    using v4 = float __attribute__((vector_size(16)));
    v16 x;
    __builtin_memcpy(&x, s, sizeof x);
    const v8 h8 = __builtin_shufflevector(x, x, 0, 1, 2, 3, 4, 5, 6, 7) +
                  __builtin_shufflevector(x, x, 8, 9, 10, 11, 12, 13, 14, 15);
    const v4 h4 = __builtin_shufflevector(h8, h8, 0, 1, 2, 3) + __builtin_shufflevector(h8, h8, 4, 5, 6, 7);
    return (h4[0] + h4[2]) + (h4[1] + h4[3]);
  } else {
    for (int w = W / 2; w > 0; w /= 2)
      for (int k = 0; k < w; ++k) s[k] += s[k + w];
    return s[0];
  }
}

// Σ_j f(j) over j < n in A, in W independent lanes (by default 16 float or 8 double): a single
// running sum is one long chain of dependent adds (latency-bound); independent lanes let the
// compiler vectorize, and more of them overlap more adds.
template <class A, int W = 64 / sizeof(A), class F>
A lane_sum(int64_t n, F&& f) {
  A s[W] = {};
  int64_t j = 0;
  for (; j + W <= n; j += W)
    for (int k = 0; k < W; ++k) s[k] += f(j + k);
  for (; j < n; ++j) s[0] += f(j);
  return lane_tree<A, W>(s);
}

// lane_sum for R rows at once, out[i] = Σ_j f(i, j): R independent chains where one row's sums
// wait on each other (LayerNorm's mean, then its variance), each row's sum the bits lane_sum gives.
// GCC needs the simd hint here: without it LayerNorm runs much slower (measured: docs/benchmarks.md,
// "LayerNorm, lane sums and elementwise math"). clang built with the sanitizers (make fuzz, make
// sanitize) cannot vectorise the instrumented loop and would say so for every instantiation.
#if defined(__clang__)
#pragma clang diagnostic push
#pragma clang diagnostic ignored "-Wpass-failed"
#endif
template <class A, int R, int W = 64 / sizeof(A), class F>
void lane_sums(int64_t n, A* out, F&& f) {
  A s[R][W] = {};
  int64_t j = 0;
  for (; j + W <= n; j += W)
    for (int i = 0; i < R; ++i)
#pragma omp simd
      for (int k = 0; k < W; ++k) s[i][k] += f(i, j + k);
  for (; j < n; ++j)
    for (int i = 0; i < R; ++i) s[i][0] += f(i, j);
  for (int i = 0; i < R; ++i) out[i] = lane_tree<A, W>(s[i]);
}
#if defined(__clang__)
#pragma clang diagnostic pop
#endif

}  // namespace linea::cpu::inline LINEA_ISA_NS
