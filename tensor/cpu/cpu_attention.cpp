// Fused softmax attention on the CPU: tiled, FlashAttention-2's algorithm.
//
// Forward: for each (batch·head, tile of kBr query rows), walk the key tiles of kBc rows keeping,
// per query row, the running max m, the running sum l of exp(s·q·k − m) and an unnormalised
// output accumulator; each new tile rescales what came before by exp(m_old − m_new). Only a
// kBr×kBc score tile ever exists, so memory is O(N·d). The per-row logsumexp L = m + log l is
// saved for the backward, which recomputes each probability tile P = exp(s·QKᵀ − L) instead of
// storing the N×N matrix:
//   D = rowsum(dO∘O),  dV += Pᵀ dO,  dP = dO Vᵀ,  dS = P∘(dP − D),  dQ += s·dS K,  dK += s·dSᵀ Q.
// Tile products are direct BLAS calls on the tiles (serial inside the parallel regions); the row-wise softmax
// bookkeeping is plain loops over contiguous buffers, each written so that GCC vectorises it:
// exp is vec_math.h's (libm's expf is a scalar call: at N = 64 it was most of the kernel's time)
// and the max and sum are separate `omp simd` reductions.
//
// Short sequences (N <= kBc, one key tile: the ViT's 64 tokens, the char-GPT's context) in float32
// take a second form of the same algorithm, where the direct kernel runs: the score tile is built
// transposed, Sᵀ = K Qᵀ, so that a vector holds eight query rows and the softmax's max, exp, sum
// and the backward's dS are vertical operations down the key rows, with no per-row horizontal
// reductions (at N = 64 those were a quarter of the kernel's time), and every product writes its
// output whole instead of accumulating into zeroed buffers.
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>
#include <vector>

#include "linea/tensor/cpu/blas.h"
#include "linea/tensor/cpu/cpu_backend.h"
#include "linea/tensor/cpu/gemm_direct.h"
#include "linea/tensor/cpu/vec_math.h"
#include "linea/tensor/creation.h"
#include "linea/tensor/kernel_checks.h"

