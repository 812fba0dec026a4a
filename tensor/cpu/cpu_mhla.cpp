// CpuBackend::do_mhla_forward / do_mhla_backward (tensor/backend.h, "fused MHLA"), non-causal form:
// one (batch, head) pair at a time, all of it in L1. A pair's q, k, v (64 tokens x 16 dims in
// the ViT) and its summaries take about 20 KB, so φ, the ones column, the block products, the
// mixing and the normaliser run on data already in cache, where the composition of
// nn/functional/mhla.cpp makes a pass over memory (and a batched gemm call) for each step.
// The maths is the composition's, in the same order (spec §1, §5.1, augmented form V' = [V | 1]):
//   forward   S'_j = φ(K_j)ᵀ V'_j,  Ŝ' = W S',  U'_t = φ(q_t) Ŝ'_i,  r_t = U'_t[dv] + eps,
//             o_t = U'_t[:dv] / r_t
//   backward  dU' = [G / r | −rowsum(G ∘ O) / r],  dφQ_i = dU'_i Ŝ'_iᵀ,  dŜ'_i = φ(Q_i)ᵀ dU'_i,
//             dW = Σ_pairs dŜ'_flat S'_flatᵀ,  dS' = Wᵀ dŜ',  dφK_j = V'_j dS'_jᵀ,
//             dV_j = φ(K_j) dS'_j[:, :dv],  then φ'.
// The per-token tensors are read and written through their strides (backend.h): q, k, v as the
// heads of the attention's [B, N, H·e] projections, out and the gradients in the same layout, so
// the module needs no head split or merge copies around the kernels.
// The causal form (chunks, no normaliser) is the second half of the file, after the same pattern;
// with MHLAArgs::normalised the drivers run it on [V | 1] and add causal linear attention's normaliser.
#include <algorithm>
#include <vector>

#include "linea/tensor/cpu/blas.h"
#include "linea/tensor/cpu/gemm_direct.h"
#include "linea/tensor/error.h"
#include "linea/tensor/cpu/vec_math.h"

#include "linea/tensor/cpu/isa_begin.h"
#include "linea/tensor/cpu/cpu_backend.h"
#include "linea/tensor/cpu/fetch_ahead.h"
#include "linea/tensor/cpu/head_rows.h"
#include "linea/tensor/cpu/lane_sums.h"

