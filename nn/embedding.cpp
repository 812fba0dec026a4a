#include "linea/nn/embedding.h"

#include <algorithm>
#include <cmath>

#include "linea/autograd/ops_index.h"
#include "linea/nn/init.h"
#include "linea/tensor/creation.h"
#include "linea/tensor/error.h"

namespace linea::nn {

// ---- Embedding ----

Embedding::Embedding(int64_t num_embeddings, int64_t dim, double init_std) : Module("Embedding") {
  LINEA_CHECK(num_embeddings > 0 && dim > 0, "[Embedding] num_embeddings {} and dim {} must be positive",
              num_embeddings, dim);
  weight = register_parameter("weight", normal_(empty({num_embeddings, dim}), 0, init_std));
}

Tensor Embedding::forward(const Tensor& idx) {
  LINEA_CHECK(idx.dtype() == DType::Int64, "[Embedding] expected int64 indices, got {} {}", shape_str(idx.shape()),
              idx.dtype());
  return embedding(weight, idx);
}

// ---- PositionalEmbedding ----

PositionalEmbedding::PositionalEmbedding(int64_t max_len, int64_t dim, double init_std)
    : Module("PositionalEmbedding"), max_len_(max_len), dim_(dim) {
  LINEA_CHECK(max_len > 0 && dim > 0, "[PositionalEmbedding] max_len {} and dim {} must be positive", max_len, dim);
  weight = register_parameter("weight", trunc_normal_(empty({max_len, dim}), init_std));
}

Tensor PositionalEmbedding::forward(const Tensor& x, int64_t offset) {
  LINEA_CHECK(x.dim() >= 2 && x.size(-1) == dim_, "[PositionalEmbedding] expected input [..., N, {}], got {}", dim_,
              shape_str(x.shape()));
  const int64_t n = x.size(-2);
  LINEA_CHECK(offset >= 0 && offset + n <= max_len_,
              "[PositionalEmbedding] positions {}..{} (N = {} tokens at offset {}) exceed max_len {}", offset,
              offset + n - 1, n, offset, max_len_);
  return x + weight.narrow(0, offset, n);
}

// ---- RotaryEmbedding ----

RotaryEmbedding::RotaryEmbedding(int64_t head_dim, double base)
    : Module("RotaryEmbedding"), head_dim_(head_dim), base_(base) {
  LINEA_CHECK(head_dim > 0 && head_dim % 2 == 0 && base > 0,
              "[RotaryEmbedding] head_dim must be even and positive and base positive, got head_dim {}, base {}",
              head_dim, base);
}

void RotaryEmbedding::ensure_tables(int64_t len, DType dtype, Device device) {
  if (cos_.defined() && cos_.size(0) >= len && cos_.dtype() == dtype && cos_.device() == device) return;
  const int64_t half = head_dim_ / 2;
  len = std::max(len, cos_.defined() ? 2 * cos_.size(0) : int64_t{0});  // grow geometrically
  std::vector<double> c(len * half), s(len * half);
  for (int64_t i = 0; i < half; ++i) {
    const double inv_freq = std::pow(base_, -2.0 * static_cast<double>(i) / static_cast<double>(head_dim_));
    for (int64_t t = 0; t < len; ++t) {
      c[t * half + i] = std::cos(static_cast<double>(t) * inv_freq);
      s[t * half + i] = std::sin(static_cast<double>(t) * inv_freq);
    }
  }
  cos_ = from_vector(c, {len, half}).to(dtype).to(device);
  sin_ = from_vector(s, {len, half}).to(dtype).to(device);
}

Tensor RotaryEmbedding::forward(const Tensor& x, int64_t offset) {
  LINEA_CHECK(x.dim() >= 2 && x.size(-1) == head_dim_ && is_floating(x.dtype()),
              "[RotaryEmbedding] expected a floating input [..., N, {}], got {} {}", head_dim_, shape_str(x.shape()),
              x.dtype());
  LINEA_CHECK(offset >= 0, "[RotaryEmbedding] offset must be >= 0, got {}", offset);
  const int64_t n = x.size(-2), half = head_dim_ / 2, last = x.dim() - 1;
  ensure_tables(offset + n, x.dtype(), x.device());
  Tensor c = cos_.narrow(0, offset, n), s = sin_.narrow(0, offset, n);  // [N, half], broadcast over leading dims
  Tensor x1 = x.narrow(last, 0, half), x2 = x.narrow(last, half, half);
  return cat({x1 * c - x2 * s, x2 * c + x1 * s}, last);
}

// ---- PatchEmbed ----

PatchEmbed::PatchEmbed(int64_t img_size, int64_t patch_size, int64_t in_chans, int64_t dim)
    : Module("PatchEmbed"), img_(img_size), patch_(patch_size), chans_(in_chans) {
  LINEA_CHECK(img_size > 0 && patch_size > 0 && in_chans > 0 && dim > 0 && img_size % patch_size == 0,
              "[PatchEmbed] need positive sizes and img_size divisible by patch_size, got img_size {}, patch {}, "
              "in_chans {}, dim {}",
              img_size, patch_size, in_chans, dim);
  grid_ = img_size / patch_size;
  proj = register_module("proj", std::make_shared<Linear>(in_chans * patch_size * patch_size, dim));
}

PatchEmbed& PatchEmbed::block_major(int64_t block) {
  LINEA_CHECK(block > 0 && grid_ % block == 0, "[PatchEmbed] block {} must divide the {}x{} patch grid", block, grid_,
              grid_);
  block_ = block;
  return *this;
}

Tensor PatchEmbed::forward(const Tensor& x) {
  LINEA_CHECK(x.dim() == 4 && x.size(1) == chans_ && x.size(2) == img_ && x.size(3) == img_,
              "[PatchEmbed] expected images [B, {}, {}, {}], got {}", chans_, img_, img_, shape_str(x.shape()));
  const int64_t B = x.size(0), nb = grid_ / block_, b = block_, p = patch_;
  // [B, C, H, W] as [B, C, hb, p1, py, wb, p2, px] (row = (hb·b + p1)·p + py, likewise columns),
  // then [B, hb, wb, p1, p2 | C, py, px]: token-major, each token's pixels in conv-kernel order.
  Tensor t = x.reshape({B, chans_, nb, b, p, nb, b, p}).permute({0, 2, 5, 3, 6, 1, 4, 7});
  return proj->forward(t.reshape({B, grid_ * grid_, chans_ * p * p}));
}

}  // namespace linea::nn
