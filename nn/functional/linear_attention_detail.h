// Causal linear attention's chunkwise composition (linear_attention.cpp): the form for a backend
// without causal MHLA kernels, kept callable so that tests hold the kernels' path against it.
// Not part of the public API (not in linea.h).
#pragma once
#include <vector>

#include "linea/nn/functional/attention.h"

namespace linea::nn::functional::detail {

// inputs: {q, k, v}, or with packed = H > 0 the packed projection {qkv}; opts.causal is assumed
// and the inputs already checked (linear_attention does both).
Tensor linear_attention_chunkwise(const char* op, const std::vector<Tensor>& inputs, int64_t packed,
                                  const LinearAttentionOptions& opts);

}  // namespace linea::nn::functional::detail
