// Initialisation helpers, in place on a parameter's data (PyTorch's torch.nn.init). Each fills
// a fresh host tensor from a Generator (the global seeded one by default, so `manual_seed(s)`
// then building a model gives the same weights bit for bit) and copies it into `t` through the
// backend, outside autograd. Each returns `t` for chaining.
//
// Also here: `to(module, dtype)`, which converts a whole model's floating parameters and buffers,
// e.g. to float64 for gradchecks, and `to(module, device)`, which moves a model to the GPU.
#pragma once
#include <optional>

#include "linea/nn/module.h"
#include "linea/tensor/random.h"

namespace linea::nn {

Tensor zeros_(Tensor t);
Tensor ones_(Tensor t);
Tensor constant_(Tensor t, double value);
Tensor uniform_(Tensor t, double low, double high, Generator& gen = default_generator());
Tensor normal_(Tensor t, double mean = 0, double std = 1, Generator& gen = default_generator());
// N(0, std²) conditioned on [a, b] (default [-2 std, 2 std]), by rejection: redraw outside.
Tensor trunc_normal_(Tensor t, double std = 1, std::optional<double> a = {}, std::optional<double> b = {},
                     Generator& gen = default_generator());
// U(-bound, bound), bound = gain * sqrt(6 / (fan_in + fan_out)); t has at least 2 dims, read as
// [fan_out, fan_in, receptive field...] like PyTorch.
Tensor xavier_uniform_(Tensor t, double gain = 1, Generator& gen = default_generator());

// Converts every floating parameter and buffer of `m` (recursively) to `dtype`, in place: the
// tensors keep their identity (handles held by the module, or by anyone else, see the new data),
// like PyTorch's module.to(dtype). Integer buffers are left alone; accumulated grads are dropped.
// Build the optimizer after converting.
void to(Module& m, DType dtype);

// Moves every parameter and buffer of `m` (recursively, any dtype) to `device`, in place and with
// the same identity rules as to(m, dtype): registrations and outside handles follow, accumulated
// grads are dropped. Build the optimizer afterwards (its state is created on the parameters'
// device at the first step). Throws when the device has no backend (no GPU).
void to(Module& m, Device device);

}  // namespace linea::nn
