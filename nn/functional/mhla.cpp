// MHLA's one dispatch (docs/mhla.md, "Forms"): mhla() checks its inputs and runs the device's
// kernels (tensor/backend.h, "fused MHLA"), non-causal and causal; the official normaliser
// (spec §1.1, §5.2), which the kernels do not offer, runs as a GEMM composition with its own
// backward; mhla_composite() builds both forms from differentiable primitive ops, the reference
// the kernels and the GEMM form are tested against.
//
// Tokens are split into M blocks of L (the last block zero-padded after φ). With the augmented
// values V' = [V | 1] one set of products carries both numerator and normaliser:
//   S'_j = φ(K_j)ᵀ V'_j = [S_j | z_j]       summaries, [d, dv+1] per block and (b, h) pair
//   Ŝ'_i = Σ_j W_ij S'_j                    mixing: W @ [M, d·(dv+1)] for every pair
//   U'_t = φ(q_t) Ŝ'_i,   o_t = U'_t[:dv] / (U'_t[dv] + eps)
// Layout: token tensors are viewed as [B, H, M, L, c] and summaries are [B, H, M, d, dv+1], so
// every product is ONE batched gemm call over all (b, h[, block]) — the shared W is a broadcast
// (stride 0) operand — and the token-major outputs need no copy back. (A block-major layout would
// make the mixing a single [M, M] @ [M, B·H·d·(dv+1)] GEMM, but then each per-block product is
// M or B·H kernel calls instead of one, or needs a layout copy; the mixing is the cheap part.)
//
// The official normaliser's backward (spec §5.2) is five GEMM groups plus its normaliser's terms:
//   dU' = [Ḡ | 0],  Ḡ = G / r   (r does not come from U', so its column gets no gradient)
//   dφQ = dU' Ŝ'ᵀ,  dŜ' = φQᵀ dU',  dW = dŜ'_flat S'_flatᵀ (sums over all b, h),
//   dS' = Wᵀ dŜ',   dφK_j = V'_j dS'_jᵀ,  dV_j = φK_j dS'_j[:, :dv]
// followed by φ'. (The clean normaliser's backward, spec §5.1, is the same with δ = −rowsum(G∘O)/r
// in the last column of dU'; the kernels compute it.)
#include "linea/autograd/function.h"
#include "linea/autograd/ops_matmul.h"
#include "linea/autograd/ops_reduce.h"
#include "linea/nn/functional/attention.h"
#include "linea/nn/functional/attention_checks.h"
#include "linea/nn/functional/packed_qkv.h"
#include "linea/nn/functional/mhla_detail.h"
#include "linea/tensor/error.h"

