// linea::Error — the one exception type the library throws. Messages start with "[op]" and
// name the shapes / dtypes / devices involved, so a user can see what went wrong where.
// Host code only: LINEA_CHECK and the formatters of DType and Device use fmt, which nvcc cannot
// compile. The headers the CUDA kernels read (dtype.h, device.h, shape.h, storage.h, tensor.h,
// ops.h, backend.h) include neither fmt nor this header, so every file that checks or formats
// includes it itself.
#pragma once
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <stdexcept>
#include <string>

#include "linea/tensor/device.h"
#include "linea/tensor/dtype.h"

namespace linea {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace linea

// LINEA_CHECK(cond, "[op] fmt string {}", args...) throws linea::Error when cond is false.
#define LINEA_CHECK(cond, ...)                                  \
  do {                                                          \
    if (!(cond)) throw ::linea::Error(fmt::format(__VA_ARGS__)); \
  } while (0)

template <>
struct fmt::formatter<linea::DType> : fmt::formatter<std::string_view> {
  auto format(linea::DType t, format_context& ctx) const {
    return fmt::formatter<std::string_view>::format(linea::dtype_name(t), ctx);
  }
};

template <>
struct fmt::formatter<linea::Device> : fmt::formatter<std::string_view> {
  auto format(const linea::Device& d, format_context& ctx) const {
    return fmt::formatter<std::string_view>::format(d.str(), ctx);
  }
};
