// Launchers of the elementwise kernels (elementwise.cu), called by cuda_memory.cpp (copy, fill)
// and cuda_elementwise.cpp (unary, binary, where). They queue work on stream() and do not check
// for launch errors: the caller validates shapes, dtypes and devices beforehand and calls
// check_launch after. Operands share out's shape (broadcast inputs have stride 0).
#pragma once
#include "linea/cuda/cuda_backend.h"
#include "linea/tensor/ops.h"

namespace linea::cuda {

// dst = cast(src) elementwise, any strides and any pair of dtypes (the CPU's static_cast; a bool
// result is x != 0).
void launch_copy(const TensorArg& src, const TensorArg& dst);
// dst = static_cast<dtype>(value), any strides.
void launch_fill(const TensorArg& dst, double value);
// out (contiguous, x's dtype) = op(x; p0, p1). Returns false, launching nothing, when op is not
// defined for x's dtype (ops.h's domains, as on the CPU).
bool launch_unary(UnaryOp op, const TensorArg& x, const TensorArg& out, double p0, double p1);
// out (contiguous) = op(a, b); a and b share a dtype, out is Bool for comparisons. Returns false,
// launching nothing, when op is not defined for the dtype (ops.h's domains).
bool launch_binary(BinaryOp op, const TensorArg& a, const TensorArg& b, const TensorArg& out);
// out (contiguous) = cond ? a : b; cond is Bool, a, b and out share a dtype.
void launch_where(const TensorArg& cond, const TensorArg& a, const TensorArg& b, const TensorArg& out);

}  // namespace linea::cuda