namespace linea::cpu::inline LINEA_ISA_NS {

namespace {

using Dims = Backend::MHLADims;

// What is the CPU's own (Backend::mhla_* ran the shared checks): every tensor is on the CPU.
void on_cpu(const char* op, std::initializer_list<const Tensor*> ts) {
  for (const Tensor* t : ts)
    if (t->defined())
      LINEA_CHECK(t->device().is_cpu(), "[{}] every tensor must be on the CPU, got one on {}", op, t->device());
}

// n heads x N tokens of e values from one layout to another: token t of head h at src[h·sh + t·st]
// and dst[h·dh + t·dt], non-overlapping. The switch on e is taken once per call: inside a per-row
// helper, GCC keeps that helper out of line and reloads the strides on every call (measured:
// docs/benchmarks.md, "MHLA's CPU kernels").
template <int E, class T>
void copy_heads_fixed(const T* __restrict src, int64_t sh, int64_t st, T* __restrict dst, int64_t dh, int64_t dt,
                      int64_t n, int64_t N) {
  for (int64_t t = 0; t < N; ++t)
    for (int64_t h = 0; h < n; ++h)
      for (int c = 0; c < E; ++c) dst[h * dh + t * dt + c] = src[h * sh + t * st + c];
}
template <class T>
void copy_heads(const T* src, int64_t sh, int64_t st, T* dst, int64_t dh, int64_t dt, int64_t n, int64_t N,
                int64_t e) {
  switch (e) {
    case 16: return copy_heads_fixed<16>(src, sh, st, dst, dh, dt, n, N);
    case 32: return copy_heads_fixed<32>(src, sh, st, dst, dh, dt, n, N);
    case 64: return copy_heads_fixed<64>(src, sh, st, dst, dh, dt, n, N);
  }
  for (int64_t t = 0; t < N; ++t)
    for (int64_t h = 0; h < n; ++h) std::copy_n(src + h * sh + t * st, e, dst + h * dh + t * dt);
}

// Pairs bh0 .. bh0+n-1 as packed [N, e] blocks one after another: in place when x is contiguous,
// else gathered into buf token by token, so that the heads of a [B, N, H·e] projection (n = H:
// all heads of one batch) are read as one sequential sweep. The gathers cost about what the
// copies they replace would (measured: docs/benchmarks.md, "MHLA's CPU kernels").
template <class T>
const T* gather(const Rows<const T>& x, int64_t bh0, int64_t n, int64_t N, std::vector<T>& buf) {
  if (x.contiguous) return x.pair(bh0);
  // the pairs of one task share their batch: heads are sh apart
  copy_heads(x.pair(bh0), x.sh, x.ld, buf.data(), N * x.e, x.e, n, N, x.e);
  return buf.data();
}
// Where the results of pairs bh0 .. bh0+n-1 are written: in place when contiguous, else into buf
// for scatter() after.
template <class T>
T* target(const Rows<T>& x, int64_t bh0, std::vector<T>& buf) {
  return x.contiguous ? x.pair(bh0) : buf.data();
}
template <class T>
void scatter(const Rows<T>& x, int64_t bh0, int64_t n, int64_t N, const std::vector<T>& buf) {
  if (!x.contiguous) copy_heads(buf.data(), N * x.e, x.e, x.pair(bh0), x.sh, x.ld, n, N, x.e);
}
template <class T>
std::vector<T> buffer(bool contiguous, int64_t n) {
  return std::vector<T>(contiguous ? 0 : n);
}

// φ and φ' with the map fixed at compile time, so that the loops over a block's elements vectorise.
template <FeatureMap fm, class T>
T phi(T x, T eps) {
  if constexpr (fm == FeatureMap::ReluEps) return op_math::relu(x) + eps;
  else if constexpr (fm == FeatureMap::Elu1) return x > T(0) ? x + T(1) : vexp(x);  // exp(NaN) is NaN
  else if constexpr (fm == FeatureMap::Relu) return op_math::relu(x);
  else return x;
}

template <FeatureMap fm, class T>
T dphi(T x) {
  if constexpr (fm == FeatureMap::ReluEps || fm == FeatureMap::Relu) return T(x > T(0));
  else if constexpr (fm == FeatureMap::Elu1) return x > T(0) ? T(1) : vexp(x);
  else return T(1);
}

template <class F>
void with_feature_map(FeatureMap fm, F&& f) {
  switch (fm) {
    case FeatureMap::ReluEps: return f.template operator()<FeatureMap::ReluEps>();
    case FeatureMap::Elu1: return f.template operator()<FeatureMap::Elu1>();
    case FeatureMap::Relu: return f.template operator()<FeatureMap::Relu>();
    case FeatureMap::Identity: return f.template operator()<FeatureMap::Identity>();
  }
}

// c[m, n] = a·b on this thread: the direct kernel where it beats BLAS on such a product.
template <class T>
void mm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const T* a, int64_t lda, const T* b, int64_t ldb, T* c,
        int64_t ldc, bool accumulate = false) {
  if constexpr (std::is_same_v<T, float>)
    if (direct_gemm_pays(ta, tb, m, n, k))
      return gemm_direct(ta, tb, m, n, k, a, lda, b, ldb, c, ldc, {accumulate ? c : nullptr, ldc});
  blas_gemm<T>(ta, tb, m, n, k, a, lda, b, ldb, accumulate ? T(1) : T(0), c, ldc);
}

template <FeatureMap fm, class T>
void load_features(const T* x, int64_t rows, int64_t w, T eps, T* out) {
  for (int64_t i = 0; i < rows * w; ++i) out[i] = phi<fm>(x[i], eps);
}

// Σ_x a[x]·b[x] in independent lanes (lane_sums.h's lane_sum: 16 floats, one zmm). The same loop
// under `omp simd reduction` stays one scalar chain of dependent adds inside these kernels (GCC 12),
// and with eight lanes GCC 12 for AVX-512 interleaves two iterations per zmm through vpermt2ps;
// 16 lanes avoid both (measured: docs/benchmarks.md, "MHLA's CPU kernels").
template <class T>
T dot(const T* __restrict a, const T* __restrict b, int64_t n) {
  return lane_sum<T>(n, [&](int64_t x) { return a[x] * b[x]; });
}

// Column c of a [rows, lda] block, contiguous in out: the normaliser columns (ẑ, dz) read by the
// loops over a row's d elements, which vectorise on a contiguous vector and not on a stride of e.
template <class T>
void column(const T* a, int64_t rows, int64_t lda, int64_t c, T* out) {
  for (int64_t i = 0; i < rows; ++i) out[i] = a[i * lda + c];
}

// The row loops of the non-causal pair, each over restrict pointers: written inline on the scratch
// vectors, which GCC must assume may alias, their sums would be stored and reloaded per row
// (measured: docs/benchmarks.md, "MHLA's CPU kernels").

// z = Σ_t f_t · x[t, :] over rows of x [rows, d]; f_t = 1 without f. Summed 16 columns at a time
// in a local array, which stays in registers: summed into z itself, every row stored z and loaded
// it back (a store-to-load chain that took 40% of the non-causal backward's own time on Zen 4).
template <class T>
void column_sums(const T* __restrict x, const T* __restrict f, int64_t rows, int64_t d, T* __restrict z) {
  constexpr int64_t W = 16;
  int64_t c0 = 0;
  for (; c0 + W <= d; c0 += W) {
    T acc[W] = {};
    for (int64_t t = 0; t < rows; ++t) {
      const T ft = f ? f[t] : T(1);
      for (int64_t c = 0; c < W; ++c) acc[c] += ft * x[t * d + c0 + c];
    }
    for (int64_t c = 0; c < W; ++c) z[c0 + c] = acc[c];
  }
  for (int64_t c = c0; c < d; ++c) z[c] = T(0);
  for (int64_t t = 0; t < rows && c0 < d; ++t) {
    const T ft = f ? f[t] : T(1);
    for (int64_t c = c0; c < d; ++c) z[c] += ft * x[t * d + c];
  }
}

// dx = (dfx + f_t · z) ∘ φ'(x) for rows [rows, d]: the gradient through φ of a feature block whose
// product gradient is dfx plus the normaliser's rank-one term (f_t = 1 without f).
template <FeatureMap fm, class T>
void through_features(const T* __restrict dfx, const T* __restrict f, const T* __restrict z, const T* __restrict x,
                      int64_t rows, int64_t d, T* __restrict dx) {
  for (int64_t t = 0; t < rows; ++t) {
    const T ft = f ? f[t] : T(1);
    for (int64_t c = 0; c < d; ++c) dx[t * d + c] = (dfx[t * d + c] + ft * z[c]) * dphi<fm>(x[t * d + c]);
  }
}

// dU' = [Ḡ | δ] = [G / r | −rowsum(G ∘ O) / r] for a block's rows; G's and O's rows ldg and ldo
// apart, read where they lie (nothing else reads them, so they are not gathered). Ḡ's rows ldb
// apart, δ's values lds apart (the normalised causal form writes both into one [rows, dv + 1]).
template <class T>
void normalised_grad(const T* __restrict grad, int64_t ldg, const T* __restrict out, int64_t ldo,
                     const T* __restrict r, int64_t rows, int64_t dv, T* __restrict gbar, int64_t ldb,
                     T* __restrict delta, int64_t lds) {
  for (int64_t t = 0; t < rows; ++t) {
    const T inv = T(1) / r[t];
    T dot = 0;
#pragma omp simd reduction(+ : dot)
    for (int64_t c = 0; c < dv; ++c) {
      gbar[t * ldb + c] = grad[t * ldg + c] * inv;
      dot += grad[t * ldg + c] * out[t * ldo + c];
    }
    delta[t * lds] = -dot * inv;
  }
}

// r_t = φ(q_t)·ẑ + eps and o_t /= r_t for a block's rows.
template <class T>
void normalise(const T* __restrict fx, const T* __restrict z, T eps, int64_t rows, int64_t d, int64_t dv,
               T* __restrict r, T* __restrict o) {
  for (int64_t t = 0; t < rows; ++t) {
    T den = 0;
#pragma omp simd reduction(+ : den)
    for (int64_t c = 0; c < d; ++c) den += fx[t * d + c] * z[c];
    den += eps;
    r[t] = den;
    const T inv = T(1) / den;
    for (int64_t c = 0; c < dv; ++c) o[t * dv + c] *= inv;
  }
}

// The ones column of V' is never stored: each [d, dv+1] summary is a [d, dv] product plus its last
// column as a sum or a matrix-vector product, so every block product is a [16, 16] x [16, 16]
// (in the ViT), which the direct kernel runs at twice the rate of a 17-column one.
template <FeatureMap fm, class T>
void forward_pair(const Dims& g, const T* q, const T* k, const T* v, const T* w, T eps, T* out, T* sp, T* shp, T* rp,
                  std::vector<T>& fx, std::vector<T>& z, FetchAhead& ahead) {
  const int64_t d = g.d, dv = g.dv, e = dv + 1, se = g.block();
  for (int64_t j = 0; j < g.M; ++j) {  // S'_j = [φ(K_j)ᵀ V_j | φ(K_j)ᵀ 1]
    const int64_t rows = g.rows(j), t0 = j * g.L;
    ahead.step();
    T* sj = sp + j * se;
    load_features<fm>(k + t0 * d, rows, d, eps, fx.data());
    mm<T>(true, false, d, dv, rows, fx.data(), d, v + t0 * dv, dv, sj, e);
    column_sums<T>(fx.data(), nullptr, rows, d, z.data());
    for (int64_t c = 0; c < d; ++c) sj[c * e + dv] = z[c];
  }
  mm<T>(false, false, g.M, se, g.M, w, g.M, sp, se, shp, se);  // Ŝ' = W S'
  for (int64_t i = 0; i < g.M; ++i) {  // o = φ(Q_i) Ŝ_i / (φ(Q_i) ẑ_i + eps)
    const int64_t rows = g.rows(i), t0 = i * g.L;
    ahead.step();
    const T* shi = shp + i * se;
    load_features<fm>(q + t0 * d, rows, d, eps, fx.data());
    mm<T>(false, false, rows, dv, d, fx.data(), d, shi, e, out + t0 * dv, dv);
    column(shi, d, e, dv, z.data());  // ẑ_i
    normalise(fx.data(), z.data(), eps, rows, d, dv, rp + t0, out + t0 * dv);
  }
}

// ---- causal (spec §3 and §5.3; mhla_composite in nn/functional/mhla.cpp is the same algorithm from
// primitive ops): chunks of L tokens, no normaliser, scale s. With S_j = φ(K_j)ᵀ V_j,
//   sh_i = s Σ_{j<i} W_ij S_j,   O_i = φ(Q_i) sh_i + s W_ii tril(φ(Q_i) φ(K_i)ᵀ) V_i.
// ws = s·W_strict [M, M] is formed once per call; the last chunk's padding is implicit (only its
// rows(i) tokens take part).

// One thread's scratch for a causal pair.
template <class T>
struct CausalScratch {
  std::vector<T> fq, fk, a, da, dfx, u, ds;
  CausalScratch(const Dims& g, bool backward)
      : fq(g.L * g.d), fk(g.L * g.d), a(g.L * g.L), da(backward ? g.L * g.L : 0), dfx(backward ? g.L * g.d : 0),
        u(backward ? g.M * g.d * g.dv : 0), ds(backward ? g.M * g.d * g.dv : 0) {}
};

// a = tril(a) for a [rows, rows] block.
template <class T>
void lower_triangle(T* a, int64_t rows) {
  for (int64_t t = 0; t < rows; ++t) std::fill(a + t * rows + t + 1, a + (t + 1) * rows, T(0));
}

template <FeatureMap fm, class T>
void causal_forward_pair(const Dims& g, const T* q, const T* k, const T* v, const T* w, const T* ws, T scale, T eps,
                         T* out, T* sp, T* shp, CausalScratch<T>& c) {
  const int64_t d = g.d, dv = g.dv, se = d * dv, M = g.M;
  for (int64_t j = 0; j < M; ++j) {  // S_j = φ(K_j)ᵀ V_j
    const int64_t rows = g.rows(j), t0 = j * g.L;
    load_features<fm>(k + t0 * d, rows, d, eps, c.fk.data());
    mm<T>(true, false, d, dv, rows, c.fk.data(), d, v + t0 * dv, dv, sp + j * se, dv);
  }
  mm<T>(false, false, M, se, M, ws, M, sp, se, shp, se);  // sh = s·W_strict S
  for (int64_t i = 0; i < M; ++i) {
    const int64_t rows = g.rows(i), t0 = i * g.L;
    T* o = out + t0 * dv;
    load_features<fm>(q + t0 * d, rows, d, eps, c.fq.data());
    load_features<fm>(k + t0 * d, rows, d, eps, c.fk.data());
    mm<T>(false, false, rows, dv, d, c.fq.data(), d, shp + i * se, dv, o, dv);         // φ(Q_i) sh_i
    mm<T>(false, true, rows, rows, d, c.fq.data(), d, c.fk.data(), d, c.a.data(), rows);  // φ(Q_i) φ(K_i)ᵀ
    lower_triangle(c.a.data(), rows);
    const T wd = scale * w[i * M + i];
    for (int64_t x = 0; x < rows * rows; ++x) c.a[x] *= wd;
    mm<T>(false, false, rows, dv, rows, c.a.data(), rows, v + t0 * dv, dv, o, dv, true);  // + s W_ii A_i V_i
  }
}

// Spec §5.3 with A_i = tril(φ(Q_i) φ(K_i)ᵀ) and U_i = φ(Q_i)ᵀ G_i:
//   dW_ij = s⟨U_i, S_j⟩ (j < i),  dW_ii = s⟨A_i, G_i V_iᵀ⟩,  dS = (s W_strict)ᵀ U,
//   dA_i = s W_ii tril(G_i V_iᵀ),  dφQ_i = G_i sh_iᵀ + dA_i φ(K_i),
//   dφK_i = dA_iᵀ φ(Q_i) + V_i dS_iᵀ,  dV_i = s W_ii A_iᵀ G_i + φ(K_i) dS_i,  then φ'.
template <FeatureMap fm, class T>
void causal_backward_pair(const Dims& g, const T* q, const T* k, const T* v, const T* w, const T* ws, T scale, T eps,
                          const T* grad, const T* sp, const T* shp, T* dq, T* dk, T* dvo, T* dmix_pair,
                          CausalScratch<T>& c) {
  const int64_t d = g.d, dv = g.dv, se = d * dv, M = g.M;
  for (int64_t i = 0; i < M; ++i) {  // U_i = φ(Q_i)ᵀ G_i
    const int64_t rows = g.rows(i), t0 = i * g.L;
    load_features<fm>(q + t0 * d, rows, d, eps, c.fq.data());
    mm<T>(true, false, d, dv, rows, c.fq.data(), d, grad + t0 * dv, dv, c.u.data() + i * se, dv);
  }
  mm<T>(true, false, M, se, M, ws, M, c.u.data(), se, c.ds.data(), se);  // dS = (s·W_strict)ᵀ U
  std::fill(dmix_pair, dmix_pair + M * M, T(0));
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < i; ++j) dmix_pair[i * M + j] = scale * dot(c.u.data() + i * se, sp + j * se, se);
  for (int64_t i = 0; i < M; ++i) {
    const int64_t rows = g.rows(i), t0 = i * g.L;
    const T *gi = grad + t0 * dv, *vi = v + t0 * dv, *qi = q + t0 * d, *ki = k + t0 * d;
    T *A = c.a.data(), *dA = c.da.data(), *dfx = c.dfx.data();
    load_features<fm>(qi, rows, d, eps, c.fq.data());
    load_features<fm>(ki, rows, d, eps, c.fk.data());
    mm<T>(false, true, rows, rows, d, c.fq.data(), d, c.fk.data(), d, A, rows);  // φ(Q_i) φ(K_i)ᵀ
    mm<T>(false, true, rows, rows, dv, gi, dv, vi, dv, dA, rows);                // G_i V_iᵀ
    lower_triangle(A, rows);
    lower_triangle(dA, rows);
    const T wd = scale * w[i * M + i];
    dmix_pair[i * M + i] = scale * dot(A, dA, rows * rows);
    for (int64_t x = 0; x < rows * rows; ++x) dA[x] *= wd;
    // dφQ_i = G_i sh_iᵀ + dA_i φ(K_i), then φ'
    mm<T>(false, true, rows, d, dv, gi, dv, shp + i * se, dv, dfx, d);
    mm<T>(false, false, rows, d, rows, dA, rows, c.fk.data(), d, dfx, d, true);
    for (int64_t x = 0; x < rows * d; ++x) dq[t0 * d + x] = dfx[x] * dphi<fm>(qi[x]);
    // dφK_i = dA_iᵀ φ(Q_i) + V_i dS_iᵀ, then φ'
    mm<T>(true, false, rows, d, rows, dA, rows, c.fq.data(), d, dfx, d);
    mm<T>(false, true, rows, d, dv, vi, dv, c.ds.data() + i * se, dv, dfx, d, true);
    for (int64_t x = 0; x < rows * d; ++x) dk[t0 * d + x] = dfx[x] * dphi<fm>(ki[x]);
    // dV_i = s W_ii A_iᵀ G_i + φ(K_i) dS_i
    T* dvi = dvo + t0 * dv;
    mm<T>(true, false, rows, dv, rows, A, rows, gi, dv, dvi, dv);
    for (int64_t x = 0; x < rows * dv; ++x) dvi[x] *= wd;
    mm<T>(false, false, rows, dv, d, c.fk.data(), d, c.ds.data() + i * se, dv, dvi, dv, true);
  }
}

