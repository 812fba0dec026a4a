#include "linea/nn/functional/conv.h"

#include <limits>
#include <vector>

#include "linea/autograd/function.h"
#include "linea/autograd/graph.h"
#include "linea/autograd/ops_elementwise.h"
#include "linea/autograd/ops_index.h"
#include "linea/autograd/ops_matmul.h"
#include "linea/autograd/ops_reduce.h"
#include "linea/tensor/backend.h"
#include "linea/tensor/creation.h"
#include "linea/tensor/error.h"

namespace linea::nn::functional {

namespace {

std::string describe(const Tensor& t) {
  return t.defined() ? fmt::format("{} {}", shape_str(t.shape()), t.dtype()) : "an undefined tensor";
}

void check_image(const char* op, const Tensor& x) {
  LINEA_CHECK(x.defined() && x.dim() == 4 && is_floating(x.dtype()),
              "[{}] expected input [N, C, H, W] float32 or float64, got {}", op, describe(x));
}

// A parameter tensor beside x: same dtype and device, and the given shape when `shape` is non-empty.
void check_param(const char* op, const char* what, const Tensor& t, const Tensor& x, const Shape& shape) {
  LINEA_CHECK(t.dtype() == x.dtype() && t.device() == x.device() && (shape.empty() || t.shape() == shape),
              "[{}] {} must be {}{} on {} to match input {}, got {} on {}", op, what,
              shape.empty() ? "" : shape_str(shape) + " ", x.dtype(), x.device().str(), shape_str(x.shape()),
              describe(t), t.device().str());
}

// A window's geometry: kernel, stride, padding, dilation.
struct Window {
  Size2 kernel, stride, padding, dilation;
};

void check_window(const char* op, const Window& win) {
  LINEA_CHECK(win.kernel.h > 0 && win.kernel.w > 0 && win.stride.h > 0 && win.stride.w > 0 && win.dilation.h > 0 &&
                  win.dilation.w > 0 && win.padding.h >= 0 && win.padding.w >= 0,
              "[{}] kernel ({}, {}), stride ({}, {}) and dilation ({}, {}) must be positive and padding ({}, {}) "
              ">= 0",
              op, win.kernel.h, win.kernel.w, win.stride.h, win.stride.w, win.dilation.h, win.dilation.w,
              win.padding.h, win.padding.w);
}

// The output size of sliding the window over an H x W image; throws when it is not positive.
Size2 out_size(const char* op, int64_t H, int64_t W, const Window& win) {
  const int64_t nh = H + 2 * win.padding.h - win.dilation.h * (win.kernel.h - 1) - 1;
  const int64_t nw = W + 2 * win.padding.w - win.dilation.w * (win.kernel.w - 1) - 1;
  LINEA_CHECK(nh >= 0 && nw >= 0,
              "[{}] the window (kernel ({}, {}), dilation ({}, {})) is larger than the padded input ({}, {}) + "
              "padding ({}, {}): the output size would be <= 0",
              op, win.kernel.h, win.kernel.w, win.dilation.h, win.dilation.w, H, W, win.padding.h, win.padding.w);
  return {nh / win.stride.h + 1, nw / win.stride.w + 1};
}

// im2col's index: for each tap (i, j) of the kernel and each output place (oh, ow), in that order,
// the flat index ih * W + iw of the input element it reads, or H * W (the padding element) outside
// the image. The layout [K, L] (K = kh kw taps, L = Ho Wo places) makes the columns of one group
// a contiguous [C/g K, L] matrix.
struct Im2col {
  Tensor index;  // int64 [K L] on x's device
  bool padded = false;
};

Im2col im2col_index(int64_t H, int64_t W, Size2 out, const Window& win, Device device) {
  std::vector<int64_t> idx;
  idx.reserve(static_cast<size_t>(win.kernel.h * win.kernel.w * out.h * out.w));
  bool padded = false;
  for (int64_t i = 0; i < win.kernel.h; ++i)
    for (int64_t j = 0; j < win.kernel.w; ++j)
      for (int64_t oh = 0; oh < out.h; ++oh)
        for (int64_t ow = 0; ow < out.w; ++ow) {
          const int64_t ih = oh * win.stride.h - win.padding.h + i * win.dilation.h;
          const int64_t iw = ow * win.stride.w - win.padding.w + j * win.dilation.w;
          const bool inside = ih >= 0 && ih < H && iw >= 0 && iw < W;
          padded |= !inside;
          idx.push_back(inside ? ih * W + iw : H * W);
        }
  return {from_vector(idx, {static_cast<int64_t>(idx.size())}, device), padded};
}

// x [N, C, H, W] -> columns [N, C, K, L]; padded taps read pad_value.
Tensor im2col(const Tensor& x, Size2 out, const Window& win, double pad_value) {
  const int64_t N = x.size(0), C = x.size(1), H = x.size(2), W = x.size(3);
  const Im2col ix = im2col_index(H, W, out, win, x.device());
  Tensor flat = x.reshape({N, C, H * W});
  if (ix.padded) flat = cat({flat, full({N, C, 1}, pad_value, {x.dtype(), x.device()})}, 2);
  return index_select(flat, 2, ix.index).view({N, C, win.kernel.h * win.kernel.w, out.h * out.w});
}

// im2col's adjoint: columns [N, C, K L] added into [N, C, H W + 1] at the places im2col read them
// from (the last element gathers what padded taps would have read, and is dropped by the caller).
// index_add with the [K L] index; its gradient is index_select with it, im2col itself, a recorded
// op, so the transposed convolution differentiates twice.
Tensor col2im(const Tensor& cols, const Tensor& index, int64_t HW) {
  Tensor out = zeros({cols.size(0), cols.size(1), HW + 1}, {cols.dtype(), cols.device()});
  backend(cols.device()).index_add(out, 2, index, cols.contiguous());
  return autograd::record("col2im", out, {cols}, [index](const Tensor& g) -> std::vector<Tensor> {
    return {index_select(g, 2, index)};
  });
}

Tensor add_bias(const Tensor& out, const Tensor& bias) {
  return bias.defined() ? out + bias.view({1, bias.numel(), 1, 1}) : out;
}

// conv2d's and conv_transpose2d's shared checks: weight 4-d beside x, groups dividing the channel
// counts, and the input's channels the weight's (conv2d: C_in / groups in dim 1; transposed: C_in in dim 0).
void check_conv(const char* op, const Tensor& x, const Tensor& weight, int64_t groups, bool transposed) {
  check_image(op, x);
  LINEA_CHECK(weight.defined() && weight.dim() == 4, "[{}] weight must be 4-d, got {}", op, describe(weight));
  check_param(op, "weight", weight, x, {});
  LINEA_CHECK(groups > 0 && x.size(1) % groups == 0 && weight.size(0) % groups == 0,
              "[{}] groups {} must be positive and divide the input's {} channels and weight {}'s dim 0", op, groups,
              x.size(1), shape_str(weight.shape()));
  const int64_t expected = transposed ? weight.size(0) : weight.size(1) * groups;
  LINEA_CHECK(x.size(1) == expected, "[{}] input {} has {} channels but weight {} with groups {} expects {}", op,
              shape_str(x.shape()), x.size(1), shape_str(weight.shape()), groups, expected);
}

Tensor pool(const char* op, const Tensor& x, Size2 kernel, Size2 stride, Size2 padding, double pad_value,
            bool take_max) {
  check_image(op, x);
  const Window win{kernel, stride.h == 0 && stride.w == 0 ? kernel : stride, padding, 1};
  check_window(op, win);
  LINEA_CHECK(2 * padding.h <= kernel.h && 2 * padding.w <= kernel.w,
              "[{}] padding ({}, {}) must be at most half the kernel ({}, {})", op, padding.h, padding.w, kernel.h,
              kernel.w);
  const Size2 out = out_size(op, x.size(2), x.size(3), win);
  const Tensor cols = im2col(x, out, win, pad_value);  // [N, C, K, L]
  const Tensor r = take_max ? max(cols, {2}) : mean(cols, {2});
  return r.view({x.size(0), x.size(1), out.h, out.w});
}

}  // namespace

Tensor conv2d(const Tensor& x, const Tensor& weight, const Tensor& bias, Size2 stride, Size2 padding, Size2 dilation,
              int64_t groups) {
  check_conv("conv2d", x, weight, groups, false);
  const int64_t N = x.size(0), C = x.size(1), O = weight.size(0);
  if (bias.defined()) check_param("conv2d", "bias", bias, x, {O});
  const Window win{{weight.size(2), weight.size(3)}, stride, padding, dilation};
  check_window("conv2d", win);
  const Size2 out = out_size("conv2d", x.size(2), x.size(3), win);
  const int64_t K = win.kernel.h * win.kernel.w, L = out.h * out.w;
  // [N, g, C/g K, L] columns times each group's [O/g, C/g K] weight, batched over N and g.
  const Tensor cols = im2col(x, out, win, 0).view({N, groups, C / groups * K, L});
  const Tensor y = matmul(weight.reshape({groups, O / groups, C / groups * K}), cols);
  return add_bias(y.view({N, O, out.h, out.w}), bias);
}

Tensor conv_transpose2d(const Tensor& x, const Tensor& weight, const Tensor& bias, Size2 stride, Size2 padding,
                        Size2 output_padding, int64_t groups, Size2 dilation) {
  const char* op = "conv_transpose2d";
  check_conv(op, x, weight, groups, true);
  const int64_t N = x.size(0), C = x.size(1), H = x.size(2), W = x.size(3), O = weight.size(1) * groups;
  if (bias.defined()) check_param(op, "bias", bias, x, {O});
  const Window win{{weight.size(2), weight.size(3)}, stride, padding, dilation};
  check_window(op, win);
  LINEA_CHECK(output_padding.h >= 0 && output_padding.w >= 0 &&
                  (output_padding.h < stride.h || output_padding.h < dilation.h) &&
                  (output_padding.w < stride.w || output_padding.w < dilation.w),
              "[{}] output_padding ({}, {}) must be >= 0 and smaller than stride ({}, {}) or dilation ({}, {})", op,
              output_padding.h, output_padding.w, stride.h, stride.w, dilation.h, dilation.w);
  const Size2 full_size{(H - 1) * stride.h - 2 * padding.h + dilation.h * (win.kernel.h - 1) + output_padding.h + 1,
                        (W - 1) * stride.w - 2 * padding.w + dilation.w * (win.kernel.w - 1) + output_padding.w + 1};
  LINEA_CHECK(full_size.h > 0 && full_size.w > 0,
              "[{}] input {} with kernel ({}, {}), stride ({}, {}), padding ({}, {}) gives output size ({}, {}) <= 0",
              op, shape_str(x.shape()), win.kernel.h, win.kernel.w, stride.h, stride.w, padding.h, padding.w,
              full_size.h, full_size.w);
  const int64_t K = win.kernel.h * win.kernel.w, L = H * W, HW = full_size.h * full_size.w;
  // Each group's columns [O/g K, L] = its weightᵀ [O/g K, C/g] times its input [C/g, L]; then every
  // column entry is added to the output element conv2d's im2col would have read it from.
  const Tensor wt = weight.reshape({groups, C / groups, O / groups * K}).transpose(1, 2);
  const Tensor cols = matmul(wt, x.reshape({N, groups, C / groups, L})).reshape({N, O, K * L});
  const Tensor y = col2im(cols, im2col_index(full_size.h, full_size.w, {H, W}, win, x.device()).index, HW);
  return add_bias(y.narrow(2, 0, HW).reshape({N, O, full_size.h, full_size.w}), bias);
}

Tensor max_pool2d(const Tensor& x, Size2 kernel_size, Size2 stride, Size2 padding) {
  return pool("max_pool2d", x, kernel_size, stride, padding, -std::numeric_limits<double>::infinity(), true);
}

Tensor avg_pool2d(const Tensor& x, Size2 kernel_size, Size2 stride, Size2 padding) {
  return pool("avg_pool2d", x, kernel_size, stride, padding, 0, false);
}

Tensor batch_norm(const Tensor& x, const Tensor& running_mean, const Tensor& running_var, const Tensor& weight,
                  const Tensor& bias, bool training, double momentum, double eps) {
  const char* op = "batch_norm";
  LINEA_CHECK(x.defined() && x.dim() >= 2 && is_floating(x.dtype()),
              "[{}] expected input [N, C, ...] float32 or float64, got {}", op, describe(x));
  const int64_t C = x.size(1);
  for (const auto& [what, t] : {std::pair{"running_mean", &running_mean}, std::pair{"running_var", &running_var},
                                std::pair{"weight", &weight}, std::pair{"bias", &bias}})
    if (t->defined()) check_param(op, what, *t, x, {C});
  LINEA_CHECK(eps >= 0 && momentum >= 0 && momentum <= 1, "[{}] eps {} must be >= 0 and momentum {} in [0, 1]", op,
              eps, momentum);
  std::vector<int64_t> dims{0};
  Shape channel(x.dim(), 1);  // [1, C, 1, ...]: a per-channel tensor broadcast over x
  channel[1] = C;
  for (int64_t d = 2; d < x.dim(); ++d) dims.push_back(d);
  Tensor mu, var_;
  if (training) {
    const int64_t n = x.numel() / C;
    LINEA_CHECK(n > 1, "[{}] training needs more than one value per channel, got input {}", op,
                shape_str(x.shape()));
    mu = mean(x, dims, true);
    var_ = var(x, dims, true, 0);
    NoGradGuard no_grad;
    if (running_mean.defined()) {
      Tensor rm = running_mean;
      rm *= 1 - momentum;
      rm += mu.detach().view({C}) * momentum;
    }
    if (running_var.defined()) {
      Tensor rv = running_var;
      rv *= 1 - momentum;
      rv += var_.detach().view({C}) * (momentum * static_cast<double>(n) / static_cast<double>(n - 1));
    }
  } else {
    LINEA_CHECK(running_mean.defined() && running_var.defined(),
                "[{}] eval mode (training = false) needs running_mean and running_var", op);
    mu = running_mean.view(channel);
    var_ = running_var.view(channel);
  }
  Tensor y = (x - mu) * rsqrt(var_ + eps);
  if (weight.defined()) y = y * weight.view(channel);
  if (bias.defined()) y = y + bias.view(channel);
  return y;
}

}  // namespace linea::nn::functional
