// Causal MHLA in its chunkwise (training) form: spec §3 (forward) and §5.3 (backward), as batched
// GEMMs over all pairs. mhla() runs it on a backend without its own MHLA kernels (the CPU and CUDA
// have them: has_fused_mhla(true)); tests hold the kernels to it (test_mhla_causal.cpp).
//
// Chunk i holds tokens [iC, (i+1)C); the last chunk is zero-padded after φ. With the summaries
// S_j = K̂_jᵀ V_j and the strictly-lower part W_s of the mixing matrix,
//   P_i = Σ_{j<i} W_ij S_j                                  (inter-chunk: earlier chunks, mixed)
//   O_i = s Q̂_i P_i + W_ii ((s Q̂_i K̂_iᵀ) ∘ Mask) V_i      (intra-chunk: causal C×C block)
// The fused op works in a chunk-major layout [M, B·H, C, e]: every product is one batched matmul
// over all (chunk, batch, head) triples, and the summaries form one [M, B·H·d·dv] matrix, so the
// mixing over chunks is a GEMM with W_s for all batch items and heads at once (cut into row tiles
// that skip W_s's zero blocks). The scale s is folded into the M×M matrices (s W_s, s W_ii), never
// into an N-sized tensor.
#include "linea/autograd/function.h"
#include "linea/autograd/ops_matmul.h"
#include "linea/autograd/ops_reduce.h"
#include "linea/nn/functional/mhla_detail.h"

#include <algorithm>