// ws = s·W_strict: the part of W that mixes earlier chunks, scaled.
template <class T>
std::vector<T> strict_lower(const T* w, int64_t M, T scale) {
  std::vector<T> ws(M * M, T(0));
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < i; ++j) ws[i * M + j] = scale * w[i * M + j];
  return ws;
}

// ---- causal linear attention's normaliser (MHLAArgs::normalised): the causal pair runs on
// V' = [V | 1] and dU' (normalised_grad) in scratch of dv + 1 columns (pair dims `wide`), and the
// driver divides and forms dU' around it, as nn/functional/linear_attention.cpp does around
// kernels without the flag.

Dims widened(Dims g) {
  ++g.dv;
  return g;
}

// vp = [V | 1] for the N tokens of pair bh. copy_heads, not std::copy_n: GCC made each row's copy a
// memmove call, 12% of the normalised pair's time (perf of a scratch driver).
template <class T>
void ones_column(const Rows<const T>& V, int64_t bh, int64_t N, T* vp) {
  const int64_t dv = V.e;
  copy_heads(V.pair(bh), 0, V.ld, vp, 0, dv + 1, 1, N, dv);
  for (int64_t t = 0; t < N; ++t) vp[t * (dv + 1) + dv] = T(1);
}

// r_t = U'_t[dv] + eps and o_t = U'_t[:dv] / r_t (rows dv apart in o).
template <class T>
void divide_rows(const T* u, int64_t N, int64_t dv, T eps, T* o, T* r) {
  for (int64_t t = 0; t < N; ++t) {
    const T* ut = u + t * (dv + 1);
    r[t] = ut[dv] + eps;
    for (int64_t c = 0; c < dv; ++c) o[t * dv + c] = ut[c] / r[t];
  }
}

