// exp and erfc for float32 written so that GCC vectorises the loops that call them: no libm call,
// no branches (selects only). libm's expf/erfcf are scalar calls, which made softmax, sigmoid,
// silu and gelu 5-20x slower than memory bandwidth allows (measured in bench/elementwise).
// float64 keeps libm: it is the gradient-checking dtype, where we want the reference values.
//
// Accuracy (float32): exp within ~2 ulp (Cephes expf polynomial); results below exp(-87) ~ 1.6e-38
// flush to 0. erfc: relative error < 2e-7 everywhere (Numerical Recipes' erfcc, Chebyshev fit).
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

inline float erfc_f32(float x) {
  const float z = std::abs(x);
  const float t = 1.0f / (1.0f + 0.5f * z);
  const float poly =
      -1.26551223f +
      t * (1.00002368f +
           t * (0.37409196f +
                t * (0.09678418f +
                     t * (-0.18628806f +
                          t * (0.27886807f + t * (-1.13520398f + t * (1.48851587f + t * (-0.82215223f + t * 0.17087277f))))))));
  const float ans = t * exp_f32(-z * z + poly);
  return x >= 0 ? ans : 2.0f - ans;
}

// The versions kernels call: fast float32, libm float64.
template <class T>
T vexp(T x) {
  if constexpr (std::is_same_v<T, float>) return exp_f32(x);
  else return std::exp(x);
}
template <class T>
T verfc(T x) {
  if constexpr (std::is_same_v<T, float>) return erfc_f32(x);
  else return std::erfc(x);
}

}  // namespace linea::cpu
