// The effective N×N attention weights of each kind, composed from plain ops (so they are also
// differentiable, and independent of the fused kernels they are used to check):
//   softmax: softmax(s·QKᵀ) (−inf above the diagonal when causal), s = opts.scale or d^-1/2;
//   linear:  A = φ(Q)φ(K)ᵀ (lower triangle when causal), rows divided by rowsum(A) + eps;
//   MHLA:    non-causal A = (φ(Q)φ(K)ᵀ) ∘ E, E[t,u] = W[b(t), b(u)], rows divided by rowsum + eps;
//            causal s·(φ(q_t)·φ(k_u))·W[b(t), b(u)] for u <= t, unnormalised (as the op).
// Dividing by rowsum + eps (not rowsum) makes A @ V reproduce each op's output exactly; the rows
// then sum to 1 − eps/(rowsum + eps).
#include <cmath>

#include "linea/autograd/ops_elementwise.h"
#include "linea/autograd/ops_index.h"
#include "linea/autograd/ops_matmul.h"
#include "linea/autograd/ops_reduce.h"
#include "linea/nn/functional/attention.h"
#include "linea/nn/functional/attention_checks.h"
#include "linea/nn/functional/mhla_detail.h"
#include "linea/tensor/error.h"

namespace linea::nn::functional {

namespace {

constexpr int64_t kMaxTokens = 4096;

Tensor causal_mask(const Tensor& x) { return tril_mask(x.size(-2), x.size(-1), 0, x.device()); }

Tensor row_normalise(const Tensor& a, double eps) { return a / (sum(a, {-1}, true) + eps); }

// E[t, u] = W[t / L, u / L] for N tokens in blocks of L.
Tensor block_expand(const Tensor& mix, int64_t n, int64_t block_len) {
  std::vector<int64_t> idx(n);
  for (int64_t t = 0; t < n; ++t) idx[t] = t / block_len;
  Tensor b = from_vector(idx, {n}, mix.device());
  return index_select(index_select(mix, 0, b), 1, b);
}

}  // namespace

Tensor attention_matrix(AttentionKind kind, const Tensor& q, const Tensor& k, const Tensor& mix, MHLAOptions opts) {
  detail::check_qkv("attention_matrix", q, k);
  const int64_t N = q.size(2), d = q.size(3);
  LINEA_CHECK(N <= kMaxTokens, "[attention_matrix] N = {} tokens (q {}) is too many for an N×N matrix; at most {}",
              N, shape_str(q.shape()), kMaxTokens);
  detail::check_scale_eps("attention_matrix", opts);
  const double scale = opts.scale > 0 ? opts.scale : 1.0 / std::sqrt(double(d));
  Tensor kt = k.transpose(-2, -1);
  switch (kind) {
    case AttentionKind::Softmax: {
      Tensor logits = matmul(q, kt) * scale;
      if (opts.causal) logits = where(causal_mask(logits), logits, full({}, -INFINITY, q.dtype()));
      return softmax(logits, -1);
    }
    case AttentionKind::Linear: {
      Tensor a = matmul(detail::feature_map(q, opts.feature_map, opts.eps),
                        detail::feature_map(kt, opts.feature_map, opts.eps));
      return row_normalise(opts.causal ? tril(a) : a, opts.eps);
    }
    case AttentionKind::MHLA: {
      LINEA_CHECK(opts.block_len > 0, "[attention_matrix] MHLA needs opts.block_len > 0, got {}", opts.block_len);
      const int64_t M = (N + opts.block_len - 1) / opts.block_len;
      LINEA_CHECK(mix.defined() && mix.dim() == 2 && mix.size(0) == M && mix.size(1) == M,
                  "[attention_matrix] MHLA mix must be [M, M] with M = ceil(N / block_len) = {}, got {}", M,
                  mix.defined() ? shape_str(mix.shape()) : "undefined");
      LINEA_CHECK(mix.dtype() == q.dtype() && mix.device() == q.device(),
                  "[attention_matrix] mix {} on {} must match q's dtype {} and device {}", mix.dtype(), mix.device(),
                  q.dtype(), q.device());
      LINEA_CHECK(!opts.official_normalizer,
                  "[attention_matrix] the official normaliser mixes other blocks' queries and has no per-row "
                  "weight matrix; use the clean normaliser");
      Tensor a = matmul(detail::feature_map(q, opts.feature_map, opts.eps),
                        detail::feature_map(kt, opts.feature_map, opts.eps)) *
                 block_expand(mix, N, opts.block_len);
      return opts.causal ? tril(a) * scale : row_normalise(a, opts.eps);
    }
  }
  throw Error("[attention_matrix] unknown attention kind");
}

}  // namespace linea::nn::functional