// ---- the drivers: pairs on OpenMP threads, each task's rows gathered and scattered as needed

// A non-causal task fetches what its successor reads while it computes (fetch_ahead.h): the rows of
// q, k, v (and in the backward out, the gradient, s and sh). Fetching what a task writes (out, s,
// sh, dq) does not pay, and the causal tasks do not fetch: it slows their backward (measured:
// docs/benchmarks.md, "MHLA's CPU kernels").
template <FeatureMap fm, class T>
void forward(const Dims& g, const Backend::MHLAArgs& a, Rows<const T> Q, Rows<const T> K, Rows<const T> V, const T* w,
             Rows<T> O, T* s, T* sh, T* r) {
  const int64_t d = g.d, dv = g.dv, se = a.causal && !a.normalised ? d * dv : g.block();
  const T eps = T(a.eps), scale = T(a.scale);
  const std::vector<T> ws = a.causal ? strict_lower(w, g.M, scale) : std::vector<T>();
  const Dims wide = widened(g);  // the normalised form's pair: V' = [V | 1]
  // A task is one pair, or all H heads of one batch when some tensor needs gathering.
  const int64_t hp = Q.contiguous && K.contiguous && V.contiguous && O.contiguous ? 1 : g.H, n = hp * g.N;
#pragma omp parallel
  {
    std::vector<T> fx(g.L * d), z(d), qb = buffer<T>(Q.contiguous, n * d), kb = buffer<T>(K.contiguous, n * d),
                                      vb = buffer<T>(V.contiguous || a.normalised, n * dv),
                                      ob = buffer<T>(O.contiguous, n * dv),
                                      vp(a.normalised ? g.N * (dv + 1) : 0), up(vp.size());
    CausalScratch<T> cs(!a.causal ? Dims{} : a.normalised ? wide : g, false);
    const TaskRange mine = my_tasks(g.BH / hp);
    for (int64_t task = mine.begin; task < mine.end; ++task) {
      const int64_t bh0 = task * hp;
      FetchAhead ahead(hp * 2 * g.M);  // forward_pair's steps
      if (!a.causal && task + 1 < mine.end)
        for (const Rows<const T>* x : {&Q, &K, &V}) fetch_rows(ahead, *x, bh0 + hp, hp, g.N, FetchAhead::Read);
      const T *q = gather(Q, bh0, hp, g.N, qb), *k = gather(K, bh0, hp, g.N, kb);
      const T* v = a.normalised ? nullptr : gather(V, bh0, hp, g.N, vb);  // else read into vp below
      T* out = target(O, bh0, ob);
      for (int64_t h = 0; h < hp; ++h) {
        const int64_t bh = bh0 + h, od = h * g.N * d, odv = h * g.N * dv;
        if (a.normalised) {
          ones_column(V, bh, g.N, vp.data());
          causal_forward_pair<fm>(wide, q + od, k + od, vp.data(), w, ws.data(), scale, eps, up.data(),
                                  s + bh * g.M * se, sh + bh * g.M * se, cs);
          divide_rows(up.data(), g.N, dv, eps, out + odv, r + bh * g.N);
        } else if (a.causal)
          causal_forward_pair<fm>(g, q + od, k + od, v + odv, w, ws.data(), scale, eps, out + odv, s + bh * g.M * se,
                                  sh + bh * g.M * se, cs);
        else
          forward_pair<fm>(g, q + od, k + od, v + odv, w, eps, out + odv, s + bh * g.M * se, sh + bh * g.M * se,
                           r + bh * g.N, fx, z, ahead);
      }
      scatter(O, bh0, hp, g.N, ob);
    }
  }
}

