// Brute-force references for MHLA (spec §1, §1.1, §3): quadratic in N, primitive ops only, with φ
// written out independently of the library's. tests/test_mhla*.cpp and `linea-check mhla`
// compare the fused, composite and streaming forms against them.
#pragma once
#include <linea/linea.h>

namespace linea::check {

// "relu+eps", "elu+1", "relu", "identity": how reports name a feature map.
const char* feature_map_name(nn::functional::FeatureMap fm);

// φ(x) for a feature map.
Tensor mhla_phi(const Tensor& x, nn::functional::FeatureMap fm, double eps);

// The block expansion E[t, u] = W[b(t), b(u)] as [N, N], b(t) = t / L, on mix's device.
Tensor mhla_expand_blocks(const Tensor& mix, int64_t N, int64_t L);

// Non-causal (spec §1): A = (φ(Q) φ(K)ᵀ) ∘ E, O = diag(A1 + eps)⁻¹ A V.
// Causal (spec §3): o_t = s Σ_{u ≤ t} E[t, u] (φ(q_t)·φ(k_u)) v_u, s = scale or d^-1/2.
Tensor mhla_quadratic(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& mix,
                      const nn::functional::MHLAOptions& o);

// Spec §1.1, the official vision code's normaliser r_{i,p} = Σ_j W_ij (φ(q_{j,p}) · z_j) + eps
// over the same numerator (equal blocks only).
Tensor mhla_official_quadratic(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& mix,
                               const nn::functional::MHLAOptions& o);

}  // namespace linea::check
