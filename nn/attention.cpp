// Attention modules (nn/attention.h).
#include "linea/nn/attention.h"

#include <cmath>
#include <numbers>
#include <vector>

#include "linea/autograd/graph.h"
#include "linea/autograd/ops_index.h"
#include "linea/autograd/ops_matmul.h"
#include "linea/nn/optim.h"
#include "linea/tensor/backend.h"
#include "linea/tensor/creation.h"
#include "linea/tensor/error.h"

namespace linea::nn {

namespace F = functional;

// ---- QKVAttention ----

QKVAttention::QKVAttention(std::string type_name, int64_t dim, int64_t heads, bool qkv_bias)
    : Module(std::move(type_name)), dim_(dim), heads_(heads) {
  LINEA_CHECK(dim > 0 && heads > 0 && dim % heads == 0, "[{}] dim {} must be a positive multiple of heads {}",
              this->type_name(), dim, heads);
  qkv = register_module("qkv", std::make_shared<Linear>(dim, 3 * dim, qkv_bias));
  proj = register_module("proj", std::make_shared<Linear>(dim, dim));
}

Tensor QKVAttention::forward(const Tensor& x) { return forward_add(x, Tensor()); }

Tensor QKVAttention::forward_add(const Tensor& x, const Tensor& residual) {
  LINEA_CHECK(x.dim() == 3 && x.size(2) == dim_, "[{}] expected x [B, N, {}], got {}", type_name(), dim_,
              shape_str(x.shape()));
  const Tensor o = project_and_attend(x);
  // Merging the heads is a view when attend() wrote o token-major (MHLA's fused kernels), else one copy.
  const Tensor merged = o.transpose(1, 2).reshape({x.size(0), x.size(1), dim_});
  return residual.defined() ? linear_add(merged, proj->weight, proj->bias, residual) : proj->forward(merged);
}

Tensor QKVAttention::project_and_attend(const Tensor& x) {
  const int64_t B = x.size(0), N = x.size(1), hd = dim_ / heads_;
  // For an op without a packed form (causal MHLA with RoPE; the others override this with their
  // *_qkv forms): q, k, v each from its own rows of the qkv weight (views: one
  // parameter, as stacked). Slicing one [B, N, 3·dim] product instead would hand each slice's
  // backward a zero-filled gradient of the whole product, three of which are then added up
  // (measured with --profile on the ViT: about 225 MB of fills, adds and copies per step). This
  // way each gradient reaches x and its own slice of the weight directly.
  auto project = [&](int64_t i) {  // [B, N, dim] -> [B, H, N, hd], a view
    const Tensor b = qkv->bias.defined() ? qkv->bias.narrow(0, i * dim_, dim_) : Tensor();
    return linear(x, qkv->weight.narrow(0, i * dim_, dim_), b).view({B, N, heads_, hd}).transpose(1, 2);
  };
  return attend(project(0), project(1), project(2));
}

// ---- MultiHeadAttention, LinearAttention ----

MultiHeadAttention::MultiHeadAttention(MultiHeadAttentionConfig c)
    : QKVAttention("MultiHeadAttention", c.dim, c.heads, c.qkv_bias), cfg_(c) {}

Tensor MultiHeadAttention::attend(const Tensor& q, const Tensor& k, const Tensor& v) {
  return F::softmax_attention(q, k, v, {cfg_.causal});
}

// One [B, N, 3·dim] product; softmax_attention_qkv copies dq, dk, dv into the thirds of its
// gradient, so the projection's backward is one product of each kind.
Tensor MultiHeadAttention::project_and_attend(const Tensor& x) {
  return F::softmax_attention_qkv(linear(x, qkv->weight, qkv->bias), heads(), {cfg_.causal});
}

LinearAttention::LinearAttention(LinearAttentionConfig c)
    : QKVAttention("LinearAttention", c.dim, c.heads, c.qkv_bias), cfg_(c) {}

Tensor LinearAttention::attend(const Tensor& q, const Tensor& k, const Tensor& v) {
  return F::linear_attention(q, k, v, {cfg_.causal, cfg_.feature_map, cfg_.eps});
}

// As MultiHeadAttention's: one [B, N, 3·dim] product, gradients in the thirds of one buffer.
Tensor LinearAttention::project_and_attend(const Tensor& x) {
  return F::linear_attention_qkv(linear(x, qkv->weight, qkv->bias), heads(), {cfg_.causal, cfg_.feature_map, cfg_.eps});
}

// ---- mixing-matrix initialisations ----

Tensor block_distance_mix(int64_t grid, MixInit init, double exp_sigma, double local_thres) {
  LINEA_CHECK(grid > 0, "[block_distance_mix] grid must be > 0, got {}", grid);
  LINEA_CHECK(exp_sigma > 0, "[block_distance_mix] exp_sigma must be > 0, got {}", exp_sigma);
  const int64_t M = grid * grid;
  std::vector<double> D(M * M);
  double dmax = 0;
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < M; ++j) {  // centres (r + .5, s + .5): the .5 cancels in differences
      D[i * M + j] = std::hypot(double(i / grid - j / grid), double(i % grid - j % grid));
      dmax = std::max(dmax, D[i * M + j]);
    }
  if (dmax == 0) dmax = 1;  // one block: every transform gives [[1]] (after normalisation)
  std::vector<double> m(M * M);
  for (int64_t e = 0; e < M * M; ++e) {
    const double d = D[e];
    switch (init) {
      case MixInit::Linear: m[e] = 1 - d / dmax; break;
      case MixInit::Cos: m[e] = std::cos(std::numbers::pi / 4 * d / dmax); break;
      case MixInit::Exp: m[e] = std::exp(-d / exp_sigma); break;
      case MixInit::Gaussian: m[e] = std::exp(-d * d / (2 * (dmax / 3) * (dmax / 3))); break;
      case MixInit::Local: m[e] = d <= local_thres ? 1 : 0; break;
    }
  }
  if (init != MixInit::Gaussian)
    for (int64_t j = 0; j < M; ++j) {  // column normalisation
      double col = 0;
      for (int64_t i = 0; i < M; ++i) col += m[i * M + j];
      for (int64_t i = 0; i < M; ++i) m[i * M + j] /= col;
    }
  return from_vector(std::vector<float>(m.begin(), m.end()), {M, M});
}

