// What a gemm kernel's product is added to (cpu::GemmAddend), for the kernels' tests
// (test_matmul_direct.cpp, test_matmul_bf16.cpp): nothing, c itself, a separate residual (rows
// ldr apart, which must stay unwritten), a bias row, or a residual and a bias.
#pragma once
#include <cstdint>
#include <vector>

#include "linea/tensor/cpu/gemm_direct.h"

namespace linea::testing {

enum class GemmStart { None, Accumulate, Residual, Bias, ResidualBias };

// The start values of one M x N product: r and the bias, and c's (rows ldc apart) when accumulating.
struct GemmStartValues {
  GemmStart start;
  int64_t ldr;
  std::vector<float> r, bias;

  static float c0(int64_t i, int64_t j) { return 0.25f * float(i - j); }
  static float r0(int64_t i, int64_t j) { return 0.5f * float(i + 2 * j) - 3.0f; }

  GemmStartValues(GemmStart s, int64_t M, int64_t N, std::vector<float>& c, int64_t ldc)
      : start(s), ldr(N + 3), r(static_cast<size_t>(M * (N + 3)), -9.0f), bias(static_cast<size_t>(N)) {
    for (int64_t j = 0; j < N; ++j) bias[j] = 0.125f * float(j % 7) - 0.3f;
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = 0; j < N; ++j) {
        if (s == GemmStart::Accumulate) c[i * ldc + j] = c0(i, j);
        r[i * ldr + j] = r0(i, j);
      }
  }
  bool with_r() const { return start == GemmStart::Residual || start == GemmStart::ResidualBias; }
  bool with_bias() const { return start == GemmStart::Bias || start == GemmStart::ResidualBias; }

  // The addend for a kernel writing c (rows ldc apart).
  cpu::GemmAddend<float> addend(float* c, int64_t ldc) const {
    cpu::GemmAddend<float> add;
    if (start == GemmStart::Accumulate) add = {c, ldc};
    if (with_r()) add = {r.data(), ldr};
    if (with_bias()) add.bias = bias.data();
    return add;
  }
  // The start as the kernels form it: one float32 value r + bias.
  float value(int64_t i, int64_t j) const {
    if (start == GemmStart::Accumulate) return c0(i, j);
    if (with_r()) return with_bias() ? r0(i, j) + bias[j] : r0(i, j);
    return with_bias() ? bias[j] : 0.0f;
  }
  // A separate residual is read, never written.
  bool r_unwritten(int64_t i, int64_t j) const { return r[i * ldr + j] == r0(i, j); }
};

}  // namespace linea::testing
