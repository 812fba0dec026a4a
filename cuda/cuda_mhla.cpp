// CudaBackend::mhla_forward / mhla_backward (tensor/backend.h, "fused MHLA"): validation,
// scratch buffers and the order of the kernels of cuda/mhla.cu. Per-token and per-block work is
// in those kernels (φ on load, the ones column and the padding implicit); the products BETWEEN
// blocks — the mixing W S', its transpose and dW — are batched cuBLAS GEMMs through gemm() with
// W broadcast over the pairs, and dW's sum over pairs is reduce(): per-pair partials, no atomics,
// so dmix is deterministic. docs/mhla.md, "Fused CUDA kernels", has the maths in order.
#include <algorithm>
#include <limits>

#include "linea/cuda/cuda_backend.h"
#include "linea/cuda/launch_mhla.h"
#include "linea/cuda/packed_rows.h"
#include "linea/tensor/error.h"
#include "linea/tensor/fused_checks.h"

namespace linea::cuda {

namespace {

// One thread block keeps tiles of up to 128 columns per token in shared memory (mhla.cu).
constexpr int64_t kMaxHeadDim = 128;

using Dims = fused_checks::MhlaDims;

Dims check(const char* op, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& mix,
           const Backend::MHLAArgs& a) {
  const Dims g = fused_checks::mhla(op, q, k, v, mix, a);
  LINEA_CHECK(!a.normalised, "[{}] the CUDA kernels have no causal normaliser (has_fused_causal_normaliser is false)",
              op);
  LINEA_CHECK(g.d <= kMaxHeadDim && g.dv <= kMaxHeadDim,
              "[{}] the fused CUDA kernels take head dims d, dv <= {}, got d = {}, dv = {} (use mhla_composite)", op,
              kMaxHeadDim, g.d, g.dv);
  // The per-token kernels run one thread block per (pair, block, tile of kMhlaTile tokens): the
  // grid must fit gridDim.x.
  const int64_t tiles = (std::min(g.L, g.N) + kMhlaTile - 1) / kMhlaTile;
  LINEA_CHECK(g.BH * g.M * tiles <= std::numeric_limits<int32_t>::max(),
              "[{}] too many (pair, block, tile) thread blocks for one launch: q {}, block_len {}", op,
              shape_str(q.shape()), g.L);
  return g;
}

Tensor scratch(Shape shape, const Tensor& like) { return empty(std::move(shape), like.dtype(), like.device()); }

// Y[bh] = W X[bh] for every pair, one strided-batched GEMM; x, y are [BH, M, F] views of
// contiguous per-block summaries, w is [M, M] (any strides: a transpose is passed to cuBLAS).
void mix_blocks(CudaBackend& be, const Tensor& w, const Tensor& x, const Tensor& y) {
  be.gemm(w.unsqueeze(0).expand({x.size(0), -1, -1}), x, y, Tensor(), Tensor());
}

// Σ_pairs X[bh] Y[bh]ᵀ -> out [M, M]: per-pair GEMMs, then a sum over the pairs.
void pair_gram(CudaBackend& be, const Tensor& x, const Tensor& y, const Tensor& out) {
  const int64_t BH = x.size(0), M = x.size(1);
  Tensor partial = scratch({BH, M, M}, x);
  be.gemm(x, y.transpose(1, 2), partial, Tensor(), Tensor());
  be.reduce(ReduceOp::Sum, partial, out.view({1, M * M}), 1, BH, M * M);
}

// φ(x) as the kernels load it, and x as it is (optionally augmented with a ones column).
MhlaOperand features(const Tensor& x, const Backend::MHLAArgs& a) {
  const int w = static_cast<int>(x.size(2));
  return {x.data_ptr(), w, w, a.feature_map, a.eps, nullptr, nullptr};
}
MhlaOperand plain(const Tensor& x, bool ones_column) {
  const int w = static_cast<int>(x.size(2));
  return {x.data_ptr(), w, ones_column ? w + 1 : w, FeatureMap::Identity, 0, nullptr, nullptr};
}

// The causal mixer s·W_strict (the part of W that mixes earlier chunks' summaries).
Tensor strict_lower(const Tensor& mix, double scale) {
  Tensor m = scratch(mix.shape(), mix);
  launch_mhla_strict_lower(mix.dtype(), mix.data_ptr(), m.data_ptr(), mix.size(0), scale);
  check_launch("mhla_strict_lower");
  return m;
}

}  // namespace

void CudaBackend::mhla_forward(const Tensor& q_rows, const Tensor& k_rows, const Tensor& v_rows, const Tensor& mix,
                               const MHLAArgs& a, const Tensor& out_rows, const Tensor& s, const Tensor& sh,
                               const Tensor& r) {
  const Dims g = check("mhla_forward", q_rows, k_rows, v_rows, mix, a);
  fused_checks::mhla_rows("mhla_forward", "out", out_rows, g, g.dv, q_rows.dtype());
  const DType t = q_rows.dtype();
  for (const Tensor* x : {&out_rows, &s, &sh}) arg(*x, "mhla_forward");  // all on a CUDA device
  if (g.BH == 0) return;  // no pairs: nothing to write, and an empty grid is not a valid launch
  const Tensor q = packed(*this, q_rows), k = packed(*this, k_rows), v = packed(*this, v_rows);
  const Tensor out = packed_out(out_rows);
  if (!a.causal) {
    // S' = φ(K)ᵀ[V | 1] per block; Ŝ' = W S'; per token u = φ(q) Ŝ'_i, o = u[:dv] / (u[dv] + eps).
    launch_mhla_summaries(t, features(k, a), plain(v, true), s.data_ptr(), g.BH, g.N, g.L);
    check_launch("mhla_summaries");
    mix_blocks(*this, mix, s.view({g.BH, g.M, g.block()}), sh.view({g.BH, g.M, g.block()}));
    arg(r, "mhla_forward");
    launch_mhla_apply(t, features(q, a), sh.data_ptr(), g.block(), g.dv + 1, 1, static_cast<int>(g.dv + 1),
                      MhlaEpilogue::Normalise, out.data_ptr(), r.data_ptr(), nullptr, a.feature_map, a.eps, g.BH,
                      g.N, g.L);
    check_launch("mhla_apply");
    unpack(*this, out, out_rows);
    return;
  }
  // Causal (spec §3): S_j = φ(K_j)ᵀ V_j; s·P = (s·W_strict) S; O_i = Q̂_i (s·P_i) + s·W_ii tril(Q̂_i K̂_iᵀ) V_i.
  launch_mhla_summaries(t, features(k, a), plain(v, false), s.data_ptr(), g.BH, g.N, g.L);
  check_launch("mhla_summaries");
  mix_blocks(*this, strict_lower(mix, a.scale), s.view({g.BH, g.M, g.d * g.dv}), sh.view({g.BH, g.M, g.d * g.dv}));
  launch_mhla_causal_out(t, q.data_ptr(), k.data_ptr(), v.data_ptr(), sh.data_ptr(), mix.data_ptr(), a.scale,
                         a.feature_map, a.eps, out.data_ptr(), g.BH, g.N, g.L, static_cast<int>(g.d),
                         static_cast<int>(g.dv));
  check_launch("mhla_causal_out");
  unpack(*this, out, out_rows);
}

void CudaBackend::mhla_backward(const Tensor& q_rows, const Tensor& k_rows, const Tensor& v_rows, const Tensor& mix,
                                const MHLAArgs& a, const Tensor& out_rows, const Tensor& s, const Tensor& sh,
                                const Tensor& r, const Tensor& grad_rows, const Tensor& dq_rows,
                                const Tensor& dk_rows, const Tensor& dv_rows, const Tensor& dmix) {
  const char* op = "mhla_backward";
  const Dims g = check(op, q_rows, k_rows, v_rows, mix, a);
  const DType t = q_rows.dtype();
  fused_checks::mhla_rows(op, "out", out_rows, g, g.dv, t);
  fused_checks::mhla_rows(op, "grad", grad_rows, g, g.dv, t);
  fused_checks::mhla_rows(op, "dq", dq_rows, g, g.d, t);
  fused_checks::mhla_rows(op, "dk", dk_rows, g, g.d, t);
  fused_checks::mhla_rows(op, "dv", dv_rows, g, g.dv, t);
  for (const Tensor* x : {&out_rows, &s, &sh, &grad_rows, &dq_rows, &dk_rows, &dv_rows, &dmix}) arg(*x, op);
  if (g.BH == 0) {  // no pairs: dmix is an empty sum, and an empty grid is not a valid launch
    fill(dmix, 0);
    return;
  }
  const Tensor q = packed(*this, q_rows), k = packed(*this, k_rows), v = packed(*this, v_rows);
  const Tensor out = packed(*this, out_rows), grad = packed(*this, grad_rows);
  const Tensor dq = packed_out(dq_rows), dk = packed_out(dk_rows), dv = packed_out(dv_rows);
  const auto unpack_all = [&] {
    unpack(*this, dq, dq_rows);
    unpack(*this, dk, dk_rows);
    unpack(*this, dv, dv_rows);
  };
  const int d = static_cast<int>(g.d), dvi = static_cast<int>(g.dv);
  if (!a.causal) {
    // dU' = [G / r | δ], δ = −rowsum(G∘O) / r (spec §5.1, augmented form).
    arg(r, "mhla_backward");
    Tensor delta = scratch({g.BH, g.N}, q);
    launch_mhla_delta(t, grad.data_ptr(), out.data_ptr(), r.data_ptr(), delta.data_ptr(), g.BH * g.N, dvi);
    check_launch("mhla_delta");
    const MhlaOperand du{grad.data_ptr(), dvi, dvi + 1, FeatureMap::Identity, 0, r.data_ptr(), delta.data_ptr()};
    // dφQ = dU' Ŝ'ᵀ (then ∘ φ'(q)); dŜ' = φQᵀ dU' per block.
    launch_mhla_apply(t, du, sh.data_ptr(), g.block(), 1, g.dv + 1, d, MhlaEpilogue::PhiGrad, dq.data_ptr(), nullptr,
                      q.data_ptr(), a.feature_map, a.eps, g.BH, g.N, g.L);
    check_launch("mhla_apply");
    Tensor dsh = scratch(s.shape(), s);
    launch_mhla_summaries(t, features(q, a), du, dsh.data_ptr(), g.BH, g.N, g.L);
    check_launch("mhla_summaries");
    // dW = Σ_pairs dŜ'_flat S'_flatᵀ;  dS' = Wᵀ dŜ'.
    const Tensor dsh_f = dsh.view({g.BH, g.M, g.block()}), s_f = s.view({g.BH, g.M, g.block()});
    pair_gram(*this, dsh_f, s_f, dmix);
    Tensor ds = scratch(s.shape(), s);
    mix_blocks(*this, mix.t(), dsh_f, ds.view({g.BH, g.M, g.block()}));
    // dφK_j = V'_j dS'_jᵀ (then ∘ φ'(k));  dV_j = φK_j dS'_j[:, :dv].
    launch_mhla_apply(t, plain(v, true), ds.data_ptr(), g.block(), 1, g.dv + 1, d, MhlaEpilogue::PhiGrad,
                      dk.data_ptr(), nullptr, k.data_ptr(), a.feature_map, a.eps, g.BH, g.N, g.L);
    check_launch("mhla_apply");
    launch_mhla_apply(t, features(k, a), ds.data_ptr(), g.block(), g.dv + 1, 1, dvi, MhlaEpilogue::Store,
                      dv.data_ptr(), nullptr, nullptr, a.feature_map, a.eps, g.BH, g.N, g.L);
    check_launch("mhla_apply");
    unpack_all();
    return;
  }
  // Causal (spec §5.3): U_i = Q̂_iᵀ G_i; dS = (s·W_strict)ᵀ U; dW_strict = s·Σ_pairs U_flat S_flatᵀ
  // (below the diagonal); dW_ii = s·Σ ⟨G_i, tril(Q̂_i K̂_iᵀ) V_i⟩ from the per-token dwd.
  const int64_t F = g.d * g.dv;
  Tensor U = scratch(s.shape(), s);
  launch_mhla_summaries(t, features(q, a), plain(grad, false), U.data_ptr(), g.BH, g.N, g.L);
  check_launch("mhla_summaries");
  const Tensor U_f = U.view({g.BH, g.M, F});
  Tensor ds = scratch(s.shape(), s);
  mix_blocks(*this, strict_lower(mix, a.scale).t(), U_f, ds.view({g.BH, g.M, F}));
  Tensor raw = scratch({g.M, g.M}, mix);
  pair_gram(*this, U_f, s.view({g.BH, g.M, F}), raw);
  Tensor dwd = scratch({g.BH, g.N}, q);
  launch_mhla_causal_dq(t, q.data_ptr(), k.data_ptr(), v.data_ptr(), grad.data_ptr(), sh.data_ptr(), mix.data_ptr(),
                        a.scale, a.feature_map, a.eps, dq.data_ptr(), dwd.data_ptr(), g.BH, g.N, g.L, d, dvi);
  check_launch("mhla_causal_dq");
  launch_mhla_causal_dmix(t, raw.data_ptr(), dwd.data_ptr(), dmix.data_ptr(), g.M, g.BH, g.N, g.L, a.scale);
  check_launch("mhla_causal_dmix");
  launch_mhla_causal_dkv(t, q.data_ptr(), k.data_ptr(), v.data_ptr(), grad.data_ptr(), ds.data_ptr(), mix.data_ptr(),
                         a.scale, a.feature_map, a.eps, dk.data_ptr(), dv.data_ptr(), g.BH, g.N, g.L, d, dvi);
  check_launch("mhla_causal_dkv");
  unpack_all();
}

}  // namespace linea::cuda