namespace linea::cpu {

namespace {

constexpr int64_t kBr = 64;   // query rows per tile
constexpr int64_t kBc = 128;  // key rows per tile
// Below this many multiply-adds a problem runs on one thread: waking a team costs more.
constexpr double kParallelWork = 1 << 20;

// c (+)= a·b on tiles: the direct kernel where it runs (float32, AVX2/AVX-512), else BLAS.
template <class T>
void tile_gemm(bool ta, bool tb, int64_t M, int64_t N, int64_t K, const T* a, int64_t lda, const T* b, int64_t ldb,
               bool accumulate, T* c, int64_t ldc) {
  if constexpr (std::is_same_v<T, float>)
    if (has_direct_gemm()) return gemm_direct(ta, tb, M, N, K, a, lda, b, ldb, c, ldc, accumulate);
  blas_gemm<T>(ta, tb, M, N, K, a, lda, b, ldb, accumulate ? T(1) : T(0), c, ldc);
}

// Row r0 of matrix `bh` of a contiguous [BH, N, c] tensor: tiles are runs of whole rows, so a tile
// is (pointer, leading dimension c) for BLAS, read as it is or transposed, nothing copied.
template <class T>
T* row(const Tensor& x, int64_t bh, int64_t r0) {
  return x.data<T>() + (bh * x.size(1) + r0) * x.size(2);
}

struct Problem {
  int64_t BH, N, d, dv;
  double scale;
  bool causal;
  bool parallel() const { return double(BH) * N * N * (d + dv) >= kParallelWork; }
};

Problem problem(const Tensor& q, const Tensor& v, double scale, bool causal) {
  return {q.size(0), q.size(1), q.size(2), v.size(2), scale, causal};
}

// ---- one key tile, float32, transposed scores (see the top of the file)

// Whether problem p takes the transposed single-tile form.
bool transposed_tile(const Problem& p) { return p.N <= kBc && has_direct_gemm(); }

// o = softmax(s·QKᵀ)V and L for one (batch·head) matrix; st is scratch for N·N floats, m and l for N.
void tile_forward(const Problem& p, const float* q, const float* k, const float* v, float* o, float* L, float* st,
                  float* m, float* l) {
  const int64_t N = p.N;
  const float scale = static_cast<float>(p.scale);
  gemm_direct(false, true, N, N, p.d, k, p.d, q, p.d, st, N);  // st[c][r] = k_c · q_r
  // Key c is masked for the query rows r < c when causal; row 0 of st is never masked, so m is finite.
  std::fill(m, m + N, -std::numeric_limits<float>::infinity());
  for (int64_t c = 0; c < N; ++c) {
    const float* sc = st + c * N;
#pragma omp simd
    for (int64_t r = p.causal ? c : 0; r < N; ++r) {
      const float x = scale * sc[r];
      m[r] = m[r] < x ? x : m[r];  // std::max here stayed scalar (GCC 12)
    }
  }
  std::fill(l, l + N, 0.0f);
  for (int64_t c = 0; c < N; ++c) {
    float* sc = st + c * N;
    const int64_t r0 = p.causal ? c : 0;
    std::fill(sc, sc + r0, 0.0f);
#pragma omp simd
    for (int64_t r = r0; r < N; ++r) {
      const float e = vexp(scale * sc[r] - m[r]);
      sc[r] = e;
      l[r] += e;
    }
  }
  gemm_direct(true, false, N, p.dv, N, st, N, v, p.dv, o, p.dv);  // o_r = Σ_c P[r][c] v_c, P = stᵀ
  for (int64_t r = 0; r < N; ++r) {
    for (int64_t e = 0; e < p.dv; ++e) o[r * p.dv + e] /= l[r];
    L[r] = m[r] + std::log(l[r]);
  }
}

// The gradients of one (batch·head) matrix, recomputing P from L; D = rowsum(dO∘O). pt and dst are
// scratch for N·N floats each.
void tile_backward(const Problem& p, const float* q, const float* k, const float* v, const float* L, const float* D,
                   const float* dout, float* dq, float* dk, float* dv, float* pt, float* dst) {
  const int64_t N = p.N;
  const float scale = static_cast<float>(p.scale);
  gemm_direct(false, true, N, N, p.d, k, p.d, q, p.d, pt, N);        // pt[c][r] = k_c · q_r
  gemm_direct(false, true, N, N, p.dv, v, p.dv, dout, p.dv, dst, N);  // dPᵀ[c][r] = v_c · dO_r
  for (int64_t c = 0; c < N; ++c) {
    float *pc = pt + c * N, *dc = dst + c * N;
    const int64_t r0 = p.causal ? c : 0;
    std::fill(pc, pc + r0, 0.0f);
    std::fill(dc, dc + r0, 0.0f);
#pragma omp simd
    for (int64_t r = r0; r < N; ++r) {
      pc[r] = vexp(scale * pc[r] - L[r]);
      dc[r] = scale * pc[r] * (dc[r] - D[r]);  // s·dSᵀ: the scale of S = s·QKᵀ folded in
    }
  }
  gemm_direct(false, false, N, p.dv, N, pt, N, dout, p.dv, dv, p.dv);  // dV = Pᵀ dO
  gemm_direct(false, false, N, p.d, N, dst, N, q, p.d, dk, p.d);       // dK = s·dSᵀ Q
  gemm_direct(true, false, N, p.d, N, dst, N, k, p.d, dq, p.d);        // dQ = s·dS K
}

// ---- the tiled form (any N, float64, or a CPU without the direct kernel)

template <class T>
void flash_forward(const Problem& p, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& o,
                   const Tensor& lse) {
  if constexpr (std::is_same_v<T, float>)
    if (transposed_tile(p)) {
#pragma omp parallel if (p.parallel())
      {
        std::vector<float> st(p.N * p.N), m(p.N), l(p.N);
#pragma omp for schedule(static)
        for (int64_t bh = 0; bh < p.BH; ++bh)
          tile_forward(p, row<float>(q, bh, 0), row<float>(k, bh, 0), row<float>(v, bh, 0), row<float>(o, bh, 0),
                       lse.data<float>() + bh * p.N, st.data(), m.data(), l.data());
      }
      return;
    }
  const int64_t tiles = (p.N + kBr - 1) / kBr;
  const T scale = static_cast<T>(p.scale), neg_inf = -std::numeric_limits<T>::infinity();
#pragma omp parallel if (p.parallel())
  {
    std::vector<T> s_buf(kBr * kBc), m(kBr), l(kBr);
#pragma omp for schedule(dynamic)
    for (int64_t task = 0; task < p.BH * tiles; ++task) {
      const int64_t bh = task / tiles, r0 = task % tiles * kBr, br = std::min(kBr, p.N - r0);
      T* out = o.data<T>() + (bh * p.N + r0) * p.dv;
      std::fill(out, out + br * p.dv, T(0));
      std::fill(m.begin(), m.end(), neg_inf);
      std::fill(l.begin(), l.end(), T(0));
      const int64_t key_end = p.causal ? r0 + br : p.N;  // tiles wholly above the diagonal are skipped
      for (int64_t c0 = 0; c0 < key_end; c0 += kBc) {
        const int64_t bc = std::min(kBc, key_end - c0);
        const bool diagonal = p.causal && c0 + bc - 1 > r0;  // some (row, key) pair here is masked
        T* s = s_buf.data();
        tile_gemm<T>(false, true, br, bc, p.d, row<T>(q, bh, r0), p.d, row<T>(k, bh, c0), p.d, false, s, bc);  // QKᵀ
        for (int64_t r = 0; r < br; ++r) {
          T* sr = s + r * bc;
          // Keys past query r0 + r are masked on the diagonal tile; row 0 of the first tile is
          // never fully masked, so m is finite from the first tile on.
          const int64_t visible = diagonal ? std::clamp<int64_t>(r0 + r - c0 + 1, 0, bc) : bc;
          T mx = m[r];
#pragma omp simd reduction(max : mx)
          for (int64_t c = 0; c < visible; ++c) mx = std::max(mx, scale * sr[c]);
          const T alpha = std::exp(m[r] - mx);  // rescales the previous tiles (0 on the first)
#pragma omp simd
          for (int64_t c = 0; c < visible; ++c) sr[c] = vexp(scale * sr[c] - mx);
          T sum = 0;
#pragma omp simd reduction(+ : sum)
          for (int64_t c = 0; c < visible; ++c) sum += sr[c];
          std::fill(sr + visible, sr + bc, T(0));
          l[r] = l[r] * alpha + sum;
          m[r] = mx;
          for (int64_t e = 0; e < p.dv; ++e) out[r * p.dv + e] *= alpha;
        }
        tile_gemm<T>(false, false, br, p.dv, bc, s, bc, row<T>(v, bh, c0), p.dv, true, out, p.dv);  // out += PV
      }
      T* L = lse.data<T>() + bh * p.N + r0;
      for (int64_t r = 0; r < br; ++r) {
        for (int64_t e = 0; e < p.dv; ++e) out[r * p.dv + e] /= l[r];
        L[r] = m[r] + std::log(l[r]);
      }
    }
  }
}

// acc[0..n) += add[0..n)
template <class T>
void accumulate(T* acc, const Tensor& add, int64_t n) {
  const T* a = add.data<T>();
  for (int64_t i = 0; i < n; ++i) acc[i] += a[i];
}

// Gradients of the tiled forward, recomputing P tile by tile. Parallel over (batch·head, key
// tile): each task owns its rows of dK and dV. With several key tiles, dQ rows are shared between
// tasks, so every thread accumulates into its own dQ buffer and the buffers are summed at the end;
// with one (N <= kBc, the small models' case) a task owns its pair's dQ rows too and writes them.
template <class T>
void flash_backward(const Problem& p, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& o,
                    const Tensor& lse, const Tensor& dout, const Tensor& dq, const Tensor& dk, const Tensor& dv) {
  const int64_t tiles = (p.N + kBc - 1) / kBc;
  const T scale = static_cast<T>(p.scale);
  // D = rowsum(dO ∘ O): the softmax Jacobian's correction term, one number per query row.
  std::vector<T> D(p.BH * p.N);
  {
    const T *po = o.data<T>(), *pg = dout.data<T>();
#pragma omp parallel for schedule(static) if (p.parallel())
    for (int64_t i = 0; i < p.BH * p.N; ++i) {
      T acc = 0;
      for (int64_t e = 0; e < p.dv; ++e) acc += po[i * p.dv + e] * pg[i * p.dv + e];
      D[i] = acc;
    }
  }
  if constexpr (std::is_same_v<T, float>)
    if (transposed_tile(p)) {
#pragma omp parallel if (p.parallel())
      {
        std::vector<float> pt(p.N * p.N), dst(p.N * p.N);
#pragma omp for schedule(static)
        for (int64_t bh = 0; bh < p.BH; ++bh)
          tile_backward(p, row<float>(q, bh, 0), row<float>(k, bh, 0), row<float>(v, bh, 0),
                        lse.data<float>() + bh * p.N, D.data() + bh * p.N, row<float>(dout, bh, 0),
                        row<float>(dq, bh, 0), row<float>(dk, bh, 0), row<float>(dv, bh, 0), pt.data(), dst.data());
      }
      return;
    }
  const int threads = p.parallel() ? omp_get_max_threads() : 1;
  const bool shared_dq = tiles > 1;
  std::vector<Tensor> dq_parts(shared_dq ? threads : 0);
  if (!shared_dq) std::fill(dq.data<T>(), dq.data<T>() + dq.numel(), T(0));
#pragma omp parallel num_threads(threads)
  {
    Tensor dq_part = shared_dq ? zeros({p.BH, p.N, p.d}, q.dtype()) : dq;
    if (shared_dq) dq_parts[omp_get_thread_num()] = dq_part;
    std::vector<T> p_buf(kBr * kBc), dp_buf(kBr * kBc);
#pragma omp for schedule(dynamic)
    for (int64_t task = 0; task < p.BH * tiles; ++task) {
      const int64_t bh = task / tiles, c0 = task % tiles * kBc, bc = std::min(kBc, p.N - c0);
      T* dk_j = dk.data<T>() + (bh * p.N + c0) * p.d;
      T* dv_j = dv.data<T>() + (bh * p.N + c0) * p.dv;
      std::fill(dk_j, dk_j + bc * p.d, T(0));
      std::fill(dv_j, dv_j + bc * p.dv, T(0));
      const int64_t first = p.causal ? c0 / kBr * kBr : 0;  // query tiles wholly above are skipped
      for (int64_t r0 = first; r0 < p.N; r0 += kBr) {
        const int64_t br = std::min(kBr, p.N - r0);
        const bool diagonal = p.causal && c0 + bc - 1 > r0;
        T *P = p_buf.data(), *dS = dp_buf.data();
        tile_gemm<T>(false, true, br, bc, p.d, row<T>(q, bh, r0), p.d, row<T>(k, bh, c0), p.d, false, P, bc);
        tile_gemm<T>(false, true, br, bc, p.dv, row<T>(dout, bh, r0), p.dv, row<T>(v, bh, c0), p.dv, false, dS, bc);
        const T* L = lse.data<T>() + bh * p.N + r0;
        const T* Dr = D.data() + bh * p.N + r0;
        for (int64_t r = 0; r < br; ++r) {
          const int64_t visible = diagonal ? std::clamp<int64_t>(r0 + r - c0 + 1, 0, bc) : bc;
          T *Pr = P + r * bc, *dSr = dS + r * bc;
          const T Lr = L[r], Dv = Dr[r];
#pragma omp simd
          for (int64_t c = 0; c < bc; ++c) {
            Pr[c] = c < visible ? vexp(scale * Pr[c] - Lr) : T(0);
            dSr[c] = scale * Pr[c] * (dSr[c] - Dv);  // s·dS: the scale of S = s·QKᵀ folded in
          }
        }
        // dV += Pᵀ dO, dK += s·dSᵀ Q, dQ += s·dS K, accumulated by BLAS itself (beta = 1).
        tile_gemm<T>(true, false, bc, p.dv, br, P, bc, row<T>(dout, bh, r0), p.dv, true, dv_j, p.dv);
        tile_gemm<T>(true, false, bc, p.d, br, dS, bc, row<T>(q, bh, r0), p.d, true, dk_j, p.d);
        tile_gemm<T>(false, false, br, p.d, bc, dS, bc, row<T>(k, bh, c0), p.d, true, row<T>(dq_part, bh, r0), p.d);
      }
    }
  }
  if (!shared_dq) return;
  T* out = dq.data<T>();
  std::fill(out, out + dq.numel(), T(0));
  for (const Tensor& part : dq_parts)
    if (part.defined()) accumulate<T>(out, part, dq.numel());
}

}  // namespace

void CpuBackend::attention_forward(const Tensor& q, const Tensor& k, const Tensor& v, double scale, bool causal,
                                   const Tensor& out, const Tensor& lse) {
  kernel_checks::attention("attention_forward", q, k, v, lse, {}, {&v, &out});
  dispatch_floating(q.dtype(), "attention_forward",
                    [&]<class T>() { flash_forward<T>(problem(q, v, scale, causal), q, k, v, out, lse); });
}

void CpuBackend::attention_backward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out,
                                    const Tensor& lse, const Tensor& dout, double scale, bool causal, const Tensor& dq,
                                    const Tensor& dk, const Tensor& dv) {
  kernel_checks::attention("attention_backward", q, k, v, lse, {&dq, &dk}, {&v, &out, &dout, &dv});
  dispatch_floating(q.dtype(), "attention_backward", [&]<class T>() {
    flash_backward<T>(problem(q, v, scale, causal), q, k, v, out, lse, dout, dq, dk, dv);
  });
}

}  // namespace linea::cpu
