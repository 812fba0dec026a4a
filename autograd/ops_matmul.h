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

// residual + linear(x, weight, bias), residual of the output's shape (a transformer block's skip
// connection around its output projection). The gemm adds the product into a copy of the residual
// (plus bias), so the add makes no pass of its own over the output; bias may be undefined.
Tensor linear_add(const Tensor& x, const Tensor& weight, const Tensor& bias, const Tensor& residual);

}  // namespace linea
