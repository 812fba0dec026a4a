// Attention as functions of tensors, in linea::nn::functional (reachable from <linea/linea.h>).
//
// Layout: q, k are [B, H, N, d]; v is [B, H, N, dv]; outputs are [B, H, N, dv]. B and H are
// independent (batch items, heads); N is the sequence (token) axis. Inputs may be
// non-contiguous views (e.g. the transposed output of a qkv projection).
//
// Three kinds, so they can be compared side by side:
// - softmax_attention: exact softmax attention, computed in tiles with an online softmax, so
//   memory is O(N·d), never an N×N matrix (FlashAttention's idea, on the CPU).
// - linear_attention: φ(q)(Σ φ(k)ᵀv) / (φ(q)·Σ φ(k) + eps); one d×dv summary for all queries.
// - mhla: multi-head linear attention (arXiv 2601.07832, see docs/mhla.md). Tokens are split
//   into M = ceil(N / block_len) contiguous blocks; each block b has a summary
//   S_b = φ(K_b)ᵀV_b, z_b = φ(K_b)ᵀ1, and a query in block i reads the mixed summary
//   Σ_j W_ij S_j with W = `mix`, a learnable [M, M] matrix shared by all batch items and heads.
//     non-causal: o_t = φ(q_t) Σ_j W_ij S_j / (φ(q_t) · Σ_j W_ij z_j + eps)
//     causal:     o_t = s · φ(q_t)ᵀ (Σ_{j<i} W_ij S_j + W_ii Σ_{u in block i, u ≤ t} φ(k_u) v_uᵀ),
//                 s = d^-1/2, no normaliser (the module normalises its output); the last block
//                 is zero-padded when N is not a multiple of block_len.
#pragma once
#include <cstdint>
#include <vector>

#include "linea/tensor/feature_map.h"
#include "linea/tensor/tensor.h"

namespace linea::nn::functional {

using linea::FeatureMap;  // ReluEps, Elu1, Relu, Identity (tensor/feature_map.h)

struct SoftmaxAttentionOptions {
  bool causal = false;
  double scale = 0;  // 0 means 1/sqrt(d)
};

struct LinearAttentionOptions {
  bool causal = false;
  FeatureMap feature_map = FeatureMap::ReluEps;
  double eps = 1e-6;  // the ReluEps offset and the normaliser's floor
};

struct MHLAOptions {
  bool causal = false;
  int64_t block_len = 0;  // tokens per block (chunk); required
  FeatureMap feature_map = FeatureMap::ReluEps;
  double eps = 1e-6;      // the ReluEps offset and the non-causal normaliser's floor
  double scale = 0;       // causal only: 0 means d^-1/2
  // Non-causal only: the official vision code's normaliser Σ_j W_ij (φ(q_{j,p}) · z_j), which
  // mixes other blocks' queries (spec §1.1). For parity with released checkpoints, not a default.
  bool official_normalizer = false;
};

Tensor softmax_attention(const Tensor& q, const Tensor& k, const Tensor& v, SoftmaxAttentionOptions opts = {});
// softmax_attention on the heads of a packed projection qkv [B, N, 3·H·d] (q, k, v side by side,
// as QKVAttention's qkv Linear writes them): one custom_function on qkv, whose gradient is one
// [B, N, 3·H·d] buffer, so the projection's backward is one product of each kind.
Tensor softmax_attention_qkv(const Tensor& qkv, int64_t heads, SoftmaxAttentionOptions opts = {});
Tensor linear_attention(const Tensor& q, const Tensor& k, const Tensor& v, LinearAttentionOptions opts = {});
// linear_attention on the heads of a packed projection, as softmax_attention_qkv.
Tensor linear_attention_qkv(const Tensor& qkv, int64_t heads, LinearAttentionOptions opts = {});

// The fused operator: block summaries, mixing, output and normaliser in one pass, with the
// hand-written backward of spec §5 (one custom_function). This is what models use.
Tensor mhla(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& mix, MHLAOptions opts);
// mhla() on the heads of a packed projection: qkv [B, N, 3·H·d] holds q, k, v side by side (as
// QKVAttention's qkv Linear writes them), each [B, N, H·d]. With the device's fused kernels the
// one custom_function takes qkv itself, so its backward writes dq, dk, dv into the thirds of one
// [B, N, 3·H·d] gradient: the projection's backward is then one product of each kind, and no
// zero-filled gradient per slice is added up. Elsewhere it is mhla() on the three slices.
Tensor mhla_qkv(const Tensor& qkv, int64_t heads, const Tensor& mix, MHLAOptions opts);
// The same function composed from primitive ops (its backward comes from autograd): the
// reference the fused backward is tested against.
Tensor mhla_composite(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& mix, MHLAOptions opts);

// Streaming causal MHLA for generation: feed one token at a time, get exactly the outputs of
// the chunkwise form. Keeps every finished block summary S_j ([B, H, d, dv] each) plus the
// running summary of the current block; at each block boundary it forms the mixed prefix
// Σ_{j<i} W_ij S_j once, so each token costs O(d·dv).
class MHLAStream {
 public:
  MHLAStream(Tensor mix, MHLAOptions opts);
  // q, k: [B, H, d], v: [B, H, dv] for the next position; returns [B, H, dv].
  Tensor step(const Tensor& q, const Tensor& k, const Tensor& v);
  int64_t position() const { return pos_; }

 private:
  Tensor mix_;
  MHLAOptions opts_;
  int64_t pos_ = 0;
  std::vector<Tensor> summaries_;  // finished blocks' S_j
  Tensor prefix_;                  // Σ_{j<i} W_ij S_j for the current block i
  Tensor running_;                 // Σ φ(k_u) v_uᵀ over the current block so far
};

enum class AttentionKind { Softmax, Linear, MHLA };

// The effective N×N attention weights [B, H, N, N] of one kind (rows sum to 1 for the
// normalised kinds), for small N: to inspect rank and entropy, i.e. to see linear attention's
// "global context collapse" and what MHLA's mixing does about it. `mix` is used by MHLA only.
Tensor attention_matrix(AttentionKind kind, const Tensor& q, const Tensor& k, const Tensor& mix = Tensor(),
                        MHLAOptions opts = {});

}  // namespace linea::nn::functional
