// Linear attention with a hand-written backward (spec §5.1 with one block, §5.3 with W = 1).
//
// The value matrix is augmented with a ones column, V' = [V | 1], so that one product gives both
// the numerator φ(q)·Σ φ(k)vᵀ (first dv columns of U') and the normaliser φ(q)·Σ φ(k) (last
// column): o = U'[:, :dv] / (U'[:, dv] + eps). The backward then needs only dU' = [Ḡ | δ] with
// Ḡ = G / r and δ = −rowsum(G∘O) / r, and pushes it through the same products.
//
// The backend's MHLA kernels run it: non-causal linear attention is MHLA with one block (M = 1,
// W = [1]); causal linear attention is causal MHLA (spec §3) with every mixing weight 1 and
// scale 1, run on V': the CPU's kernels take V and the normaliser themselves
// (kernel_causal_normalised below), CUDA's run on V' with the division and dU' as ops around them
// (detail::linear_attention_kernel_causal). Beyond the kernels' limits (head width, chunk count),
// and as the forms those kernels are tested against, the compositions here
// (detail::linear_attention_composite).
// Causal: chunks of kChunk tokens. Chunk i reads the summaries of all earlier chunks,
// P_i = Σ_{j<i} S_j with S_j = φ(K_j)ᵀ V'_j, plus its own masked quadratic block:
//   U'_i = φ(Q_i) P_i + tril(φ(Q_i) φ(K_i)ᵀ) V'_i                      — O(N·(C + d)·dv) work.
// Backward (A_i = tril(φQ_i φK_iᵀ), dA_i = tril(dU'_i V'_iᵀ), dS_j = Σ_{i>j} φ(Q_i)ᵀ dU'_i):
//   dφQ_i = dU'_i P_iᵀ + dA_i φK_i,   dφK_j = dA_jᵀ φQ_j + V'_j dS_jᵀ,   dV'_j = A_jᵀ dU'_j + φK_j dS_j.
#include <vector>

#include "linea/autograd/function.h"
#include "linea/autograd/ops_matmul.h"
#include "linea/autograd/ops_reduce.h"
#include "linea/nn/functional/attention.h"
#include "linea/nn/functional/attention_checks.h"
#include "linea/nn/functional/linear_attention_detail.h"
#include "linea/nn/functional/packed_qkv.h"
#include "linea/nn/functional/mhla_detail.h"
#include "linea/tensor/backend.h"
#include "linea/tensor/error.h"

