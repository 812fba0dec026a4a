// Elementwise ops with NumPy broadcasting. Each op's backward is written beside its forward in
// ops_elementwise.cpp. Dtype rule for binary ops: two different floating dtypes are an error
// (no silent float64 -> float32); a bool/uint8/int64 operand is converted to the other operand's
// floating dtype; two integer operands promote (bool < uint8 < int64).
#pragma once
#include "linea/tensor/tensor.h"

namespace linea {

enum class GeluApprox { Erf, Tanh };  // Erf: exact x*Phi(x) (PyTorch's default); Tanh: GPT-2's form

// ---- unary ----
Tensor neg(const Tensor& x);
Tensor exp(const Tensor& x);
Tensor log(const Tensor& x);
Tensor sqrt(const Tensor& x);
Tensor rsqrt(const Tensor& x);
Tensor tanh(const Tensor& x);
Tensor sin(const Tensor& x);
Tensor cos(const Tensor& x);
Tensor sigmoid(const Tensor& x);
Tensor relu(const Tensor& x);
Tensor gelu(const Tensor& x, GeluApprox approx = GeluApprox::Erf);
Tensor silu(const Tensor& x);
Tensor softplus(const Tensor& x);  // log(1 + e^x), stable at both ends
Tensor leaky_relu(const Tensor& x, double negative_slope = 0.01);  // x > 0 ? x : negative_slope * x
Tensor abs(const Tensor& x);
Tensor pow(const Tensor& x, double exponent);
Tensor clamp(const Tensor& x, double lo, double hi);

// An activation's backward in one pass, for the backward lambdas here and hand-written backwards
// (MHLA's feature map); records nothing. dL/dx from g = dL/dy and the forward's input x, which
// must have g's shape and dtype: op is BinaryOp::ReluBackward, GeluErfBackward, GeluTanhBackward or
// SiluBackward. Declared opaque here: the op table (tensor/ops.h) is the kernel interface's, not
// part of what <linea/linea.h> brings in.
enum class BinaryOp;
Tensor activation_backward(BinaryOp op, const Tensor& g, const Tensor& x);

// ---- binary (broadcasting) ----
Tensor add(const Tensor& a, const Tensor& b);
Tensor sub(const Tensor& a, const Tensor& b);
Tensor mul(const Tensor& a, const Tensor& b);
Tensor div(const Tensor& a, const Tensor& b);
Tensor pow(const Tensor& a, const Tensor& b);
Tensor maximum(const Tensor& a, const Tensor& b);
Tensor minimum(const Tensor& a, const Tensor& b);

// ---- comparisons (bool result, not differentiable) ----
Tensor eq(const Tensor& a, const Tensor& b);
Tensor ne(const Tensor& a, const Tensor& b);
Tensor lt(const Tensor& a, const Tensor& b);
Tensor le(const Tensor& a, const Tensor& b);
Tensor gt(const Tensor& a, const Tensor& b);
Tensor ge(const Tensor& a, const Tensor& b);

// cond ? a : b, broadcasting all three; cond must be bool.
Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b);
// Zero out above (tril) / below (triu) the k-th diagonal of the last two dims.
Tensor tril(const Tensor& x, int64_t k = 0);
Tensor triu(const Tensor& x, int64_t k = 0);

// ---- operators; a double operand takes the tensor's dtype ----
Tensor operator-(const Tensor& x);
Tensor operator+(const Tensor& a, const Tensor& b);
Tensor operator-(const Tensor& a, const Tensor& b);
Tensor operator*(const Tensor& a, const Tensor& b);
Tensor operator/(const Tensor& a, const Tensor& b);
Tensor operator+(const Tensor& a, double b);
Tensor operator-(const Tensor& a, double b);
Tensor operator*(const Tensor& a, double b);
Tensor operator/(const Tensor& a, double b);
Tensor operator+(double a, const Tensor& b);
Tensor operator-(double a, const Tensor& b);
Tensor operator*(double a, const Tensor& b);
Tensor operator/(double a, const Tensor& b);

}  // namespace linea
