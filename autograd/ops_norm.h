// Normalisation over the last dim, as fused ops (one kernel forward, one kernel backward; the
// kernels are in tensor/cpu/cpu_norm.cpp). weight and bias are optional: pass an undefined
// Tensor() for none. Both save the per-row mean / rstd for the backward.
#pragma once
#include "linea/tensor/tensor.h"

namespace linea {

// (x - mean) / sqrt(var + eps) * weight + bias over the last dim; var is the population variance.
// weight, bias: [x.size(-1)] or undefined.
Tensor layer_norm(const Tensor& x, const Tensor& weight = Tensor(), const Tensor& bias = Tensor(), double eps = 1e-5);
// x / sqrt(mean(x^2) + eps) * weight over the last dim; weight: [x.size(-1)] or undefined.
Tensor rms_norm(const Tensor& x, const Tensor& weight = Tensor(), double eps = 1e-6);

}  // namespace linea
