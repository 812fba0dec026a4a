// Matrix multiply with NumPy semantics: 1-d operands are promoted (and the added dim removed
// again), leading (batch) dims broadcast. Runs on BLAS gemm; transposed views are passed to BLAS
// as transposes, not copied.
#pragma once
#include "linea/tensor/tensor.h"

namespace linea {

Tensor matmul(const Tensor& a, const Tensor& b);

// x [..., in] · weightᵀ + bias: a linear layer, weight [out, in], bias [out] or undefined (then it
// is matmul(x, weight.t())). The bias is added by the gemm itself, which writes it into the output
// before the product instead of making a second pass over the output.
Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias);

}  // namespace linea