Tensor causal_mix(int64_t num_chunks) {
  LINEA_CHECK(num_chunks > 0, "[causal_mix] num_chunks must be > 0, got {}", num_chunks);
  std::vector<float> w(num_chunks * num_chunks, 0.0f);
  for (int64_t i = 0; i < num_chunks; ++i)
    for (int64_t j = 0; j <= i; ++j) w[i * num_chunks + j] = 1.0f / float(i + 1);
  return from_vector(w, {num_chunks, num_chunks});
}

Tensor block_major_order(int64_t grid_h, int64_t grid_w, int64_t block) {
  LINEA_CHECK(grid_h > 0 && grid_w > 0 && block > 0 && grid_h % block == 0 && grid_w % block == 0,
              "[block_major_order] a {}x{} token grid cannot be cut into {}x{} blocks", grid_h, grid_w, block, block);
  std::vector<int64_t> perm;
  perm.reserve(grid_h * grid_w);
  for (int64_t br = 0; br < grid_h / block; ++br)
    for (int64_t bc = 0; bc < grid_w / block; ++bc)
      for (int64_t r = 0; r < block; ++r)
        for (int64_t c = 0; c < block; ++c) perm.push_back((br * block + r) * grid_w + bc * block + c);
  return from_vector(perm, {grid_h * grid_w});
}

// ---- MHLA ----

