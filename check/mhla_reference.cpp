#include "mhla_reference.h"

#include <cmath>

namespace linea::check {

using nn::functional::FeatureMap;
using nn::functional::MHLAOptions;

const char* feature_map_name(FeatureMap fm) {
  switch (fm) {
    case FeatureMap::ReluEps: return "relu+eps";
    case FeatureMap::Elu1: return "elu+1";
    case FeatureMap::Relu: return "relu";
    case FeatureMap::Identity: return "identity";
  }
  return "?";
}

Tensor mhla_phi(const Tensor& x, FeatureMap fm, double eps) {
  switch (fm) {
    case FeatureMap::ReluEps: return relu(x) + eps;
    case FeatureMap::Elu1: return where(gt(x, zeros_like(x)), x + 1.0, exp(minimum(x, zeros_like(x))));
    case FeatureMap::Relu: return relu(x);
    case FeatureMap::Identity: return x;
  }
  return x;
}

Tensor mhla_expand_blocks(const Tensor& mix, int64_t N, int64_t L) {
  std::vector<int64_t> b(N);
  for (int64_t t = 0; t < N; ++t) b[t] = t / L;
  const Tensor idx = from_vector(b, {N}, mix.device());
  return index_select(index_select(mix, 0, idx), 1, idx);
}

Tensor mhla_quadratic(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& mix, const MHLAOptions& o) {
  const Tensor a = matmul(mhla_phi(q, o.feature_map, o.eps), mhla_phi(k, o.feature_map, o.eps).transpose(-1, -2)) *
                   mhla_expand_blocks(mix, q.size(2), o.block_len);
  if (!o.causal) return matmul(a, v) / (sum(a, {-1}, true) + o.eps);
  const double s = o.scale != 0 ? o.scale : 1.0 / std::sqrt(static_cast<double>(q.size(3)));
  return matmul(tril(a) * s, v);
}

Tensor mhla_official_quadratic(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& mix,
                               const MHLAOptions& o) {
  const int64_t B = q.size(0), H = q.size(1), N = q.size(2), L = o.block_len, M = N / L;
  const Tensor fq = mhla_phi(q, o.feature_map, o.eps), fk = mhla_phi(k, o.feature_map, o.eps);
  const Tensor a = matmul(fq, fk.transpose(-1, -2)) * mhla_expand_blocks(mix, N, L);
  const Tensor z = sum(fk.unflatten(2, {M, L}), {3}, true);  // [B, H, M, 1, d]
  const Tensor c = sum(fq.unflatten(2, {M, L}) * z, {-1});   // [B, H, M, L]
  const Tensor r = (matmul(mix, c) + o.eps).view({B, H, N, 1});
  return matmul(a, v) / r;
}

}  // namespace linea::check