// One thread's scratch for backward_pair.
template <class T>
struct BackwardScratch {
  std::vector<T> fx, z, gbar, delta, dfx, dsh, ds;
  explicit BackwardScratch(const Dims& g)
      : fx(g.L * g.d), z(g.d), gbar(g.L * g.dv), delta(g.L), dfx(g.L * g.d), dsh(g.M * g.block()),
        ds(g.M * g.block()) {}
};

// One pair's dq, dk, dv and its part of dW (dmix_pair, [M, M]).
template <FeatureMap fm, class T>
void backward_pair(const Dims& g, const T* q, const T* k, const T* v, const T* w, T eps, const T* out, int64_t ldo,
                   const T* grad, int64_t ldg, const T* sp, const T* shp, const T* rp, T* dq, T* dk, T* dvo, T* dmix_pair,
                   BackwardScratch<T>& b, FetchAhead& ahead) {
  const int64_t d = g.d, dv = g.dv, e = dv + 1, se = g.block();
  for (int64_t i = 0; i < g.M; ++i) {
    const int64_t rows = g.rows(i), t0 = i * g.L;
    ahead.step();
    const T *shi = shp + i * se, *qi = q + t0 * d;
    T* dshi = b.dsh.data() + i * se;
    normalised_grad(grad + t0 * ldg, ldg, out + t0 * ldo, ldo, rp + t0, rows, dv, b.gbar.data(), dv, b.delta.data(),
                    int64_t(1));
    // dφQ_i = dU' Ŝ'_iᵀ = Ḡ Ŝ_iᵀ + δ ẑ_iᵀ, then φ'
    mm<T>(false, true, rows, d, dv, b.gbar.data(), dv, shi, e, b.dfx.data(), d);
    column(shi, d, e, dv, b.z.data());  // ẑ_i
    through_features<fm>(b.dfx.data(), b.delta.data(), b.z.data(), qi, rows, d, dq + t0 * d);
    // dŜ'_i = φ(Q_i)ᵀ dU' = [φ(Q_i)ᵀ Ḡ | φ(Q_i)ᵀ δ]
    load_features<fm>(qi, rows, d, eps, b.fx.data());
    mm<T>(true, false, d, dv, rows, b.fx.data(), d, b.gbar.data(), dv, dshi, e);
    column_sums(b.fx.data(), b.delta.data(), rows, d, b.z.data());
    for (int64_t c = 0; c < d; ++c) dshi[c * e + dv] = b.z[c];
  }
  for (int64_t i = 0; i < g.M; ++i)  // this pair's dW = dŜ'_flat S'_flatᵀ
    for (int64_t j = 0; j < g.M; ++j) dmix_pair[i * g.M + j] = dot(b.dsh.data() + i * se, sp + j * se, se);
  mm<T>(true, false, g.M, se, g.M, w, g.M, b.dsh.data(), se, b.ds.data(), se);  // dS' = Wᵀ dŜ'
  for (int64_t j = 0; j < g.M; ++j) {
    const int64_t rows = g.rows(j), t0 = j * g.L;
    ahead.step();
    const T *dsj = b.ds.data() + j * se, *kj = k + t0 * d;
    // dφK_j = V'_j dS'_jᵀ = V_j dS_jᵀ + 1 dz_jᵀ, then φ'
    mm<T>(false, true, rows, d, dv, v + t0 * dv, dv, dsj, e, b.dfx.data(), d);
    column(dsj, d, e, dv, b.z.data());  // dz_j
    through_features<fm>(b.dfx.data(), (const T*)nullptr, b.z.data(), kj, rows, d, dk + t0 * d);
    load_features<fm>(kj, rows, d, eps, b.fx.data());
    mm<T>(false, false, rows, dv, d, b.fx.data(), d, dsj, e, dvo + t0 * dv, dv);  // dV_j = φ(K_j) dS_j
  }
}

