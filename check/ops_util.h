// Helpers the registry's cases (check/ops_*.cpp) build their operands with.
#pragma once
#include <limits>

#include "registry.h"

namespace linea::check {

// A positive version of x, for log / sqrt / pow / division.
inline Tensor pos(const Tensor& x) { return abs(x) + 0.5; }
// An int64 index tensor with these values on x's device.
inline Tensor index(const Tensor& x, std::vector<int64_t> v, Shape shape) { return from_vector(v, shape, x.device()); }

// The [2, 3] additive mask {0, -inf, 0; 0, -inf, 0} in x's dtype, on x's device.
inline Tensor mask(const Tensor& x) {
  const double inf = std::numeric_limits<double>::infinity();
  return from_vector<double>({0, -inf, 0, 0, -inf, 0}, {2, 3}).to(x.dtype()).to(x.device());
}

}  // namespace linea::check