namespace linea::nn::functional::detail {

namespace {

// Token-major [B,H,N,e] (any strides) -> chunk-major [M, B·H, C, e], contiguous. Rows past N are
// left unwritten here; the caller zeroes them once the feature map has been applied.
Tensor to_chunks(const Tensor& x, int64_t M, int64_t C) {
  const int64_t B = x.size(0), H = x.size(1), N = x.size(2), e = x.size(3);
  Tensor out = empty({M, B, H, C, e}, x.dtype(), x.device());
  Backend& be = backend(x.device());
  const int64_t full = N / C;
  if (full > 0)
    be.copy(x.narrow(2, 0, full * C).unflatten(2, {full, C}).permute({2, 0, 1, 3, 4}), out.narrow(0, 0, full));
  if (N > full * C) be.copy(x.narrow(2, full * C, N - full * C), out.select(0, full).narrow(2, 0, N - full * C));
  return out.view({M, B * H, C, e});
}

// Zeroes the padded rows of the last chunk of a chunk-major [M, B·H, C, e] tensor, in place.
void zero_padding(const Tensor& x, int64_t N) {
  const int64_t C = x.size(2), used = N - (x.size(0) - 1) * C;
  if (used < C) backend(x.device()).fill(x.select(0, x.size(0) - 1).narrow(1, used, C - used), 0.0);
}

// Chunk-major [M, B·H, C, e] -> token-major [B,H,N,e], contiguous, padded rows dropped.
Tensor from_chunks(const Tensor& y, int64_t B, int64_t H, int64_t N) {
  const int64_t M = y.size(0), C = y.size(2), e = y.size(3), full = N / C;
  Tensor y5 = y.view({M, B, H, C, e});
  Tensor out = empty({B, H, N, e}, y.dtype(), y.device());
  Backend& be = backend(y.device());
  if (full > 0)
    be.copy(y5.narrow(0, 0, full).permute({1, 2, 0, 3, 4}), out.narrow(2, 0, full * C).unflatten(2, {full, C}));
  if (N > full * C) be.copy(y5.select(0, full).narrow(2, 0, N - full * C), out.narrow(2, full * C, N - full * C));
  return out;
}

// φ applied in the chunk-major layout, padding zeroed afterwards (φ(0) = eps for ReluEps).
Tensor features_in_chunks(const Tensor& x, int64_t M, const MHLAOptions& opts) {
  Tensor f = feature_map(to_chunks(x, M, opts.block_len), opts.feature_map, opts.eps);  // a fresh buffer
  zero_padding(f, x.size(2));
  return f;
}

// The mixing products, one GEMM per tile of rows for all (batch, head) pairs at once. W_s is
// strictly lower-triangular, so Y = W_s X (or W_sᵀ X) has zero blocks: rows are cut into kTiles
// tiles and tile r multiplies only the columns that can be nonzero (~half the work of one
// full GEMM). `mixer` is s·W_s already masked; X is [M, F] with F = B·H·d·dv; Y is [M, F].
// Under kTileMin chunks the product is one GEMM: with a handful of rows each tile is a
// memory-bound [1..2, k] x [k, F] product run on one thread, and the zero blocks cost little
// (measured: docs/benchmarks.md, "Other kernels and steps").
constexpr int64_t kTiles = 8, kTileMin = 32;

int64_t tile_rows(int64_t M) { return M < kTileMin ? M : (M + kTiles - 1) / kTiles; }

Tensor mix_chunks(const Tensor& mixer, const Tensor& x, bool transposed) {
  const int64_t M = x.size(0), tile = tile_rows(M);
  const Tensor w = transposed ? mixer.t() : mixer;
  Tensor y = empty(x.shape(), x.dtype(), x.device());
  for (int64_t r0 = 0; r0 < M; r0 += tile) {
    const int64_t r1 = std::min(M, r0 + tile), k0 = transposed ? r0 : 0, k1 = transposed ? M : r1;
    backend(x.device()).gemm(w.narrow(0, r0, r1 - r0).narrow(1, k0, k1 - k0).unsqueeze(0),
                             x.narrow(0, k0, k1 - k0).unsqueeze(0), y.narrow(0, r0, r1 - r0).unsqueeze(0), Tensor(),
                             Tensor());
  }
  return y;
}

// strict_lower(U Sᵀ) for U, S [M, F], tile by tile like mix_chunks.
Tensor lower_gram(const Tensor& u, const Tensor& s) {
  const int64_t M = u.size(0), tile = tile_rows(M);
  Tensor g = zeros({M, M}, Options(u.dtype(), u.device()));
  for (int64_t r0 = 0; r0 < M; r0 += tile) {
    const int64_t r1 = std::min(M, r0 + tile);
    backend(u.device()).copy(matmul(u.narrow(0, r0, r1 - r0), s.narrow(0, 0, r1).t()),
                             g.narrow(0, r0, r1 - r0).narrow(1, 0, r1));
  }
  return tril(g, -1);
}

// The diagonal of a square matrix as a view [M] (any strides).
Tensor diagonal(const Tensor& w) {
  return w.as_strided({w.size(0)}, {w.strides()[0] + w.strides()[1]}, w.offset());
}

// saved: q, k (for φ'), Q̂, K̂, V (chunk-major, padded), W, S and s·P [M, B·H, d, dv], the masked
// scores A = tril(Q̂K̂ᵀ) [M, B·H, C, C] and AV = A V [M, B·H, C, dv]. Spec §5.3 recomputes P and
// A; keeping them costs O(N·C + M·d·dv) memory per head and saves a mixing GEMM, a C×C GEMM per
// chunk and a masking pass in every backward (about a tenth of fwd+bwd at N = 16384).
struct Saved {
  Tensor q, k, qh, kh, vc, w, S, P, A, AV;
  auto tensors() { return std::tie(q, k, qh, kh, vc, w, S, P, A, AV); }
};

Forward causal_forward(const std::vector<Tensor>& in, const MHLAOptions& opts) {
  const Tensor &q = in[0], &k = in[1], &v = in[2], &w = in[3];
  const int64_t B = q.size(0), H = q.size(1), N = q.size(2), M = w.size(0);
  const double s = causal_scale(q, opts);

  Tensor qh = features_in_chunks(q, M, opts), kh = features_in_chunks(k, M, opts);
  Tensor vc = to_chunks(v, M, opts.block_len);
  zero_padding(vc, N);

  Tensor S = matmul(kh.transpose(-1, -2), vc);                            // [M, BH, d, dv]
  Tensor P = mix_chunks(tril(w, -1) * s, S.view({M, -1}), false).view(S.shape());  // s·P_i
  Tensor A = tril(matmul(qh, kh.transpose(-1, -2)));                      // [M, BH, C, C]
  Tensor AV = matmul(A, vc);                                              // [M, BH, C, dv]
  Tensor O = matmul(qh, P) + AV * (diagonal(w) * s).view({M, 1, 1, 1});
  const Saved sv{.q = q, .k = k, .qh = qh, .kh = kh, .vc = vc, .w = w, .S = S, .P = P, .A = A, .AV = AV};
  return Forward{from_chunks(O, B, H, N), pack_saved(sv)};
}

std::vector<Tensor> causal_backward(const Saved& sv, const Tensor& grad, const MHLAOptions& opts) {
  const int64_t B = sv.q.size(0), H = sv.q.size(1), N = sv.q.size(2), M = sv.w.size(0);
  const double s = causal_scale(sv.q, opts);

  Tensor g = to_chunks(grad, M, opts.block_len);  // G is zero on padded rows
  zero_padding(g, N);
  const Tensor ws = tril(sv.w, -1) * s;                       // s·W_strict
  const Tensor wd = (diagonal(sv.w) * s).view({M, 1, 1, 1});  // s·W_ii per chunk
  const Tensor gw = g * wd;                                   // s·W_ii·G_i

  // Mixing: with U_i = Q̂_iᵀ G_i (dP_i = s·U_i), dW_ij = s⟨U_i, S_j⟩ (j < i), dS = (s·W_s)ᵀ U.
  Tensor U = matmul(sv.qh.transpose(-1, -2), g).view({M, -1});  // [M, BH·d·dv]
  Tensor dS = mix_chunks(ws, U, true).view(sv.S.shape());
  Tensor dw_diag = sum(g * sv.AV, {1, 2, 3}) * s;  // dW_ii = ⟨G_i, (s·A_i) V_i⟩
  Tensor dw = lower_gram(U, sv.S.view({M, -1})) * s +
              eye(M, Options(sv.w.dtype(), sv.w.device())) * dw_diag.unsqueeze(1);

  // Intra-chunk, with the saved A = tril(Q̂K̂ᵀ) (spec's A_i is s·A): s·dA_i = tril(gw_i V_iᵀ).
  Tensor dA = tril(matmul(gw, sv.vc.transpose(-1, -2)));
  Tensor dqh = matmul(g, sv.P.transpose(-1, -2)) + matmul(dA, sv.kh);
  Tensor dkh = matmul(dA.transpose(-1, -2), sv.qh) + matmul(sv.vc, dS.transpose(-1, -2));
  Tensor dv = matmul(sv.A.transpose(-1, -2), gw) + matmul(sv.kh, dS);

  Tensor dq = feature_map_backward(from_chunks(dqh, B, H, N), sv.q, opts.feature_map);
  Tensor dk = feature_map_backward(from_chunks(dkh, B, H, N), sv.k, opts.feature_map);
  return {dq, dk, from_chunks(dv, B, H, N), dw};
}

}  // namespace

Tensor mhla_causal(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& mix, const MHLAOptions& opts) {
  return custom_function(
      "mhla_causal", {q, k, v, mix}, [opts](const std::vector<Tensor>& in) { return causal_forward(in, opts); },
      [opts](const std::vector<Tensor>& saved, const Tensor& g) {
        return causal_backward(unpack_saved<Saved>(saved), g, opts);
      });
}

// The same chunkwise algorithm from differentiable primitive ops, in the token-major layout
// [B, H, M, C, e] (gradients by autograd): the reference for the fused backward.
Tensor mhla_causal_composite(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& mix,
                             const MHLAOptions& opts) {
  const int64_t B = q.size(0), H = q.size(1), N = q.size(2), d = q.size(3), dv = v.size(3);
  const int64_t C = opts.block_len, M = mix.size(0);
  const double s = causal_scale(q, opts);
  auto chunked = [&](const Tensor& x) { return pad_tokens(x, M * C).reshape({B, H, M, C, x.size(3)}); };
  Tensor qh = chunked(feature_map(q, opts.feature_map, opts.eps));
  Tensor kh = chunked(feature_map(k, opts.feature_map, opts.eps));
  Tensor vc = chunked(v);

  Tensor S = matmul(kh.transpose(-1, -2), vc);                                       // [B,H,M,d,dv]
  Tensor P = matmul(tril(mix, -1), S.reshape({B, H, M, d * dv})).reshape(S.shape());  // Σ_{j<i} W_ij S_j
  Tensor w_diag = sum(mix * eye(M, Options(mix.dtype(), mix.device())), {1}).reshape({M, 1, 1});
  Tensor A = tril(matmul(qh, kh.transpose(-1, -2)) * s) * w_diag;                    // W_ii (sQ̂K̂ᵀ ∘ Mask)
  Tensor O = matmul(qh, P) * s + matmul(A, vc);
  return O.reshape({B, H, M * C, dv}).narrow(2, 0, N);
}

}  // namespace linea::nn::functional::detail
