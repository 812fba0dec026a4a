// Convolution, pooling and batch norm over NCHW images, as functions of tensors in
// linea::nn::functional (libtorch's torch::nn::functional names and argument order).
//
// Every op here is composed from the differentiable ops of autograd/ (index_select, matmul,
// reductions) and the backend's index_add, so it runs on every device and needs no kernel of its
// own. im2col is one index_select of the flattened image (with one extra element holding the
// padding value, which padded taps read), so a convolution is that gather and one batched gemm per
// group; the transposed convolution is the gemm and then the gather's adjoint (col2im: an
// index_add, whose gradient is the gather). x is [N, C, H, W], float32 or float64.
#pragma once
#include <cstdint>

#include "linea/tensor/tensor.h"

namespace linea::nn::functional {

// A (height, width) pair; one number means both, as libtorch's ExpandingArray<2>.
struct Size2 {
  int64_t h, w;
  Size2(int64_t v) : h(v), w(v) {}  // implicit: conv2d(x, w, {}, 2) is stride 2 in both dims
  Size2(int64_t h_, int64_t w_) : h(h_), w(w_) {}
  bool operator==(const Size2&) const = default;
};

// weight [C_out, C_in / groups, kh, kw], bias [C_out] or undefined. Output [N, C_out, H_out, W_out],
// H_out = (H + 2 padding - dilation (kh - 1) - 1) / stride + 1 (rounded down), likewise W_out.
Tensor conv2d(const Tensor& x, const Tensor& weight, const Tensor& bias = Tensor(), Size2 stride = 1,
              Size2 padding = 0, Size2 dilation = 1, int64_t groups = 1);

// The adjoint of conv2d in x (its input gradient): weight [C_in, C_out / groups, kh, kw], bias
// [C_out] or undefined; H_out = (H - 1) stride - 2 padding + dilation (kh - 1) + output_padding + 1.
// output_padding (< stride or < dilation, as in PyTorch) picks among the input sizes that conv2d
// maps to H.
Tensor conv_transpose2d(const Tensor& x, const Tensor& weight, const Tensor& bias = Tensor(), Size2 stride = 1,
                        Size2 padding = 0, Size2 output_padding = 0, int64_t groups = 1, Size2 dilation = 1);

// The largest / the mean element of each kernel window. stride 0 means the kernel size (PyTorch's
// default); padding is at most half the kernel. max_pool2d pads with -inf; a window's tied
// maxima share its gradient. avg_pool2d counts padded zeros in the mean (count_include_pad).
Tensor max_pool2d(const Tensor& x, Size2 kernel_size, Size2 stride = 0, Size2 padding = 0);
Tensor avg_pool2d(const Tensor& x, Size2 kernel_size, Size2 stride = 0, Size2 padding = 0);

// Normalises each channel of x [N, C, ...]: training uses the batch's mean and (population)
// variance over N and the spatial dims and, when running_mean / running_var are defined, moves
// them towards the batch's mean and unbiased variance by `momentum` (in place, outside autograd);
// eval uses the running statistics. weight, bias: [C] or undefined; the running stats [C].
Tensor batch_norm(const Tensor& x, const Tensor& running_mean, const Tensor& running_var,
                  const Tensor& weight = Tensor(), const Tensor& bias = Tensor(), bool training = false,
                  double momentum = 0.1, double eps = 1e-5);

}  // namespace linea::nn::functional
