// Linear attention's compositions from primitive ops (linear_attention.cpp): the forms beyond the
// kernels' limits, kept callable so that tests hold the kernels' path against them.
// Not part of the public API (not in linea.h).
#pragma once
#include <vector>

#include "linea/nn/functional/attention.h"

namespace linea::nn::functional::detail {

// Non-causal: one summary for all queries; causal: the chunkwise form. inputs: {q, k, v}, or with
// packed = H > 0 the packed projection {qkv}; the inputs are already checked (linear_attention
// does that).
Tensor linear_attention_composite(const char* op, const std::vector<Tensor>& inputs, int64_t packed,
                                  const LinearAttentionOptions& opts);

// Causal linear attention on the device's causal MHLA kernels run on V' = [V | 1], with the
// division by the normaliser and dU' as ops around them: what linear_attention runs where the
// kernels have no normaliser of their own (has_fused_causal_normaliser: CUDA), and the form the
// normalising kernels are tested against; inputs as above.
Tensor linear_attention_kernel_causal(const char* op, const std::vector<Tensor>& inputs, int64_t packed,
                                      const LinearAttentionOptions& opts);

}  // namespace linea::nn::functional::detail
