// Losses, with PyTorch's formulas and reductions. cross_entropy is one fused op (log-softmax +
// NLL in a single pass over each row, with a hand-written backward), because it sits at the end of every language model where the class
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

// The negative log-likelihood of log-probabilities (log_softmax's output) [N, C] at int64 class
// indices targets [N] in [0, C) or ignore_index: loss_i = -log_probs[i, targets_i]. Mean divides by
// the number of non-ignored rows (NaN for none, as in PyTorch). cross_entropy(x, t) is
// nll_loss(log_softmax(x, 1), t) in one fused op.
Tensor nll_loss(const Tensor& log_probs, const Tensor& targets, Reduction reduction = Reduction::Mean,
                int64_t ignore_index = -100);

// Huber-style loss of d = pred - target: 0.5 d^2 / beta where |d| < beta, else |d| - 0.5 beta
// (beta = 0 is the L1 loss). pred and target have one shape and floating dtype.
Tensor smooth_l1_loss(const Tensor& pred, const Tensor& target, Reduction reduction = Reduction::Mean,
                      double beta = 1.0);

// -(t log p + (1 - t) log(1 - p)) for probabilities p in [0, 1] (an error otherwise) and targets t of
// p's shape and dtype. Each log is clamped to >= -100 as in PyTorch, so p = 0 or 1 gives a finite
// loss; the gradient is PyTorch's (p - t) / max(p (1 - p), 1e-12), finite there too.
Tensor binary_cross_entropy(const Tensor& probs, const Tensor& target, Reduction reduction = Reduction::Mean);

// binary_cross_entropy(sigmoid(logits), target) computed from the logits: softplus(x) - x t, stable
// for any x (no log of a sigmoid that rounded to 0 or 1); the gradient is sigmoid(x) - t.
Tensor binary_cross_entropy_with_logits(const Tensor& logits, const Tensor& target,
                                        Reduction reduction = Reduction::Mean);

}  // namespace linea::nn
