// Printing tensors the way PyTorch does:
//
//   tensor([[1.0000, 2.5000],
//           [3.0000, 4.0000]], dtype=float64)
//
// Values share one width and style per tensor (whole numbers as "1.", small or wide-ranging
// values in scientific notation); tensors over 1000 elements show only their first and last 3
// entries along each dim, with "..." between. Works through fmt ("{}") and std::ostream.
#pragma once
#include <fmt/format.h>

#include <iosfwd>
#include <string>

#include "linea/tensor/error.h"
#include "linea/tensor/tensor.h"

namespace linea {

std::string to_string(const Tensor& t);
std::ostream& operator<<(std::ostream& os, const Tensor& t);

}  // namespace linea

template <>
struct fmt::formatter<linea::Tensor> : fmt::formatter<std::string_view> {
  auto format(const linea::Tensor& t, format_context& ctx) const {
    return fmt::formatter<std::string_view>::format(linea::to_string(t), ctx);
  }
};
