// Launchers of the fused MHLA kernels (cuda/mhla.cu), called by cuda/cuda_mhla.cpp. All token
// tensors are contiguous [BH, N, e] (BH = B·H pairs), per-block matrices are contiguous
// [BH, M, rows, cols], M = ceil(N / L) blocks of L tokens (the last one may be shorter: its missing
// tokens are never read, which is the zero padding of docs/mhla.md). `fm` is the feature map
// (tensor/ops.h), applied as tokens are loaded; FeatureMap::Identity loads them as they are. The
// mixing products between blocks are cuBLAS GEMMs (cuda_mhla.cpp).
#pragma once
#include <cstdint>

#include "linea/cuda/cuda_backend.h"

namespace linea::cuda {

// Tokens per shared-memory tile; the per-token kernels launch one thread block per tile of a block.
inline constexpr int kMhlaTile = 16;

// A token operand as the kernels read it: element (t, c) of pair bh is
//   c <  w: φ(x[bh, t, c]) / rdiv[bh, t]   (φ = fm: Identity loads x as it is; no division when
//                                           rdiv is null)
//   c == w: extra[bh, t], or 1 when extra is null   (only when cols == w + 1: V' = [V | 1])
struct MhlaOperand {
  const void* x = nullptr;
  int w = 0, cols = 0;
  FeatureMap fm = FeatureMap::Identity;
  double eps = 0;
  const void* rdiv = nullptr;
  const void* extra = nullptr;
};

// out[bh, j] = Σ_{t in block j} X(t, :)ᵀ Y(t, :)  -> [BH, M, X.cols, Y.cols]  (block summaries)
void launch_mhla_summaries(DType dt, const MhlaOperand& x, const MhlaOperand& y, void* out, int64_t BH, int64_t N,
                           int64_t L);

// How the result rows Y(t, :) = X(t, :) Z_j of launch_mhla_apply are written.
enum class MhlaEpilogue {
  Normalise,  // out[t, c] = Y[c] / (Y[ncols-1] + eps) for c < ncols-1; r[t] = Y[ncols-1] + eps
  PhiGrad,    // out[t, c] = Y[c] · φ'(x[t, c])   (x = aux, fm)
  Store,      // out[t, c] = Y[c]
};
// For every token t of block j: Y(t, c) = Σ_k X(t, k) Z_j[k·zr + c·zc], c < ncols, where
// Z_j = z + (bh·M + j)·zblock (pass zr, zc swapped for Z_jᵀ); then the epilogue writes row t.
void launch_mhla_apply(DType dt, const MhlaOperand& x, const void* z, int64_t zblock, int64_t zr, int64_t zc,
                       int ncols, MhlaEpilogue epi, void* out, void* r, const void* aux, FeatureMap fm, double eps,
                       int64_t BH, int64_t N, int64_t L);

// δ[bh, t] = −Σ_c g[bh, t, c] · o[bh, t, c] / r[bh, t]   (the normaliser's gradient, spec §5.1)
void launch_mhla_delta(DType dt, const void* g, const void* o, const void* r, void* delta, int64_t rows, int dv);

// mixer[i, j] = scale · W[i, j] for j < i, else 0   (the causal inter-chunk mixing matrix)
void launch_mhla_strict_lower(DType dt, const void* w, void* mixer, int64_t M, double scale);

// Causal forward output (spec §3): O_i = Q̂_i sp_i + s·W_ii · tril(Q̂_i K̂_iᵀ) V_i per chunk i,
// with sp = s·P [BH, M, d, dv]. q, k [BH, N, d] raw (φ applied on load), v [BH, N, dv].
void launch_mhla_causal_out(DType dt, const void* q, const void* k, const void* v, const void* sp, const void* w,
                            double scale, FeatureMap fm, double eps, void* out, int64_t BH, int64_t N, int64_t C, int d,
                            int dv);

// Causal backward, intra-chunk parts + the per-chunk products with the saved/mixed summaries
// (docs/mhla.md, causal backward; sdA = s·W_ii·tril(G Vᵀ)):
//   query side: dq = (G spᵀ + sdA K̂) ∘ φ'(q),  dwd[bh, t] = Σ_{u≤t} (g_t·v_u)(q̂_t·k̂_u)
//   key side:   dk = (sdAᵀ Q̂ + V dSᵀ) ∘ φ'(k),  dv = s·W_jj · tril(Q̂K̂ᵀ)ᵀ G + K̂ dS
// with dS = (s·W_strict)ᵀ U [BH, M, d, dv].
void launch_mhla_causal_dq(DType dt, const void* q, const void* k, const void* v, const void* g, const void* sp,
                           const void* w, double scale, FeatureMap fm, double eps, void* dq, void* dwd, int64_t BH,
                           int64_t N, int64_t C, int d, int dv);
void launch_mhla_causal_dkv(DType dt, const void* q, const void* k, const void* v, const void* g, const void* ds,
                            const void* w, double scale, FeatureMap fm, double eps, void* dk, void* dv_out, int64_t BH,
                            int64_t N, int64_t C, int d, int dv);

// dmix[i, j] = scale · raw[i, j] for j < i; dmix[i, i] = scale · Σ_{bh, t in chunk i} dwd[bh, t]; 0 above.
void launch_mhla_causal_dmix(DType dt, const void* raw, const void* dwd, void* dmix, int64_t M, int64_t BH, int64_t N,
                             int64_t C, double scale);

}  // namespace linea::cuda
