// dtype.h's one error, formatted here so that dtype.h stays free of fmt (nvcc includes it).
#include "linea/tensor/dtype.h"

#include "linea/tensor/error.h"

namespace linea {

void dtype_error(std::string_view op, DType t) {
  if (dtype_name(t) == "?") throw Error(fmt::format("[{}] unknown dtype (value {})", op, static_cast<int>(t)));
  throw Error(fmt::format("[{}] expected a floating dtype (float32 or float64), got {}", op, t));
}

}  // namespace linea