template <FeatureMap fm, class T>
void backward(const Dims& g, const Backend::MHLAArgs& a, Rows<const T> Q, Rows<const T> K, Rows<const T> V,
              const T* w, Rows<const T> Out, const T* s, const T* sh, const T* r, Rows<const T> G, Rows<T> DQ,
              Rows<T> DK, Rows<T> DV, T* dmix) {
  const int64_t d = g.d, dv = g.dv, se = a.causal && !a.normalised ? d * dv : g.block(), MM = g.M * g.M;
  const T eps = T(a.eps), scale = T(a.scale);
  const std::vector<T> ws = a.causal ? strict_lower(w, g.M, scale) : std::vector<T>();
  const Dims wide = widened(g);  // the normalised form's pair: V' = [V | 1], dU'
  std::vector<T> dmix_pairs(g.BH * MM);  // per pair, summed in pair order below: deterministic
  const bool contiguous = Q.contiguous && K.contiguous && V.contiguous && Out.contiguous && G.contiguous &&
                          DQ.contiguous && DK.contiguous && DV.contiguous;
  const int64_t hp = contiguous ? 1 : g.H, n = hp * g.N;  // pairs per task, as in forward()
#pragma omp parallel
  {
    BackwardScratch<T> scratch(a.causal ? Dims{} : g);
    CausalScratch<T> cs(!a.causal ? Dims{} : a.normalised ? wide : g, true);
    std::vector<T> vp(a.normalised ? g.N * (dv + 1) : 0), dup(vp.size()), dvp(vp.size());
    std::vector<T> qb = buffer<T>(Q.contiguous, n * d), kb = buffer<T>(K.contiguous, n * d),
                   vb = buffer<T>(V.contiguous || a.normalised, n * dv),
                   gb = buffer<T>(G.contiguous || !a.causal || a.normalised, n * dv),
                   dqb = buffer<T>(DQ.contiguous, n * d),
                   dkb = buffer<T>(DK.contiguous, n * d), dvb = buffer<T>(DV.contiguous, n * dv);
    const TaskRange mine = my_tasks(g.BH / hp);
    for (int64_t task = mine.begin; task < mine.end; ++task) {
      const int64_t bh0 = task * hp;
      FetchAhead ahead(hp * 2 * g.M);  // backward_pair's steps
      if (!a.causal && task + 1 < mine.end) {
        const int64_t next = bh0 + hp;
        for (const Rows<const T>* x : {&Q, &K, &V, &Out, &G}) fetch_rows(ahead, *x, next, hp, g.N, FetchAhead::Read);
        for (const T* saved : {s, sh}) ahead.add(saved + next * g.M * se, hp * g.M * se * int64_t(sizeof(T)), FetchAhead::Read);
      }
      const T *q = gather(Q, bh0, hp, g.N, qb), *k = gather(K, bh0, hp, g.N, kb);
      const T* v = a.normalised ? nullptr : gather(V, bh0, hp, g.N, vb);  // else read into vp below
      // The causal pair's products read the gradient (the normalised pair's dU', formed below).
      const T* grad = a.causal && !a.normalised ? gather(G, bh0, hp, g.N, gb) : nullptr;
      T *dq = target(DQ, bh0, dqb), *dk = target(DK, bh0, dkb), *dvo = target(DV, bh0, dvb);
      for (int64_t h = 0; h < hp; ++h) {
        const int64_t bh = bh0 + h, od = h * g.N * d, odv = h * g.N * dv;
        if (a.normalised) {
          ones_column(V, bh, g.N, vp.data());
          normalised_grad(G.pair(bh), G.ld, Out.pair(bh), Out.ld, r + bh * g.N, g.N, dv, dup.data(), dv + 1,
                          dup.data() + dv, dv + 1);
          causal_backward_pair<fm>(wide, q + od, k + od, vp.data(), w, ws.data(), scale, eps, dup.data(),
                                   s + bh * g.M * se, sh + bh * g.M * se, dq + od, dk + od, dvp.data(),
                                   dmix_pairs.data() + bh * MM, cs);
          copy_heads(dvp.data(), 0, dv + 1, dvo + odv, 0, dv, 1, g.N, dv);  // dV = dV'[:, :dv]
        } else if (a.causal)
          causal_backward_pair<fm>(g, q + od, k + od, v + odv, w, ws.data(), scale, eps, grad + odv,
                                   s + bh * g.M * se, sh + bh * g.M * se, dq + od, dk + od, dvo + odv,
                                   dmix_pairs.data() + bh * MM, cs);
        else
          backward_pair<fm>(g, q + od, k + od, v + odv, w, eps, Out.pair(bh), Out.ld, G.pair(bh), G.ld,
                            s + bh * g.M * se, sh + bh * g.M * se, r + bh * g.N, dq + od, dk + od, dvo + odv,
                            dmix_pairs.data() + bh * MM, scratch, ahead);
      }
      scatter(DQ, bh0, hp, g.N, dqb);
      scatter(DK, bh0, hp, g.N, dkb);
      scatter(DV, bh0, hp, g.N, dvb);
    }
  }
  std::fill(dmix, dmix + MM, T(0));
  for (int64_t bh = 0; bh < g.BH; ++bh)
    for (int64_t x = 0; x < MM; ++x) dmix[x] += dmix_pairs[bh * MM + x];
}

}  // namespace

