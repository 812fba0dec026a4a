// Shapes and strides (in elements), plus the helpers every op needs: numel, contiguous strides,
// NumPy broadcasting, and wrapping of negative dims.
#pragma once
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace linea {

using Shape = std::vector<int64_t>;
using Strides = std::vector<int64_t>;

// Shapes come from files and users, so both throw a linea::Error naming the shape when a dim is
// negative or a count overflows int64 (0 dims count as 1 there, as they do in the strides: a
// shape like (0, 2^62, 4) has no representable strides even though it holds no element).
int64_t numel(const Shape& shape);
Strides contiguous_strides(const Shape& shape);
// The multi-index of the e-th element (row-major) of a tensor of this shape.
std::vector<int64_t> multi_index(int64_t e, const Shape& shape);
// numel * itemsize, or nullopt for the shapes numel refuses or a byte count past int64: for the
// loaders and allocators, which report the problem in their own words.
std::optional<int64_t> checked_nbytes(const Shape& shape, std::size_t itemsize);
// "(2, 3)" — how shapes appear in error messages.
std::string shape_str(const Shape& shape);
// NumPy broadcasting of two shapes; throws naming `op` and both shapes when incompatible.
Shape broadcast_shapes(std::string_view op, const Shape& a, const Shape& b);
// Wraps a possibly negative dim into [0, ndim); throws naming `op` when out of range.
int64_t wrap_dim(std::string_view op, int64_t dim, int64_t ndim);

}  // namespace linea
