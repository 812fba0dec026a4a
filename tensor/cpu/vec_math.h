// exp, erfcx and lane sums written so that GCC vectorises the loops that call them: no libm call,
// no branches (selects only). libm's expf/erfcf are scalar calls, which made softmax, sigmoid,
// silu and gelu 5-20x slower than memory bandwidth allows (measured in bench/elementwise).
// float64 keeps libm: it is the gradient-checking dtype, where we want the reference values.
//
// Accuracy (float32): exp within ~2 ulp (Cephes expf polynomial); results below exp(-87) ~ 1.6e-38
// flush to 0. erfcx: relative error < 3e-7 in float32 arithmetic on [0, 9.5] (the fit itself 8e-8);
// erfc(z) = exp(-z^2) erfcx(z) then carries exp's error at -z^2 too: < 4e-6 relative for z up to
// 9.2 (z^2's own rounding, amplified by the exp), < 3e-7 for z < 3.
#pragma once
#ifndef LINEA_ISA_NS
#error "a kernel header: include linea/tensor/cpu/isa_begin.h first"
#endif
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

namespace linea::cpu::inline LINEA_ISA_NS {

inline float exp_f32(float x) {
  constexpr float hi = 88.72283905206835f;  // ln(FLT_MAX): above, +inf
  constexpr float lo = -86.9f;              // below, 0 (keeps 2^(n-1) a normal number)
  const float xc = std::min(std::max(x, lo), hi);  // NaN passes through both
  // x = n ln2 + r with |r| <= ln2/2; ln2 split in two so n*ln2 is exact. n = round(x log2 e) by
  // the 1.5*2^23 trick: std::floor/nearbyint do not vectorise without -ffast-math.
  constexpr float kRound = 12582912.0f;
  const float n = (xc * 1.44269504088896341f + kRound) - kRound;
  const float r = xc - n * 0.693359375f + n * 2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  const float er = p * r * r + r + 1.0f;
  // 2^n as 2 * 2^(n-1), so n = 128 (x near ln(FLT_MAX)) still has a valid exponent.
  const float scale = std::bit_cast<float>((static_cast<int32_t>(n) + 126) << 23);
  float y = 2.0f * er * scale;
  y = x > hi ? std::numeric_limits<float>::infinity() : y;
  y = x < lo ? 0.0f : y;
  return y;
}

// erfcx(z) = exp(z^2) erfc(z) for z >= 0, so erfc(z) = exp(-z^2) erfcx(z). GELU and its derivative
// hold exp(-z^2) already (phi needs it), and the exp then runs beside this polynomial instead of
// after it: NR's erfcc put the polynomial inside the exp, one long dependent chain that made
// GELU's forward and backward compute-bound (1.75 vs 1.31 ns per element, 1 thread, in L1).
// A polynomial in t = 1/(1 + z/2), t in (0, 1], times t: a least-squares fit (iteratively
// reweighted towards minimax) of erfcx on z in [0, 9.5], beyond which exp(-z^2) underflows.
inline float erfcx_f32(float z) {
  const float t = 1.0f / (1.0f + 0.5f * z);
  float p = -5.784812735e-02f;
  p = p * t + 2.787560167e-01f;
  p = p * t + -4.754641500e-01f;
  p = p * t + 2.650337846e-01f;
  p = p * t + -1.794260820e-02f;
  p = p * t + 1.991483041e-01f;
  p = p * t + 2.439615445e-01f;
  p = p * t + 2.822626655e-01f;
  p = p * t + 2.820925344e-01f;  // 1/(2 sqrt(pi)): erfcx(z) ~ 1/(z sqrt(pi)) as z grows
  return t * p;
}

// The sum of W lanes as a halving tree: s[k] + s[k + W/2], then the same on those W/2, down to one.
// For 16 floats (every float32 lane_sum) the halves are vector registers (GCC/clang vector
// extensions): written as loops over the array, GCC stored the lanes and reloaded them in narrower
// pieces, stalls on store forwarding in every row of LayerNorm (forward 36 -> 31 us on [768, 128],
// 1 thread), with the same sums in the same order.
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
// wait on each other (LayerNorm's mean, then its variance; 4 rows of [768, 128] at a time ran the
// forward 1.5x faster than one, 1 thread), each row's sum the bits lane_sum gives.
// GCC needs the simd hint here (without it [768, 128] LayerNorm ran 2.5x slower); clang built with
// the sanitizers (make fuzz, make sanitize) cannot vectorise the instrumented loop and would say so
// for every instantiation.
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

// The versions kernels call: fast float32, libm float64.
template <class T>
T vexp(T x) {
  if constexpr (std::is_same_v<T, float>) return exp_f32(x);
  else return std::exp(x);
}
}  // namespace linea::cpu::inline LINEA_ISA_NS
