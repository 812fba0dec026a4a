// Convolution, pooling and batch-norm modules over NCHW images, on the functions of
// nn/functional/conv.h. Each takes libtorch's options class, built with the required sizes and
// chained setters: Conv2d(Conv2dOptions(1, 6, 5).stride(2).padding(1)); each getter is the setter's
// name without an argument. Dropout2d is in nn/layers.h beside Dropout.
#pragma once
#include "linea/nn/functional/conv.h"
#include "linea/nn/module.h"

namespace linea::nn {

using functional::Size2;

// Setter and getter of one option field: NAME(v) sets and returns *this, NAME() reads.
#define LINEA_OPTION(Self, Type, name, init)             \
 public:                                                 \
  Self& name(Type v) { return name##_ = v, *this; }      \
  Type name() const { return name##_; }                  \
                                                         \
 private:                                                \
  Type name##_ = init;

class Conv2dOptions {
 public:
  Conv2dOptions(int64_t in_channels, int64_t out_channels, Size2 kernel_size)
      : in_channels_(in_channels), out_channels_(out_channels), kernel_size_(kernel_size) {}
  LINEA_OPTION(Conv2dOptions, int64_t, in_channels, 0)
  LINEA_OPTION(Conv2dOptions, int64_t, out_channels, 0)
  LINEA_OPTION(Conv2dOptions, Size2, kernel_size, 1)
  LINEA_OPTION(Conv2dOptions, Size2, stride, 1)
  LINEA_OPTION(Conv2dOptions, Size2, padding, 0)
  LINEA_OPTION(Conv2dOptions, Size2, dilation, 1)
  LINEA_OPTION(Conv2dOptions, int64_t, groups, 1)
  LINEA_OPTION(Conv2dOptions, bool, bias, true)
};

class ConvTranspose2dOptions {
 public:
  ConvTranspose2dOptions(int64_t in_channels, int64_t out_channels, Size2 kernel_size)
      : in_channels_(in_channels), out_channels_(out_channels), kernel_size_(kernel_size) {}
  LINEA_OPTION(ConvTranspose2dOptions, int64_t, in_channels, 0)
  LINEA_OPTION(ConvTranspose2dOptions, int64_t, out_channels, 0)
  LINEA_OPTION(ConvTranspose2dOptions, Size2, kernel_size, 1)
  LINEA_OPTION(ConvTranspose2dOptions, Size2, stride, 1)
  LINEA_OPTION(ConvTranspose2dOptions, Size2, padding, 0)
  LINEA_OPTION(ConvTranspose2dOptions, Size2, output_padding, 0)
  LINEA_OPTION(ConvTranspose2dOptions, Size2, dilation, 1)
  LINEA_OPTION(ConvTranspose2dOptions, int64_t, groups, 1)
  LINEA_OPTION(ConvTranspose2dOptions, bool, bias, true)
};

// Max and average pooling take the same options; stride 0 (the default) means the kernel size.
class Pool2dOptions {
 public:
  Pool2dOptions(Size2 kernel_size) : kernel_size_(kernel_size) {}  // implicit: MaxPool2d(2)
  LINEA_OPTION(Pool2dOptions, Size2, kernel_size, 1)
  LINEA_OPTION(Pool2dOptions, Size2, stride, 0)
  LINEA_OPTION(Pool2dOptions, Size2, padding, 0)
};
using MaxPool2dOptions = Pool2dOptions;
using AvgPool2dOptions = Pool2dOptions;

class BatchNorm2dOptions {
 public:
  BatchNorm2dOptions(int64_t num_features) : num_features_(num_features) {}  // implicit: BatchNorm2d(64)
  LINEA_OPTION(BatchNorm2dOptions, int64_t, num_features, 0)
  LINEA_OPTION(BatchNorm2dOptions, double, eps, 1e-5)
  LINEA_OPTION(BatchNorm2dOptions, double, momentum, 0.1)
  LINEA_OPTION(BatchNorm2dOptions, bool, affine, true)
};

#undef LINEA_OPTION

// weight [out, in / groups, kh, kw] and bias [out], both U(-1/sqrt(fan_in), 1/sqrt(fan_in)) with
// fan_in = in / groups kh kw: PyTorch's default (kaiming_uniform_ with a = sqrt(5) is that bound).
class Conv2d : public Module {
 public:
  explicit Conv2d(const Conv2dOptions& options);
  Conv2d(int64_t in_channels, int64_t out_channels, Size2 kernel_size)
      : Conv2d(Conv2dOptions(in_channels, out_channels, kernel_size)) {}
  Tensor forward(const Tensor& x) override;
  const Conv2dOptions& options() const { return options_; }

  Tensor weight;
  Tensor bias;  // undefined when built without bias

 private:
  Conv2dOptions options_;
};

// weight [in, out / groups, kh, kw] and bias [out]; PyTorch's init with fan_in = out / groups kh kw.
class ConvTranspose2d : public Module {
 public:
  explicit ConvTranspose2d(const ConvTranspose2dOptions& options);
  ConvTranspose2d(int64_t in_channels, int64_t out_channels, Size2 kernel_size)
      : ConvTranspose2d(ConvTranspose2dOptions(in_channels, out_channels, kernel_size)) {}
  Tensor forward(const Tensor& x) override;
  const ConvTranspose2dOptions& options() const { return options_; }

  Tensor weight;
  Tensor bias;

 private:
  ConvTranspose2dOptions options_;
};

class MaxPool2d : public Module {
 public:
  explicit MaxPool2d(const Pool2dOptions& options) : Module("MaxPool2d"), options_(options) {}
  explicit MaxPool2d(Size2 kernel_size) : MaxPool2d(Pool2dOptions(kernel_size)) {}
  Tensor forward(const Tensor& x) override {
    return functional::max_pool2d(x, options_.kernel_size(), options_.stride(), options_.padding());
  }

 private:
  Pool2dOptions options_;
};

class AvgPool2d : public Module {
 public:
  explicit AvgPool2d(const Pool2dOptions& options) : Module("AvgPool2d"), options_(options) {}
  explicit AvgPool2d(Size2 kernel_size) : AvgPool2d(Pool2dOptions(kernel_size)) {}
  Tensor forward(const Tensor& x) override {
    return functional::avg_pool2d(x, options_.kernel_size(), options_.stride(), options_.padding());
  }

 private:
  Pool2dOptions options_;
};

// Per-channel batch norm of [N, C, H, W]. Parameters weight (ones) and bias (zeros) when affine;
// buffers running_mean (zeros), running_var (ones) and num_batches_tracked (int64 0), all in
// state_dict(). Training normalises by the batch's statistics and updates the running ones (and
// counts the batch); eval normalises by the running statistics.
class BatchNorm2d : public Module {
 public:
  explicit BatchNorm2d(const BatchNorm2dOptions& options);
  Tensor forward(const Tensor& x) override;
  const BatchNorm2dOptions& options() const { return options_; }

  Tensor weight, bias;  // undefined without affine
  Tensor running_mean, running_var, num_batches_tracked;

 private:
  BatchNorm2dOptions options_;
};

}  // namespace linea::nn
