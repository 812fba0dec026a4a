#include "linea/nn/conv.h"

#include <cmath>

#include "linea/autograd/graph.h"
#include "linea/nn/init.h"
#include "linea/tensor/creation.h"
#include "linea/tensor/error.h"

namespace linea::nn {

namespace {

// PyTorch's default init of a convolution: weight and bias U(-1/sqrt(fan_in), 1/sqrt(fan_in)).
double init_bound(int64_t fan_in) { return 1.0 / std::sqrt(static_cast<double>(fan_in)); }

void check_channels(const char* op, int64_t in, int64_t out, Size2 k, int64_t groups) {
  LINEA_CHECK(in > 0 && out > 0 && k.h > 0 && k.w > 0 && groups > 0 && in % groups == 0 && out % groups == 0,
              "[{}] in_channels {} and out_channels {} must be positive and divisible by groups {}, kernel ({}, {}) "
              "positive",
              op, in, out, groups, k.h, k.w);
}

}  // namespace

Conv2d::Conv2d(const Conv2dOptions& o) : Module("Conv2d"), options_(o) {
  const int64_t g = o.groups(), in = o.in_channels(), out = o.out_channels();
  const Size2 k = o.kernel_size();
  check_channels("Conv2d", in, out, k, g);
  const double bound = init_bound(in / g * k.h * k.w);
  weight = register_parameter("weight", uniform_(empty({out, in / g, k.h, k.w}), -bound, bound));
  if (o.bias()) bias = register_parameter("bias", uniform_(empty({out}), -bound, bound));
}

Tensor Conv2d::forward(const Tensor& x) {
  const Conv2dOptions& o = options_;
  return functional::conv2d(x, weight, bias, o.stride(), o.padding(), o.dilation(), o.groups());
}

ConvTranspose2d::ConvTranspose2d(const ConvTranspose2dOptions& o) : Module("ConvTranspose2d"), options_(o) {
  const int64_t g = o.groups(), in = o.in_channels(), out = o.out_channels();
  const Size2 k = o.kernel_size();
  check_channels("ConvTranspose2d", in, out, k, g);
  const double bound = init_bound(out / g * k.h * k.w);
  weight = register_parameter("weight", uniform_(empty({in, out / g, k.h, k.w}), -bound, bound));
  if (o.bias()) bias = register_parameter("bias", uniform_(empty({out}), -bound, bound));
}

Tensor ConvTranspose2d::forward(const Tensor& x) {
  const ConvTranspose2dOptions& o = options_;
  return functional::conv_transpose2d(x, weight, bias, o.stride(), o.padding(), o.output_padding(), o.groups(),
                                      o.dilation());
}

BatchNorm2d::BatchNorm2d(const BatchNorm2dOptions& o) : Module("BatchNorm2d"), options_(o) {
  const int64_t c = o.num_features();
  LINEA_CHECK(c > 0, "[BatchNorm2d] num_features must be positive, got {}", c);
  if (o.affine()) {
    weight = register_parameter("weight", ones({c}));
    bias = register_parameter("bias", zeros({c}));
  }
  running_mean = register_buffer("running_mean", zeros({c}));
  running_var = register_buffer("running_var", ones({c}));
  num_batches_tracked = register_buffer("num_batches_tracked", zeros({}, DType::Int64));
}

Tensor BatchNorm2d::forward(const Tensor& x) {
  LINEA_CHECK(x.dim() == 4 && x.size(1) == options_.num_features(),
              "[BatchNorm2d] expected input [N, {}, H, W], got {}", options_.num_features(), shape_str(x.shape()));
  Tensor y = functional::batch_norm(x, running_mean, running_var, weight, bias, is_training(),
                                    options_.momentum(), options_.eps());
  if (is_training()) {
    NoGradGuard no_grad;
    num_batches_tracked += 1.0;
  }
  return y;
}

}  // namespace linea::nn