MHLA::MHLA(MHLAConfig c) : QKVAttention("MHLA", c.dim, c.heads, c.qkv_bias), cfg_(c) {
  const int64_t hd = c.dim / c.heads;
  LINEA_CHECK(c.causal || !c.rope,
              "[MHLA] rope = true needs causal = true: RoPE rotates positions along a sequence, and the "
              "non-causal form (image tokens in blocks) has none; set rope = false");
  if (c.causal) {
    LINEA_CHECK(c.block_len > 0 && c.max_len > 0, "[MHLA] block_len {} and max_len {} must be > 0", c.block_len,
                c.max_len);
    mix = register_parameter("mix", causal_mix((c.max_len + c.block_len - 1) / c.block_len));
    out_norm = register_module("out_norm", std::make_shared<RMSNorm>(hd));
    if (c.rope) rope = register_module("rope", std::make_shared<RotaryEmbedding>(hd, c.rope_base));
  } else {
    mix = register_parameter("mix", block_distance_mix(c.grid, c.init));
  }
  // Projected gradient descent (spec §1, "Positivity"): every optimizer step ends with this, in
  // place, outside autograd. Negative weights can drive a normaliser to zero; without the
  // projection the ViT's training collapses (measured with PyTorch on that model). Captures only
  // `causal`, so it never reaches a destroyed module.
  set_projection(mix, [causal = c.causal](const Tensor& w) {
    Tensor projected = causal ? tril(clamp(w, 1e-5, 1)) : clamp(w, 0, 1);
    backend(w.device()).copy(projected, w);  // writes through the parameter's own storage
  });
}

F::MHLAOptions MHLA::noncausal_options(int64_t N) const {
  const int64_t M = mix.size(0);
  LINEA_CHECK(N % M == 0, "[MHLA] {} tokens cannot be split into the {} blocks of a {}x{} grid", N, M, cfg_.grid,
              cfg_.grid);
  F::MHLAOptions o;
  o.eps = cfg_.eps;
  o.block_len = N / M;
  o.feature_map = F::FeatureMap::ReluEps;
  return o;
}

std::pair<F::MHLAOptions, Tensor> MHLA::causal_setup(int64_t N) const {
  const int64_t M = mix.size(0), chunks = (N + cfg_.block_len - 1) / cfg_.block_len;
  LINEA_CHECK(chunks <= M, "[MHLA] {} tokens exceed max_len {} (mix is [{}, {}] chunks of {})", N, cfg_.max_len, M, M,
              cfg_.block_len);
  F::MHLAOptions o;
  o.eps = cfg_.eps;
  o.causal = true;
  o.block_len = cfg_.block_len;
  o.feature_map = F::FeatureMap::Relu;
  return {o, mix.narrow(0, 0, chunks).narrow(1, 0, chunks)};
}

// One [B, N, 3·dim] product, and mhla_qkv's kernels write dq, dk, dv into the thirds of its
// gradient, so the projection's backward is one product of each kind, faster than three projections
// (measured: docs/benchmarks.md, "MHLA in the models"). With RoPE, which rotates φ(q) and φ(k)
// before the op, the causal form keeps three projections (attend()).
Tensor MHLA::project_and_attend(const Tensor& x) {
  const int64_t N = x.size(1);
  if (!cfg_.causal) return F::mhla_qkv(linear(x, qkv->weight, qkv->bias), heads(), mix, noncausal_options(N));
  if (rope) return QKVAttention::project_and_attend(x);
  const auto [o, w] = causal_setup(N);
  return out_norm->forward(F::mhla_qkv(linear(x, qkv->weight, qkv->bias), heads(), w, o));
}

Tensor MHLA::attend(const Tensor& q, const Tensor& k, const Tensor& v) {
  const int64_t N = q.size(2);
  if (!cfg_.causal) return F::mhla(q, k, v, mix, noncausal_options(N));
  auto [o, w] = causal_setup(N);
  Tensor out;
  if (rope) {  // φ first, then RoPE (spec §3): the op then sees ready-made features
    o.feature_map = F::FeatureMap::Identity;
    out = F::mhla(rope->forward(relu(q)), rope->forward(relu(k)), v, w, o);
  } else {
    out = F::mhla(q, k, v, w, o);
  }
  return out_norm->forward(out);
}

}  // namespace linea::nn
