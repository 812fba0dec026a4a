#include "linea/nn/transformer.h"

#include <algorithm>
#include <cmath>

#include "linea/tensor/error.h"

namespace linea::nn {

std::shared_ptr<QKVAttention> make_attention(const TransformerBlockConfig& c) {
  if (c.attention == "softmax")
    return std::make_shared<MultiHeadAttention>(
        MultiHeadAttentionConfig{.dim = c.dim, .heads = c.heads, .causal = c.causal});
  if (c.attention == "linear")
    return std::make_shared<LinearAttention>(LinearAttentionConfig{.dim = c.dim, .heads = c.heads, .causal = c.causal});
  if (c.attention == "mhla")
    return std::make_shared<MHLA>(MHLAConfig{.dim = c.dim,
                                             .heads = c.heads,
                                             .causal = c.causal,
                                             .grid = c.grid,
                                             .block_len = c.block_len,
                                             .max_len = c.max_len,
                                             .rope = c.rope});
  throw Error(fmt::format("[TransformerBlock] unknown attention '{}': expected one of softmax, linear, mhla",
                          c.attention));
}

TransformerBlock::TransformerBlock(const TransformerBlockConfig& config)
    : Module("TransformerBlock"), config_(config) {
  const TransformerBlockConfig& c = config_;
  LINEA_CHECK(c.dim > 0 && c.mlp_ratio >= 0,
              "[TransformerBlock] need dim > 0 and mlp_ratio >= 0, got dim {}, mlp_ratio {}", c.dim, c.mlp_ratio);
  ln1 = register_module("ln1", std::make_shared<LayerNorm>(c.dim, c.norm_eps));
  attn = register_module("attn", make_attention(c));
  drop = register_module("drop", std::make_shared<Dropout>(c.dropout));
  if (c.mlp_ratio == 0) return;
  ln2 = register_module("ln2", std::make_shared<LayerNorm>(c.dim, c.norm_eps));
  const auto hidden = std::max<int64_t>(1, std::lround(c.mlp_ratio * static_cast<double>(c.dim)));
  mlp = register_module("mlp", std::make_shared<MLP>(c.dim, hidden, c.dim, nullptr, c.dropout));
}

Tensor TransformerBlock::forward(const Tensor& x) {
  LINEA_CHECK(x.dim() == 3 && x.size(2) == config_.dim, "[TransformerBlock] expected input [B, N, {}], got {}",
              config_.dim, shape_str(x.shape()));
  // The skip connections are added by the output projections' gemms (forward_add), except across
  // an active dropout.
  const Tensor h = drop->active() ? x + drop->forward(attn->forward(ln1->forward(x)))
                                  : attn->forward_add(ln1->forward(x), x);
  return mlp ? mlp->forward_add(ln2->forward(h), h) : h;
}

}  // namespace linea::nn