namespace linea::nn::functional {

namespace {

constexpr int64_t kChunk = 64;

Tensor mT(const Tensor& x) { return x.transpose(-2, -1); }

// Exclusive running sum along dim 2 of a contiguous [B, H, M, X] tensor: out_i = Σ_{j<i} x_j,
// or with `reverse` the suffix sum out_i = Σ_{j>i} x_j. A scan kernel, not an M×M product: O(M·X).
Tensor exclusive_sum(const Tensor& x, bool reverse) {
  Tensor out = empty(x.shape(), x.dtype(), x.device());
  backend(x.device()).cumsum(x, out, x.size(0) * x.size(1), x.size(2), x.size(3), /*exclusive=*/true, reverse);
  return out;
}

// [B, H, N, dv] -> [B, H, N, dv + 1] with a ones column.
Tensor append_ones(const Tensor& v) {
  return cat({v, ones({v.size(0), v.size(1), v.size(2), 1}, Options(v.dtype(), v.device()))}, -1);
}

// dU' = [G / r | −rowsum(G∘O) / r] from the output gradient G, output O and normaliser r [.., 1].
Tensor augmented_grad(const Tensor& g, const Tensor& o, const Tensor& r) {
  return cat({g / r, -sum(g * o, {-1}, true) / r}, -1);
}

// o and r from U' = [numerator | normaliser − eps].
std::pair<Tensor, Tensor> normalise(const Tensor& u, double eps) {
  const int64_t dv = u.size(-1) - 1;
  Tensor r = u.narrow(-1, dv, 1) + eps;
  return {u.narrow(-1, 0, dv) / r, r};
}

// Linear attention in recorded ops, what create_graph differentiates (custom_function's composite):
// the quadratic form, tril(φ(Q) φ(K)ᵀ) V' when causal, φ(Q) (φ(K)ᵀ V') otherwise, normalised.
detail::QkvComposite recorded_form(const LinearAttentionOptions& opts) {
  return [opts](const detail::Heads& h, const std::vector<Tensor>&) {
    const Tensor fq = detail::feature_map(h[0], opts.feature_map, opts.eps);
    const Tensor fk = detail::feature_map(h[1], opts.feature_map, opts.eps), v1 = append_ones(h[2]);
    return normalise(opts.causal ? matmul(tril(matmul(fq, mT(fk))), v1) : matmul(fq, matmul(mT(fk), v1)), opts.eps)
        .first;
  };
}

// What the backward reads: the inputs (for φ'), φ(Q), φ(K), V' = [V | 1], the summary
// S' = φ(K)ᵀ V', the output o and the normaliser r.
struct Saved {
  Tensor q, k, fq, fk, v1, s, o, r;
  auto tensors() { return std::tie(q, k, fq, fk, v1, s, o, r); }
};

// q or k as φ and φ' read them: a contiguous copy of a packed projection's third. Read in place
// (its rows 3·H·d apart) they make relu's backward over twice as slow (measured:
// docs/benchmarks.md, "Linear attention").
Tensor rows(const Tensor& x, int64_t packed) { return packed ? x.contiguous() : x; }

// inputs: {q, k, v}, or with packed = H > 0 the packed projection {qkv} (detail::qkv_function).
Tensor noncausal(const char* op, const std::vector<Tensor>& inputs, int64_t packed,
                 const LinearAttentionOptions& opts) {
  using detail::feature_map;
  return detail::qkv_function(
      op, inputs, packed,
      [&](const detail::Heads& h, const std::vector<Tensor>&) {
        const Tensor q = rows(h[0], packed), k = rows(h[1], packed);
        Tensor fq = feature_map(q, opts.feature_map, opts.eps), fk = feature_map(k, opts.feature_map, opts.eps);
        Tensor v1 = append_ones(h[2]);
        Tensor s = matmul(mT(fk), v1);  // [B, H, d, dv + 1]: Σ φ(k) v'ᵀ
        auto [o, r] = normalise(matmul(fq, s), opts.eps);
        const Saved sv{.q = q, .k = k, .fq = fq, .fk = fk, .v1 = v1, .s = s, .o = o, .r = r};
        return Forward{o, pack_saved(sv)};
      },
      [fm = opts.feature_map](const std::vector<Tensor>& saved, const Tensor& g,
                              const detail::Heads&) -> std::vector<Tensor> {
        const Saved sv = unpack_saved<Saved>(saved);
        Tensor du = augmented_grad(g, sv.o, sv.r);
        Tensor ds = matmul(mT(sv.fq), du);  // [B, H, d, dv + 1]
        const int64_t dv = g.size(-1);
        return {detail::feature_map_backward(matmul(du, mT(sv.s)), sv.q, fm),
                detail::feature_map_backward(matmul(sv.v1, mT(ds)), sv.k, fm),
                matmul(sv.fk, ds.narrow(-1, 0, dv))};
      },
      recorded_form(opts));
}

// The causal backward's: as Saved, with the chunks' exclusive prefix sums P_i = Σ_{j<i} S_j in place
// of the one summary (φ(Q), φ(K), V' chunked: [B, H, M, C, c]).
struct CausalSaved {
  Tensor q, k, fq, fk, v1, p, o, r;
  auto tensors() { return std::tie(q, k, fq, fk, v1, p, o, r); }
};

Tensor chunkwise(const char* op, const std::vector<Tensor>& inputs, int64_t packed,
                 const LinearAttentionOptions& opts) {
  using detail::feature_map, detail::pad_tokens;
  const detail::Heads h = detail::heads_of(op, inputs, packed);
  const int64_t B = h[0].size(0), H = h[0].size(1), N = h[0].size(2), d = h[0].size(3), dv = h[2].size(3);
  const int64_t M = (N + kChunk - 1) / kChunk, Np = M * kChunk;
  // [B, H, Np, c] -> [B, H, M, C, c] (padding comes after φ: padded keys and values are exact zeros)
  auto chunks = [=](const Tensor& x) { return pad_tokens(x, Np).contiguous().view({B, H, M, kChunk, x.size(3)}); };
  return detail::qkv_function(
      packed ? op : "linear_attention_causal", inputs, packed,
      [&](const detail::Heads& h, const std::vector<Tensor>&) {
        const Tensor q = rows(h[0], packed), k = rows(h[1], packed);
        Tensor fq = chunks(feature_map(q, opts.feature_map, opts.eps));
        Tensor fk = chunks(feature_map(k, opts.feature_map, opts.eps));
        Tensor v1 = chunks(append_ones(h[2]));
        Tensor s = matmul(mT(fk), v1).view({B, H, M, d * (dv + 1)});  // per-chunk summaries S_j
        Tensor p = exclusive_sum(s, false).view({B, H, M, d, dv + 1});
        Tensor a = tril(matmul(fq, mT(fk)));                          // [B, H, M, C, C]
        Tensor u = (matmul(fq, p) + matmul(a, v1)).view({B, H, Np, dv + 1}).narrow(2, 0, N);
        auto [o, r] = normalise(u, opts.eps);
        const CausalSaved sv{.q = q, .k = k, .fq = fq, .fk = fk, .v1 = v1, .p = p, .o = o, .r = r};
        return Forward{o, pack_saved(sv)};
      },
      [=, fm = opts.feature_map](const std::vector<Tensor>& saved, const Tensor& g,
                                 const detail::Heads&) -> std::vector<Tensor> {
        const CausalSaved sv = unpack_saved<CausalSaved>(saved);
        Tensor du = pad_tokens(augmented_grad(g, sv.o, sv.r), Np).view({B, H, M, kChunk, dv + 1});
        Tensor a = tril(matmul(sv.fq, mT(sv.fk)));  // recomputed: C×C per chunk
        Tensor da = tril(matmul(du, mT(sv.v1)));
        Tensor dp = matmul(mT(sv.fq), du).view({B, H, M, d * (dv + 1)});
        Tensor ds = exclusive_sum(dp, true).view({B, H, M, d, dv + 1});
        Tensor dfq = (matmul(du, mT(sv.p)) + matmul(da, sv.fk)).view({B, H, Np, d}).narrow(2, 0, N);
        Tensor dfk = (matmul(mT(da), sv.fq) + matmul(sv.v1, mT(ds))).view({B, H, Np, d}).narrow(2, 0, N);
        Tensor dv1 = (matmul(mT(a), du) + matmul(sv.fk, ds)).view({B, H, Np, dv + 1});
        return {detail::feature_map_backward(dfq, sv.q, fm), detail::feature_map_backward(dfk, sv.k, fm),
                dv1.narrow(2, 0, N).narrow(-1, 0, dv)};
      },
      recorded_form(opts));
}

// The causal kernels' chunk and the most chunks they take. Their cost has an M² term, M(M−1)·d·dv
// per pair (sh_i = Σ_{j<i} W_ij S_j and dW are products with the M×M mixing matrix, where the
// composition's prefix sums are O(M)); against the rest, 4N·d·dv + 2N·C·(d + dv) (spec §4), it
// stays smaller up to M = 4C = 64 chunks at any head width. Longer sequences keep the composition.
// Measured: docs/benchmarks.md, "Linear attention".
constexpr int64_t kKernelChunk = 16, kKernelMaxChunks = 4 * kKernelChunk;
// The widest head, with V's ones column, that every backend's kernels take (CUDA: 128).
constexpr int64_t kKernelMaxHeadDim = 128;

bool kernels_run(const detail::Heads& h, bool causal) {
  const int64_t N = h[0].size(2), d = h[0].size(3), dv = h[2].size(3);
  return d <= kKernelMaxHeadDim && dv + 1 <= kKernelMaxHeadDim &&
         (!causal || (N + kKernelChunk - 1) / kKernelChunk <= kKernelMaxChunks);
}

// What the kernels' backward reads (backend.h, "fused MHLA"), and the normalised output.
struct KernelSaved {
  Tensor q, k, v1, w, u, s, sh, o, r;
  auto tensors() { return std::tie(q, k, v1, w, u, s, sh, o, r); }
};

// Causal linear attention on kernels that take the normaliser themselves (MHLAArgs::normalised,
// has_fused_causal_normaliser: the CPU's): they read V, write o and r, and form dU' from the output
// gradient, so there is no ones column, no division and no dU' around them, and o, dq, dk, dv are
// written where the heads lie (o token-major, the gradients into the packed projection's).
struct NormalisedSaved {
  Tensor q, k, v, w, s, sh, o, r;
  auto tensors() { return std::tie(q, k, v, w, s, sh, o, r); }
};

Tensor kernel_causal_normalised(const char* op, const std::vector<Tensor>& inputs, int64_t packed,
                                const LinearAttentionOptions& opts) {
  const detail::Heads h0 = detail::heads_of(op, inputs, packed);
  const int64_t B = h0[0].size(0), H = h0[0].size(1), N = h0[0].size(2), d = h0[0].size(3), dv = h0[2].size(3);
  const int64_t M = (N + kKernelChunk - 1) / kKernelChunk;
  Backend::MHLAArgs args{true, kKernelChunk, opts.feature_map, opts.eps, 1.0};
  args.normalised = true;
  const Options o(h0[0].dtype(), h0[0].device());
  using detail::empty_rows_like, detail::unit_stride_rows;
  return detail::qkv_function(
      op, inputs, packed,
      [&](const detail::Heads& h, const std::vector<Tensor>&) {
        Tensor q = unit_stride_rows(h[0]), k = unit_stride_rows(h[1]), v = unit_stride_rows(h[2]);
        Tensor w = tril(ones({M, M}, o)), out = empty_rows_like(q, dv), r = empty({B * H, N}, o.dtype, o.device);
        Tensor s = empty({B * H, M, d, dv + 1}, o.dtype, o.device), sh = empty(s.shape(), o.dtype, o.device);
        backend(o.device).mhla_forward(q, k, v, w, args, out, s, sh, r);
        const NormalisedSaved sv{.q = q, .k = k, .v = v, .w = w, .s = s, .sh = sh, .o = out, .r = r};
        return Forward{out, pack_saved(sv)};
      },
      [args, o, d, dv](const std::vector<Tensor>& saved, const Tensor& g,
                       const detail::Heads& dest) -> std::vector<Tensor> {
        const NormalisedSaved sv = unpack_saved<NormalisedSaved>(saved);
        const detail::Heads dx = dest[0].defined() ? dest
                                                   : detail::Heads{empty_rows_like(sv.q, d), empty_rows_like(sv.k, d),
                                                                   empty_rows_like(sv.v, dv)};
        const Tensor dw = empty(sv.w.shape(), o.dtype, o.device);
        backend(o.device).mhla_backward(sv.q, sv.k, sv.v, sv.w, args, sv.o, sv.s, sv.sh, sv.r,
                                        unit_stride_rows(g), dx[0], dx[1], dx[2], dw);
        return {dx[0], dx[1], dx[2]};
      },
      recorded_form(opts));
}

// Non-causal linear attention on the device's MHLA kernels: MHLA with one block of all N tokens
// and W = [1] (spec §5.1 with M = 1), whose output and normaliser are linear attention's. Run as
// the public mhla ops, so q, k, v are read where they lie and the packed form's gradient is one
// buffer; a step takes less time than with the composition (measured: docs/benchmarks.md, "Linear
// attention").
Tensor kernel_noncausal(const std::vector<Tensor>& inputs, int64_t packed, const detail::Heads& h,
                        const LinearAttentionOptions& opts) {
  const Tensor one = ones({1, 1}, Options(h[0].dtype(), h[0].device()));
  const MHLAOptions mo{.causal = false, .block_len = h[0].size(2), .feature_map = opts.feature_map, .eps = opts.eps};
  return packed ? mhla_qkv(inputs[0], packed, one, mo) : mhla(h[0], h[1], h[2], one, mo);
}

// The checks, and the kernels' or the composition's form on `inputs` ({q, k, v}, or {qkv} with
// packed = H).
Tensor attend(const char* op, const std::vector<Tensor>& inputs, int64_t packed, const LinearAttentionOptions& opts) {
  const detail::Heads h = detail::heads_of(op, inputs, packed);
  const Tensor &q = h[0], &v = h[2];
  detail::check_qkv(op, q, h[1], v);
  LINEA_CHECK(opts.eps >= 0, "[{}] eps must be >= 0, got {}", op, opts.eps);
  LINEA_CHECK(q.size(2) > 0 && q.size(3) > 0 && v.size(3) > 0, "[{}] empty sequence or head dim: q {} / v {}", op,
              shape_str(q.shape()), shape_str(v.shape()));
  if (!kernels_run(h, opts.causal)) return detail::linear_attention_composite(op, inputs, packed, opts);
  if (!opts.causal) return kernel_noncausal(inputs, packed, h, opts);
  if (backend(q.device()).has_fused_causal_normaliser()) return kernel_causal_normalised(op, inputs, packed, opts);
  return detail::linear_attention_kernel_causal(op, inputs, packed, opts);
}

}  // namespace

// Causal linear attention on the device's causal MHLA kernels: U' = MHLA(q, k, V'; W = lower-
// triangular ones, scale 1), then o and r from U' as in the composition; the backward hands the
// kernels dU' = [Ḡ | δ] and keeps dV = dV'[:, :dv]. q and k are read where they lie (a packed
// projection's heads), and dq, dk are written into the thirds of its gradient.
Tensor detail::linear_attention_kernel_causal(const char* op, const std::vector<Tensor>& inputs, int64_t packed,
                                              const LinearAttentionOptions& opts) {
  const detail::Heads h0 = detail::heads_of(op, inputs, packed);
  const int64_t B = h0[0].size(0), H = h0[0].size(1), N = h0[0].size(2), d = h0[0].size(3), dv = h0[2].size(3);
  const int64_t M = (N + kKernelChunk - 1) / kKernelChunk;
  const Backend::MHLAArgs args{true, kKernelChunk, opts.feature_map, opts.eps, 1.0};
  const Options o(h0[0].dtype(), h0[0].device());
  using detail::empty_rows_like, detail::unit_stride_rows;
  return detail::qkv_function(
      op, inputs, packed,
      [&](const detail::Heads& h, const std::vector<Tensor>&) {
        Tensor q = unit_stride_rows(h[0]), k = unit_stride_rows(h[1]), v1 = append_ones(h[2]);
        Tensor w = tril(ones({M, M}, o)), u = empty({B, H, N, dv + 1}, o.dtype, o.device);
        Tensor s = empty({B * H, M, d, dv + 1}, o.dtype, o.device), sh = empty(s.shape(), o.dtype, o.device);
        backend(o.device).mhla_forward(q, k, v1, w, args, u, s, sh, Tensor());
        auto [out, r] = normalise(u, opts.eps);
        const KernelSaved sv{.q = q, .k = k, .v1 = v1, .w = w, .u = u, .s = s, .sh = sh, .o = out, .r = r};
        return Forward{out, pack_saved(sv)};
      },
      [args, o, d, dv](const std::vector<Tensor>& saved, const Tensor& g,
                       const detail::Heads& dest) -> std::vector<Tensor> {
        const KernelSaved sv = unpack_saved<KernelSaved>(saved);
        const Tensor du = augmented_grad(g, sv.o, sv.r);
        const Tensor dq = dest[0].defined() ? dest[0] : empty_rows_like(sv.q, d);
        const Tensor dk = dest[1].defined() ? dest[1] : empty_rows_like(sv.k, d);
        const Tensor dv1 = empty(sv.v1.shape(), o.dtype, o.device), dw = empty(sv.w.shape(), o.dtype, o.device);
        backend(o.device).mhla_backward(sv.q, sv.k, sv.v1, sv.w, args, sv.u, sv.s, sv.sh, Tensor(), du, dq, dk, dv1,
                                        dw);
        return {dq, dk, dv1.narrow(-1, 0, dv)};
      },
      recorded_form(opts));
}

Tensor detail::linear_attention_composite(const char* op, const std::vector<Tensor>& inputs, int64_t packed,
                                          const LinearAttentionOptions& opts) {
  return opts.causal ? chunkwise(op, inputs, packed, opts) : noncausal(op, inputs, packed, opts);
}

Tensor linear_attention(const Tensor& q, const Tensor& k, const Tensor& v, LinearAttentionOptions opts) {
  return attend("linear_attention", {q, k, v}, 0, opts);
}

Tensor linear_attention_qkv(const Tensor& qkv, int64_t heads, LinearAttentionOptions opts) {
  return attend("linear_attention_qkv", {qkv}, heads, opts);
}

}  // namespace linea::nn::functional
