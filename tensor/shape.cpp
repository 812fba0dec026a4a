#include "linea/tensor/shape.h"

#include <algorithm>

#include "linea/tensor/error.h"

namespace linea {

namespace {
// The product of the dims with 0s counted as 1 (it bounds numel and every contiguous stride),
// or nullopt when a dim is negative or the product overflows int64.
std::optional<int64_t> extent(const Shape& shape) {
  int64_t acc = 1;
  for (int64_t s : shape)
    if (s < 0 || __builtin_mul_overflow(acc, std::max<int64_t>(s, 1), &acc)) return std::nullopt;
  return acc;
}

void check_extent(const Shape& shape) {
  LINEA_CHECK(extent(shape).has_value(), "[shape] shape {} {}", shape_str(shape),
              std::ranges::any_of(shape, [](int64_t s) { return s < 0; }) ? "has a negative dim"
                                                                           : "is too large: its size overflows int64");
}
}  // namespace

int64_t numel(const Shape& shape) {
  check_extent(shape);
  int64_t n = 1;
  for (int64_t s : shape) n *= s;  // cannot overflow: |n| <= extent
  return n;
}

std::vector<int64_t> multi_index(int64_t e, const Shape& shape) {
  std::vector<int64_t> idx(shape.size());
  for (size_t d = shape.size(); d-- > 0;) {
    idx[d] = e % shape[d];
    e /= shape[d];
  }
  return idx;
}

Strides contiguous_strides(const Shape& shape) {
  check_extent(shape);
  Strides st(shape.size());
  int64_t acc = 1;
  for (size_t i = shape.size(); i-- > 0;) {
    st[i] = acc;
    acc *= std::max<int64_t>(shape[i], 1);
  }
  return st;
}

std::optional<int64_t> checked_nbytes(const Shape& shape, std::size_t itemsize) {
  int64_t bytes = 0;
  if (!extent(shape) || __builtin_mul_overflow(numel(shape), itemsize, &bytes)) return std::nullopt;
  return bytes;
}

std::string shape_str(const Shape& shape) {
  if (shape.size() == 1) return fmt::format("({},)", shape[0]);
  return fmt::format("({})", fmt::join(shape, ", "));
}

Shape broadcast_shapes(std::string_view op, const Shape& a, const Shape& b) {
  size_t n = std::max(a.size(), b.size());
  Shape out(n);
  for (size_t i = 0; i < n; ++i) {
    int64_t da = i < n - a.size() ? 1 : a[i - (n - a.size())];
    int64_t db = i < n - b.size() ? 1 : b[i - (n - b.size())];
    LINEA_CHECK(da == db || da == 1 || db == 1, "[{}] shapes {} and {} cannot be broadcast together", op,
                shape_str(a), shape_str(b));
    out[i] = da == 1 ? db : da;
  }
  return out;
}

int64_t wrap_dim(std::string_view op, int64_t dim, int64_t ndim) {
  int64_t lo = ndim == 0 ? -1 : -ndim, hi = ndim == 0 ? 0 : ndim - 1;
  LINEA_CHECK(dim >= lo && dim <= hi, "[{}] dim {} out of range for a tensor with {} dims", op, dim, ndim);
  return dim < 0 ? dim + std::max<int64_t>(ndim, 1) : dim;
}

}  // namespace linea
