// Attention layers: x [B, N, dim] -> [B, N, dim]. Each one projects x to q, k, v with one fused
// [3·dim, dim] Linear, splits heads ([B, N, dim] -> [B, H, N, dim/H], views only), attends with
// its functional op (nn/functional/attention.h), merges heads and applies the output Linear.
//   MultiHeadAttention — softmax attention (fused, tiled: O(N·d) memory)
//   LinearAttention    — φ(q)(Σφ(k)ᵀv) / (φ(q)·Σφ(k) + eps)
//   MHLA               — multi-head linear attention with a learnable block-mixing matrix `mix`
#pragma once
#include <memory>
#include <utility>

#include "linea/nn/embedding.h"
#include "linea/nn/functional/attention.h"
#include "linea/nn/layers.h"
#include "linea/nn/norm.h"

namespace linea::nn {

// The shared skeleton: qkv projection, head split, attend(), head merge, output projection.
class QKVAttention : public Module {
 public:
  Tensor forward(const Tensor& x) override;
  // residual + forward(x), the add done by the output projection's gemm (linear_add).
  Tensor forward_add(const Tensor& x, const Tensor& residual);
  int64_t dim() const { return dim_; }
  int64_t heads() const { return heads_; }

  std::shared_ptr<Linear> qkv;   // [dim] -> [3·dim]: q, k, v stacked
  std::shared_ptr<Linear> proj;  // [dim] -> [dim]

 protected:
  QKVAttention(std::string type_name, int64_t dim, int64_t heads, bool qkv_bias);
  // q, k, v: [B, H, N, dim/H] (non-contiguous views of the qkv output) -> [B, H, N, dim/H].
  virtual Tensor attend(const Tensor& q, const Tensor& k, const Tensor& v) = 0;
  // x [B, N, dim] -> the heads' outputs [B, H, N, dim/H]: projects q, k, v and calls attend().
  // An attention whose op has a packed form (softmax_attention_qkv, linear_attention_qkv, mhla_qkv)
  // overrides it to run one qkv product and hand the op its [B, N, 3·dim] output.
  virtual Tensor project_and_attend(const Tensor& x);

 private:
  int64_t dim_, heads_;
};

struct MultiHeadAttentionConfig {
  int64_t dim = 0;
  int64_t heads = 1;
  bool causal = false;
  bool qkv_bias = true;
};

class MultiHeadAttention : public QKVAttention {
 public:
  explicit MultiHeadAttention(MultiHeadAttentionConfig c);

 protected:
  Tensor attend(const Tensor& q, const Tensor& k, const Tensor& v) override;
  Tensor project_and_attend(const Tensor& x) override;

 private:
  MultiHeadAttentionConfig cfg_;
};

struct LinearAttentionConfig {
  int64_t dim = 0;
  int64_t heads = 1;
  bool causal = false;
  bool qkv_bias = true;
  functional::FeatureMap feature_map = functional::FeatureMap::ReluEps;
  double eps = 1e-6;
};

class LinearAttention : public QKVAttention {
 public:
  explicit LinearAttention(LinearAttentionConfig c);

 protected:
  Tensor attend(const Tensor& q, const Tensor& k, const Tensor& v) override;
  Tensor project_and_attend(const Tensor& x) override;

 private:
  LinearAttentionConfig cfg_;
};

// How the non-causal mixing matrix starts (spec §2.1): from the distances D between the centres
// of the blocks of a g×g block grid, m = 1 − D/Dmax (Linear), cos(π/4·D/Dmax) (Cos),
// exp(−D/σ) (Exp), exp(−D²/(2σ²)) with σ = Dmax/3 (Gaussian, not normalised) or 1[D ≤ thres]
// (Local); then each column is divided by its sum.
enum class MixInit { Linear, Cos, Exp, Gaussian, Local };

// The [g², g²] block-distance mixing matrix (float32), blocks numbered row-major on the grid.
Tensor block_distance_mix(int64_t grid, MixInit init = MixInit::Linear, double exp_sigma = 3, double local_thres = 1.5);
// The causal init: W_ij = 1/(i+1) for j <= i, 0 above the diagonal (each row averages the
// visible chunks).
Tensor causal_mix(int64_t num_chunks);

// Raster token order -> block-major order for a grid_h × grid_w token grid cut into block×block
// tiles: perm[i] is the raster index of the i-th block-major token, so
// index_select(x, 1, perm) lays tokens [B, N, C] out block-major. (PatchEmbed::block_major does
// this inside its patchify copy.)
Tensor block_major_order(int64_t grid_h, int64_t grid_w, int64_t block);

struct MHLAConfig {
  int64_t dim = 0;
  int64_t heads = 1;
  bool causal = false;
  bool qkv_bias = true;
  double eps = 1e-6;
  // Non-causal (images): tokens are block-major (see block_major_order) in M = grid² blocks of
  // N / M tokens each; the mixing matrix starts as block_distance_mix(grid, init). φ = relu + eps.
  int64_t grid = 4;
  MixInit init = MixInit::Linear;
  // Causal (language): chunks of block_len tokens; `mix` is sized for max_len tokens and its
  // leading ceil(N / block_len) rows/columns are used for shorter inputs. φ = relu, then RoPE
  // when `rope` (causal only: refused otherwise); scale d^-1/2; the output is RMS-normalised per
  // head before the projection.
  int64_t block_len = 64;
  int64_t max_len = 2048;
  bool rope = false;
  double rope_base = 10000;
};

class MHLA : public QKVAttention {
 public:
  explicit MHLA(MHLAConfig c);
  // mix is projected after every optimizer step (nn::set_projection; keeps every normaliser
  // positive): mix ← clamp(mix, 0, 1) (non-causal) or tril(clamp(mix, 1e-5, 1)) (causal).
  const MHLAConfig& config() const { return cfg_; }

  Tensor mix;                            // [M, M], shared by all heads and batch items
  std::shared_ptr<RMSNorm> out_norm;     // causal only: per-head RMSNorm over dim/H
  std::shared_ptr<RotaryEmbedding> rope; // causal with rope only

 protected:
  Tensor attend(const Tensor& q, const Tensor& k, const Tensor& v) override;
  Tensor project_and_attend(const Tensor& x) override;

 private:
  functional::MHLAOptions noncausal_options(int64_t N) const;
  // The causal op's options for N tokens (φ = relu) and the chunks of mix it reads (a view, so
  // the gradient reaches mix).
  std::pair<functional::MHLAOptions, Tensor> causal_setup(int64_t N) const;
  MHLAConfig cfg_;
};

}  // namespace linea::nn
