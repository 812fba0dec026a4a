// The pre-norm transformer block: x + attn(ln1(x)), then x + mlp(ln2(x)) (mlp_ratio 0: no MLP, as
// in Zoology's attention-only recall models), with the attention
// chosen by name so the three kinds can be swapped in one model (nn/attention.h):
//   "softmax"  MultiHeadAttention (exact softmax attention)
//   "linear"   LinearAttention
//   "mhla"     MHLA (multi-head linear attention with block mixing)
#pragma once
#include <memory>
#include <string>

#include "linea/nn/attention.h"
#include "linea/nn/layers.h"
#include "linea/nn/norm.h"

namespace linea::nn {

struct TransformerBlockConfig {
  int64_t dim = 0;
  int64_t heads = 1;
  double mlp_ratio = 4.0;             // MLP hidden size = mlp_ratio * dim; 0: no MLP (nor ln2)
  std::string attention = "softmax";  // "softmax" | "linear" | "mhla"
  bool causal = false;
  double dropout = 0;                 // on the attention output and inside the MLP
  double norm_eps = 1e-5;
  // mhla only (the meaning and defaults of MHLAConfig):
  int64_t grid = 4;         // non-causal: tokens are block-major in grid x grid blocks
  int64_t block_len = 64;   // causal: tokens per chunk
  int64_t max_len = 2048;   // causal: the longest sequence (sizes the mixing matrix)
  bool rope = false;        // causal: RoPE on φ(q), φ(k)
};

class TransformerBlock : public Module {
 public:
  explicit TransformerBlock(const TransformerBlockConfig& config);
  Tensor forward(const Tensor& x) override;  // [B, N, dim] -> [B, N, dim]
  const TransformerBlockConfig& config() const { return config_; }

  std::shared_ptr<LayerNorm> ln1, ln2;  // ln2 null without an MLP
  std::shared_ptr<QKVAttention> attn;
  std::shared_ptr<MLP> mlp;  // null when mlp_ratio is 0
  std::shared_ptr<Dropout> drop;

 private:
  TransformerBlockConfig config_;
};

// The attention module a block builds for config.attention; throws, listing the valid names, on
// an unknown one.
std::shared_ptr<QKVAttention> make_attention(const TransformerBlockConfig& config);

}  // namespace linea::nn
