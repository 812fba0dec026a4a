// Shapes and strides (in elements), plus the helpers every op needs: numel, contiguous strides,
// NumPy broadcasting, and wrapping of negative dims.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace linea {

using Shape = std::vector<int64_t>;
using Strides = std::vector<int64_t>;

int64_t numel(const Shape& shape);
Strides contiguous_strides(const Shape& shape);
// "(2, 3)" — how shapes appear in error messages.
std::string shape_str(const Shape& shape);
// NumPy broadcasting of two shapes; throws naming `op` and both shapes when incompatible.
Shape broadcast_shapes(std::string_view op, const Shape& a, const Shape& b);
// Wraps a possibly negative dim into [0, ndim); throws naming `op` when out of range.
int64_t wrap_dim(std::string_view op, int64_t dim, int64_t ndim);

}  // namespace linea
