// Losses. cross_entropy is one fused op (log-softmax + NLL in a single pass over each row, with a
// hand-written backward), because it sits at the end of every language model where the class
// count is large: composing it from primitives would materialise several [rows, C] temporaries.
#pragma once
#include <cstdint>

#include "linea/tensor/tensor.h"

namespace linea::nn {

enum class Reduction { Mean, Sum, None };

struct CrossEntropyOptions {
  int64_t ignore_index = -100;  // rows with this target add nothing to the loss or the count
  double label_smoothing = 0;   // eps in [0, 1]: the target is (1 - eps) * one_hot + eps / C
  Reduction reduction = Reduction::Mean;  // Mean divides by the number of non-ignored rows
};

// logits [..., C] (float32/float64), targets [...] int64 class indices in [0, C) or
// ignore_index, on one device. Mean and Sum give a 0-d tensor, None one loss per row (ignored
// rows give 0).
// As in PyTorch, Mean over zero non-ignored rows is NaN.
Tensor cross_entropy(const Tensor& logits, const Tensor& targets, CrossEntropyOptions opts = {});

// Squared error (pred - target)^2 reduced over all elements; pred and target have one shape.
Tensor mse_loss(const Tensor& pred, const Tensor& target, Reduction reduction = Reduction::Mean);

}  // namespace linea::nn