namespace linea::nn::functional {

namespace {

Tensor mT(const Tensor& x) { return x.transpose(-2, -1); }

struct Geometry {
  int64_t B, H, N, d, dv, M, L, Np;  // Np = M·L tokens after padding
};

Geometry geometry_of(const Tensor& q, const Tensor& v, const MHLAOptions& opts) {
  const int64_t N = q.size(2), L = opts.block_len, M = (N + L - 1) / L;
  return {q.size(0), q.size(1), N, q.size(3), v.size(3), M, L, M * L};
}

void check_inputs(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& mix, const MHLAOptions& opts) {
  detail::check_qkv("mhla", q, k, v);
  LINEA_CHECK(q.size(2) > 0 && q.size(3) > 0 && v.size(3) > 0, "[mhla] empty sequence or head dim: q {} / v {}",
              shape_str(q.shape()), shape_str(v.shape()));
  LINEA_CHECK(opts.block_len > 0, "[mhla] block_len must be > 0, got {}", opts.block_len);
  detail::check_scale_eps("mhla", opts);
  const int64_t N = q.size(2), M = (N + opts.block_len - 1) / opts.block_len;
  LINEA_CHECK(mix.defined() && mix.dim() == 2 && mix.size(0) == M && mix.size(1) == M,
              "[mhla] mix must be [M, M] with M = ceil(N / block_len) = ceil({} / {}) = {}, got {}", N,
              opts.block_len, M, mix.defined() ? shape_str(mix.shape()) : "an undefined tensor");
  LINEA_CHECK(mix.dtype() == q.dtype() && mix.device() == q.device(),
              "[mhla] mix ({}, {}) must match q's dtype and device ({}, {})", mix.dtype(), mix.device(), q.dtype(),
              q.device());
  LINEA_CHECK(!opts.official_normalizer || !opts.causal, "[mhla] official_normalizer is for the non-causal form only");
  LINEA_CHECK(!opts.official_normalizer || N % opts.block_len == 0,
              "[mhla] official_normalizer needs equal blocks: N = {} is not a multiple of block_len = {}", N,
              opts.block_len);
}

// The forward's result and everything its backward reads (the saved tensors of the fused op).
struct Pass {
  Tensor out;          // [B, H, N, dv]
  Tensor q, k, mix;    // the inputs φ' and the mixing need
  Tensor fq, fk;       // φ(Q), φ(K): [B, H, M, L, d], padded rows zero
  Tensor v1;           // V' = [V | 1]: [B, H, M, L, dv+1], padded rows zero
  Tensor s, sh;        // S', Ŝ': [B, H, M, d, dv+1]
  Tensor o, r;         // output and normaliser before the padding is dropped: [B, H, M, L, dv], [.., 1]
  Tensor c;            // official normaliser only: C_{j,p} = φ(q_{j,p})·z_j, [B, H, M, L]
  auto tensors() { return std::tie(q, k, mix, fq, fk, v1, s, sh, o, r, c); }  // saved: all but out
};

// The forward from public ops only: run without recording inside the fused op, and recorded
// (so autograd derives the backward) by mhla_composite.
Pass forward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& mix, const MHLAOptions& opts) {
  using detail::feature_map, detail::pad_tokens;
  const Geometry g = geometry_of(q, v, opts);
  auto blocked = [&](const Tensor& x) { return pad_tokens(x, g.Np).unflatten(2, {g.M, g.L}); };
  Pass p;
  p.q = q, p.k = k, p.mix = mix;
  p.fq = blocked(feature_map(q, opts.feature_map, opts.eps));
  p.fk = blocked(feature_map(k, opts.feature_map, opts.eps));
  p.v1 = blocked(cat({v, ones({g.B, g.H, g.N, 1}, Options(v.dtype(), v.device()))}, -1));
  p.s = matmul(mT(p.fk), p.v1);                                      // [B, H, M, d, dv+1]
  p.sh = matmul(mix, p.s.flatten(3)).view(p.s.shape());
  Tensor u = matmul(p.fq, p.sh);                                     // [B, H, M, L, dv+1]
  if (opts.official_normalizer) {
    // r_{i,p} = Σ_j W_ij (φ(q_{j,p}) · z_j) + eps: mixes the same in-block offset of other blocks.
    p.c = matmul(p.fq, p.s.narrow(-1, g.dv, 1)).squeeze(-1);  // [B, H, M, L]
    p.r = matmul(mix, p.c).unsqueeze(-1) + opts.eps;
  } else {
    p.r = u.narrow(-1, g.dv, 1) + opts.eps;
  }
  p.o = u.narrow(-1, 0, g.dv) / p.r;
  p.out = p.o.view({g.B, g.H, g.Np, g.dv}).narrow(2, 0, g.N);
  if (g.Np != g.N) p.out = p.out.contiguous();
  return p;
}

// The official normaliser's form: the forward above without recording, inside one op whose
// backward is written out (spec §5.2).
Tensor official_normalizer(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& mix,
                           const MHLAOptions& opts) {
  const Geometry g = geometry_of(q, v, opts);
  return custom_function(
      "mhla", {q, k, v, mix},
      [&](const std::vector<Tensor>& in) {
        Pass p = forward(in[0], in[1], in[2], in[3], opts);
        return Forward{p.out, pack_saved(p)};
      },
      [g, fm = opts.feature_map](const std::vector<Tensor>& saved, const Tensor& grad) -> std::vector<Tensor> {
        const Pass sv = unpack_saved<Pass>(saved);
        Tensor gbar = detail::pad_tokens(grad, g.Np).unflatten(2, {g.M, g.L}) / sv.r;  // Ḡ = G / r
        Tensor delta = -sum(gbar * sv.o, {-1}, true);  // −rowsum(G∘O) / r, r's own gradient
        Tensor du = cat({gbar, zeros_like(delta)}, -1);
        Tensor dfq = matmul(du, mT(sv.sh));  // [B, H, M, L, d]
        Tensor dsh = matmul(mT(sv.fq), du).flatten(3);  // [B, H, M, d·(dv+1)]
        Tensor dmix = sum(matmul(dsh, mT(sv.s.flatten(3))), {0, 1});  // W is shared: sum over pairs
        Tensor ds = matmul(sv.mix.t(), dsh).view(sv.s.shape());
        // r = W C + eps (C as [M, L] per pair): dC = Wᵀ δ, dW += Σ_pairs δ Cᵀ, and C = φ(Q_j) z_j
        // sends dC_{j,p} z_j to φ(q_{j,p}) and φ(Q_j)ᵀ dC_j to z_j, the last column of S'_j.
        Tensor dc = matmul(sv.mix.t(), delta.squeeze(-1)).unsqueeze(-1);  // [B, H, M, L, 1]
        dmix = dmix + sum(matmul(delta.squeeze(-1), mT(sv.c)), {0, 1});
        dfq = dfq + matmul(dc, mT(sv.s.narrow(-1, g.dv, 1)));
        Tensor dz = matmul(mT(sv.fq), dc);  // [B, H, M, d, 1]
        ds = ds + cat({zeros({g.B, g.H, g.M, g.d, g.dv}, Options(dz.dtype(), dz.device())), dz}, -1);
        Tensor dfk = matmul(sv.v1, mT(ds));  // [B, H, M, L, d]
        Tensor dv = matmul(sv.fk, ds.narrow(-1, 0, g.dv));  // [B, H, M, L, dv]
        auto tokens = [&](const Tensor& x) { return x.view({g.B, g.H, g.Np, x.size(-1)}).narrow(2, 0, g.N); };
        return {detail::feature_map_backward(tokens(dfq), sv.q, fm),
                detail::feature_map_backward(tokens(dfk), sv.k, fm), tokens(dv), dmix};
      },
      [opts](const std::vector<Tensor>& in) { return mhla_composite(in[0], in[1], in[2], in[3], opts); });
}

// What the device's backward reads: the inputs (as the caller laid them out), the output, the
// summaries S' (causal: S), the mixed Ŝ' (causal: s·P) and the normaliser r (non-causal only).
struct DeviceSaved {
  Tensor q, k, v, mix, out, s, sh, r;
  auto tensors() { return std::tie(q, k, v, mix, out, s, sh, r); }
};

// The device's own kernels (tensor/backend.h, "fused MHLA"), non-causal and causal, in one
// custom_function: the backend computes the forward, saves S' and Ŝ' (causal: S and s·P) and the
// normaliser r, and computes all four gradients from them.
// The kernels read q, k, v, the output and its gradient through their strides (backend.h): the
// heads stay where the projection put them. `inputs` is {q, k, v, mix}, or with packed = H > 0
// {qkv, mix} (mhla_qkv, detail::qkv_function), where the kernels write dq, dk, dv straight into
// the thirds of one gradient.
Tensor device_kernels(const std::vector<Tensor>& inputs, int64_t packed, const MHLAOptions& opts) {
  const detail::Heads qkv = detail::heads_of("mhla_qkv", inputs, packed);
  const Tensor &q = qkv[0], &v = qkv[2], &mix = inputs.back();
  const int64_t B = q.size(0), H = q.size(1), N = q.size(2), d = q.size(3), dv = v.size(3), M = mix.size(0);
  const Backend::MHLAArgs args{opts.causal, opts.block_len, opts.feature_map, opts.eps,
                               opts.causal ? detail::causal_scale(q, opts) : 1.0};
  const Options o(q.dtype(), q.device());
  using detail::unit_stride_rows;
  return detail::qkv_function(
      "mhla", inputs, packed,
      [&](const detail::Heads& h, const std::vector<Tensor>& extra) {
        Tensor q4 = unit_stride_rows(h[0]), k4 = unit_stride_rows(h[1]), v4 = unit_stride_rows(h[2]);
        Tensor w = extra[0].contiguous();
        const int64_t cols = opts.causal ? dv : dv + 1;  // S' = [S | z] carries the normaliser
        Tensor out = detail::empty_rows_like(q4, dv), s = empty({B * H, M, d, cols}, o.dtype, o.device);
        Tensor sh = empty(s.shape(), o.dtype, o.device);
        Tensor r = opts.causal ? Tensor() : empty({B * H, N}, o.dtype, o.device);
        backend(q.device()).mhla_forward(q4, k4, v4, w, args, out, s, sh, r);
        const DeviceSaved sv{.q = q4, .k = k4, .v = v4, .mix = w, .out = out, .s = s, .sh = sh, .r = r};
        return Forward{out, pack_saved(sv)};
      },
      [args, o, dv](const std::vector<Tensor>& saved, const Tensor& grad,
                    const detail::Heads& dest) -> std::vector<Tensor> {
        const DeviceSaved sv = unpack_saved<DeviceSaved>(saved);
        const detail::Heads g = dest[0].defined() ? dest
                                                  : detail::Heads{detail::empty_rows_like(sv.q, sv.q.size(3)),
                                                                  detail::empty_rows_like(sv.k, sv.k.size(3)),
                                                                  detail::empty_rows_like(sv.v, dv)};
        Tensor dmix = empty(sv.mix.shape(), o.dtype, o.device);
        backend(o.device).mhla_backward(sv.q, sv.k, sv.v, sv.mix, args, sv.out, sv.s, sv.sh, sv.r,
                                        detail::unit_stride_rows(grad), g[0], g[1], g[2], dmix);
        return {g[0], g[1], g[2], dmix};
      },
      [opts](const detail::Heads& h, const std::vector<Tensor>& extra) {
        return mhla_composite(h[0], h[1], h[2], extra[0], opts);
      });
}

// Causal MHLA (spec §3) from differentiable primitive ops, chunk by chunk in the token-major layout
// [B, H, M, C, e] (gradients by autograd): the reference for the kernels. With S_j = K̂_jᵀ V_j,
//   O_i = s Q̂_i Σ_{j<i} W_ij S_j + W_ii ((s Q̂_i K̂_iᵀ) ∘ Mask) V_i.
Tensor causal_composite(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& mix, const MHLAOptions& opts) {
  const int64_t B = q.size(0), H = q.size(1), N = q.size(2), d = q.size(3), dv = v.size(3);
  const int64_t C = opts.block_len, M = mix.size(0);
  const double s = detail::causal_scale(q, opts);
  auto chunked = [&](const Tensor& x) { return detail::pad_tokens(x, M * C).reshape({B, H, M, C, x.size(3)}); };
  Tensor qh = chunked(detail::feature_map(q, opts.feature_map, opts.eps));
  Tensor kh = chunked(detail::feature_map(k, opts.feature_map, opts.eps));
  Tensor vc = chunked(v);

  Tensor S = matmul(kh.transpose(-1, -2), vc);                                       // [B,H,M,d,dv]
  Tensor P = matmul(tril(mix, -1), S.reshape({B, H, M, d * dv})).reshape(S.shape());  // Σ_{j<i} W_ij S_j
  Tensor w_diag = sum(mix * eye(M, Options(mix.dtype(), mix.device())), {1}).reshape({M, 1, 1});
  Tensor A = tril(matmul(qh, kh.transpose(-1, -2)) * s) * w_diag;                    // W_ii (sQ̂K̂ᵀ ∘ Mask)
  Tensor O = matmul(qh, P) * s + matmul(A, vc);
  return O.reshape({B, H, M * C, dv}).narrow(2, 0, N);
}

}  // namespace

Tensor mhla(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& mix, MHLAOptions opts) {
  check_inputs(q, k, v, mix, opts);
  if (opts.official_normalizer) return official_normalizer(q, k, v, mix, opts);
  return device_kernels({q, k, v, mix}, 0, opts);
}

Tensor mhla_qkv(const Tensor& qkv, int64_t heads, const Tensor& mix, MHLAOptions opts) {
  const detail::Heads h = detail::packed_heads("mhla_qkv", qkv, heads);
  check_inputs(h[0], h[1], h[2], mix, opts);
  if (opts.official_normalizer) return official_normalizer(h[0], h[1], h[2], mix, opts);
  return device_kernels({qkv, mix}, heads, opts);
}

Tensor mhla_composite(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& mix, MHLAOptions opts) {
  check_inputs(q, k, v, mix, opts);
  return opts.causal ? causal_composite(q, k, v, mix, opts) : forward(q, k, v, mix, opts).out;
}

}  // namespace linea::nn::functional
