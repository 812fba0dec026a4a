// Embeddings: token lookup, learned positions, rotary positions (RoPE) and image patches.
#pragma once
#include <memory>

#include "linea/nn/layers.h"

namespace linea::nn {

// weight[idx]: int64 indices of any shape -> idx.shape + [dim]. weight starts as N(0, init_std²):
// PyTorch's default is 1.0; GPT-style language models use 0.02.
class Embedding : public Module {
 public:
  Embedding(int64_t num_embeddings, int64_t dim, double init_std = 1.0);
  Tensor forward(const Tensor& idx) override;

  Tensor weight;  // [num_embeddings, dim]
};

// Learned absolute positions: x [..., N, dim] + weight[offset : offset + N]. weight starts as a
// truncated N(0, 0.02²) (timm's ViT). `offset` shifts the positions (streaming generation).
class PositionalEmbedding : public Module {
 public:
  PositionalEmbedding(int64_t max_len, int64_t dim, double init_std = 0.02);
  Tensor forward(const Tensor& x, int64_t offset);
  Tensor forward(const Tensor& x) override { return forward(x, 0); }
  int64_t max_len() const { return max_len_; }

  Tensor weight;  // [max_len, dim]

 private:
  int64_t max_len_, dim_;
};

// Rotary position embedding, GPT-NeoX style: the last dim is split into halves (x1, x2) and
// position t rotates each pair (x1_i, x2_i) by the angle t * base^(-2i/head_dim):
//   [x1 cos - x2 sin, x2 cos + x1 sin].
// Applied to x [..., N, head_dim] (e.g. [B, H, N, hd]) at positions offset .. offset + N - 1.
// A fixed linear map, so its gradient comes from autograd; no parameters. The cos/sin tables
// are computed in double and cached (grown on demand), not stored in the state dict.
class RotaryEmbedding : public Module {
 public:
  explicit RotaryEmbedding(int64_t head_dim, double base = 10000);
  Tensor forward(const Tensor& x, int64_t offset);
  Tensor forward(const Tensor& x) override { return forward(x, 0); }

 private:
  void ensure_tables(int64_t len, DType dtype, Device device);
  int64_t head_dim_;
  double base_;
  Tensor cos_, sin_;  // [cached length, head_dim / 2]
};

// Images [B, C, H, W] (H = W = img_size) -> patch tokens [B, N, dim], N = (img_size / patch)².
// Each patch is flattened in (channel, row, col) order — the layout of a Conv2d kernel
// [dim, C, p, p], so this equals a stride-p convolution — and projected by `proj`.
// Tokens are in raster order by default. block_major(b) reorders them so that each b×b block of
// the patch grid is one contiguous range of b² tokens (blocks in raster order, raster order
// inside a block): the layout MHLA's block mixing expects on images (spec §1.3). The reordering
// is folded into the patchify copy, so it costs nothing.
class PatchEmbed : public Module {
 public:
  PatchEmbed(int64_t img_size, int64_t patch_size, int64_t in_chans, int64_t dim);
  PatchEmbed& block_major(int64_t block);
  Tensor forward(const Tensor& x) override;
  int64_t grid_size() const { return grid_; }           // patches per side
  int64_t num_patches() const { return grid_ * grid_; }
  int64_t block() const { return block_; }              // 1: raster order

  std::shared_ptr<Linear> proj;  // [C·p·p] -> [dim]

 private:
  int64_t img_, patch_, chans_, grid_, block_ = 1;
};

}  // namespace linea::nn