void CpuBackend::do_mhla_forward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& mix,
                                 const MHLAArgs& a, const Tensor& out, const Tensor& s, const Tensor& sh,
                                 const Tensor& r) {
  on_cpu("mhla_forward", {&q, &k, &v, &mix, &out, &s, &sh, &r});
  const Dims g = Dims::of(q, v, a);
  dispatch_floating(q.dtype(), "mhla_forward", [&]<class T>() {
    with_feature_map(a.feature_map, [&]<FeatureMap fm>() {
      forward<fm, T>(g, a, Rows<const T>(q), Rows<const T>(k), Rows<const T>(v), mix.data<T>(), Rows<T>(out),
                     s.data<T>(), sh.data<T>(), r.defined() ? r.data<T>() : nullptr);
    });
  });
}

void CpuBackend::do_mhla_backward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& mix,
                                  const MHLAArgs& a, const Tensor& out, const Tensor& s, const Tensor& sh,
                                  const Tensor& r, const Tensor& grad, const Tensor& dq, const Tensor& dk,
                                  const Tensor& dv, const Tensor& dmix) {
  on_cpu("mhla_backward", {&q, &k, &v, &mix, &out, &s, &sh, &r, &grad, &dq, &dk, &dv, &dmix});
  const Dims g = Dims::of(q, v, a);
  dispatch_floating(q.dtype(), "mhla_backward", [&]<class T>() {
    with_feature_map(a.feature_map, [&]<FeatureMap fm>() {
      backward<fm, T>(g, a, Rows<const T>(q), Rows<const T>(k), Rows<const T>(v), mix.data<T>(), Rows<const T>(out),
                      s.data<T>(), sh.data<T>(), r.defined() ? r.data<T>() : nullptr, Rows<const T>(grad),
                      Rows<T>(dq), Rows<T>(dk), Rows<T>(dv), dmix.data<T>());
    });
  });
}

}  // namespace linea::cpu::inline LINEA_ISA_NS

#include "linea/tensor/cpu/isa_end.h"
