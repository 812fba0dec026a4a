// Matrix multiply with NumPy semantics: 1-d operands are promoted (and the added dim removed
// again), leading (batch) dims broadcast. Runs on BLAS gemm; transposed views are passed to BLAS
// as transposes, not copied.
#pragma once
#include "linea/tensor/tensor.h"

namespace linea {

Tensor matmul(const Tensor& a, const Tensor& b);

}  // namespace linea
