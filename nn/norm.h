// LayerNorm and RMSNorm modules over the last dim, on the fused ops of autograd/ops_norm.h.
#pragma once
#include "linea/nn/module.h"

namespace linea::nn {

// weight (ones) and bias (zeros) of shape [dim] when affine.
class LayerNorm : public Module {
 public:
  explicit LayerNorm(int64_t dim, double eps = 1e-5, bool affine = true);
  Tensor forward(const Tensor& x) override;

  Tensor weight, bias;  // undefined without affine

 private:
  int64_t dim_;
  double eps_;
};

// weight (ones) of shape [dim] when affine; no bias.
class RMSNorm : public Module {
 public:
  explicit RMSNorm(int64_t dim, double eps = 1e-6, bool affine = true);
  Tensor forward(const Tensor& x) override;

  Tensor weight;  // undefined without affine

 private:
  int64_t dim_;
  double eps_;
};

}  // namespace linea::nn
