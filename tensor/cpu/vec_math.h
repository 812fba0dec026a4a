// exp, erfcx and lane sums written so that GCC vectorises the loops that call them: no libm call,
// no branches (selects only). libm's expf/erfcf are scalar calls, which keep softmax, sigmoid,
// silu and gelu far below memory bandwidth (measured: docs/benchmarks.md, "LayerNorm, lane sums
// and elementwise math").
// float64 keeps libm: it is the gradient-checking dtype, where we want the reference values.
//
// Accuracy (float32): exp within ~2 ulp (Cephes expf polynomial); results below exp(-87) ~ 1.6e-38
// flush to 0. erfcx: relative error < 3e-7 in float32 arithmetic on [0, 9.5] (the fit itself 8e-8);
// erfc(z) = exp(-z^2) erfcx(z) then carries exp's error at -z^2 too: < 4e-6 relative for z up to
// 9.2 (z^2's own rounding, amplified by the exp), < 3e-7 for z < 3.
// These are compiled for the baseline (included ahead of isa_begin.h): ops.h's formulas, also
// baseline, call them through CpuMath, and a baseline function cannot inline an AVX one. Inlined
// into a kernel, they vectorise with the kernel's ISA.
#pragma once
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

namespace linea::cpu {

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
// after it: NR's erfcc puts the polynomial inside the exp, one long dependent chain that makes
// GELU's forward and backward compute-bound (measured: docs/benchmarks.md, "Small kernel details").
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

// The versions kernels call: fast float32, libm float64.
template <class T>
T vexp(T x) {
  if constexpr (std::is_same_v<T, float>) return exp_f32(x);
  else return std::exp(x);
}
}  // namespace linea::cpu
