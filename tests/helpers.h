// Small helpers shared by the test files.
#pragma once
#include <doctest/doctest.h>

#include <linea/linea.h>

namespace linea::testing {

// A float64 leaf with N(0,1) entries from its own seeded generator.
inline Tensor randn64(Shape shape, uint64_t seed, bool requires_grad = true) {
  Generator g(seed);
  Tensor t = randn(std::move(shape), g, DType::Float64);
  if (requires_grad) t.requires_grad_();
  return t;
}

// Elementwise |a - b| <= atol + rtol * |b|, same shapes; reports the worst element.
inline bool allclose(const Tensor& a, const Tensor& b, double atol = 1e-6, double rtol = 1e-5) {
  if (a.shape() != b.shape()) {
    MESSAGE("shape mismatch: " << shape_str(a.shape()) << " vs " << shape_str(b.shape()));
    return false;
  }
  auto va = a.to_vector(), vb = b.to_vector();
  for (size_t i = 0; i < va.size(); ++i) {
    if (!(std::abs(va[i] - vb[i]) <= atol + rtol * std::abs(vb[i]))) {
      MESSAGE("element " << i << ": " << va[i] << " vs " << vb[i]);
      return false;
    }
  }
  return true;
}

}  // namespace linea::testing

// CHECK_GRADCHECK(f, {x, y}) — gradcheck with the failure report shown by doctest.
#define CHECK_GRADCHECK(f, ...)                                  \
  do {                                                           \
    auto linea_gc_ = ::linea::gradcheck((f), __VA_ARGS__);       \
    INFO(linea_gc_.message);                                     \
    CHECK(linea_gc_.ok);                                         \
  } while (0)
