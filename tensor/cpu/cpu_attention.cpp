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
// transposed, Sᵀ = K Qᵀ, so that a vector holds 16 query rows and the softmax's max, exp, sum
// and the backward's dS are vertical operations down the key rows, with no per-row horizontal
// reductions (at N = 64 those were a quarter of the kernel's time), and every product writes its
// output whole instead of accumulating into zeroed buffers. Sᵀ's rows are padded to a multiple of
// 16 floats, so those loops run on whole vectors, the causal mask a select inside them. This form
// normalises P before P·V and keeps it for the backward (Backend::attention_probs_size: at most
// 64 KB per pair), which then reads P instead of recomputing S = s·QKᵀ and its exps.
//
// q, k, v, the output and the gradients are [B, H, N, e] rows read and written through their
// strides (head_rows.h): the heads of the attention's packed [B, N, 3·H·d] projection and of the
// [B, N, H·dv] output stay where they lie, with no copies into [B·H, N, e] blocks around the kernels.
#include <omp.h>
#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>
#include <vector>

#include "linea/tensor/cpu/blas.h"
#include "linea/tensor/cpu/gemm_direct.h"
#include "linea/tensor/cpu/vec_math.h"

#include "linea/tensor/cpu/isa_begin.h"
#include "linea/tensor/cpu/cpu_backend.h"
#include "linea/tensor/cpu/fetch_ahead.h"
#include "linea/tensor/cpu/head_rows.h"
#include "linea/tensor/cpu/lane_sums.h"

namespace linea::cpu::inline LINEA_ISA_NS {

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
    if (has_direct_gemm())
      return gemm_direct(ta, tb, M, N, K, a, lda, b, ldb, c, ldc, {accumulate ? c : nullptr, ldc});
  blas_gemm<T>(ta, tb, M, N, K, a, lda, b, ldb, accumulate ? T(1) : T(0), c, ldc);
}

// Tiles are runs of whole rows, so a tile is (pointer to its first row, the tensor's row stride)
// for BLAS, read as it is or transposed, nothing copied.
struct Problem {
  int64_t BH, N, d, dv;
  double scale;
  bool causal;
  bool parallel() const { return double(BH) * N * N * (d + dv) >= kParallelWork; }
};

Problem problem(const Tensor& q, const Tensor& v, double scale, bool causal) {
  return {q.size(0) * q.size(1), q.size(2), q.size(3), v.size(3), scale, causal};
}

// ---- one key tile, float32, transposed scores (see the top of the file)

// Whether a float32 problem of N keys takes the transposed single-tile form.
bool transposed_tile(int64_t N) { return N <= kBc && has_direct_gemm(); }

// Causal tiles skip the fully masked block of the transposed scores: with h = N/2 rounded down to
// a multiple of 8, key rows c >= h meet only query rows r >= h (r >= c), and query rows r < h only
// key rows c < h, so every product below drops a quarter of its work (0 below N = 16: no split).
// Entries st[c][r] with c >= h > r are left unwritten; the softmax loops zero every other masked
// entry (r < c) that a product reads (key_range).
int64_t causal_split(const Problem& p) { return p.causal && p.N >= 16 ? p.N / 2 / 8 * 8 : 0; }

// st[c][r] = a_c · b_r (e values each) for the pairs the mask keeps (c, r < N, rows of st ld apart).
void scores_t(int64_t N, int64_t h, const float* a, int64_t lda, const float* b, int64_t ldb, int64_t e, float* st,
              int64_t ld) {
  gemm_direct(false, true, h ? h : N, N, e, a, lda, b, ldb, st, ld);
  if (h) gemm_direct(false, true, N - h, N - h, e, a + h * lda, lda, b + h * ldb, ldb, st + h * ld + h, ld);
}
// out[c] = Σ_r st[c][r] x_r (dV, dK: key rows), over the r the mask keeps.
void key_rows(int64_t N, int64_t h, const float* st, int64_t ld, const float* x, int64_t ldx, int64_t e, float* out,
              int64_t ldo) {
  gemm_direct(false, false, h ? h : N, e, N, st, ld, x, ldx, out, ldo);
  if (h) gemm_direct(false, false, N - h, e, N - h, st + h * ld + h, ld, x + h * ldx, ldx, out + h * ldo, ldo);
}
// out[r] = Σ_c st[c][r] x_c (o = PV, dQ: query rows), over the c the mask keeps.
void query_rows(int64_t N, int64_t h, const float* st, int64_t ld, const float* x, int64_t ldx, int64_t e,
                float* out, int64_t ldo) {
  gemm_direct(true, false, h ? h : N, e, h ? h : N, st, ld, x, ldx, out, ldo);
  if (h) gemm_direct(true, false, N - h, e, N, st + h, ld, x, ldx, out + h * ldo, ldo);
}

// The softmax loops walk the query rows in blocks of kLanes (one AVX-512 vector), each block down
// the key rows c it meets: per-row state (max, sum, D) stays in the block's lanes and every
// access is a whole vector, with no scalar tail per key row (measured: docs/benchmarks.md,
// "Softmax attention's CPU kernels").
constexpr int64_t kLanes = 16;
int64_t lanes_ld(int64_t N) { return (N + kLanes - 1) / kLanes * kLanes; }
int64_t probs_size(int64_t N) { return N * lanes_ld(N); }  // a pair's P (or scores), transposed

// For the query rows [r0, r0 + kLanes): the key rows [0, end) that meet one of them, and the
// key rows [end, zero_end) whose masked entries the products still read (zeroed).
struct KeyRange {
  int64_t end, zero_end;
};
KeyRange key_range(const Problem& p, int64_t h, int64_t r0) {
  if (!p.causal) return {p.N, p.N};
  const int64_t end = std::min(p.N, r0 + kLanes);
  return {end, h && r0 + kLanes <= h ? std::max(end, h) : p.N};
}

// The key loops' steps per pair (the sum of key_range(...).end over the query blocks): each step
// fetches a share of the next pair's lines (fetch_ahead.h).
int64_t key_steps(const Problem& p) {
  int64_t steps = 0;
  for (int64_t r0 = 0; r0 < p.N; r0 += kLanes) steps += key_range(p, causal_split(p), r0).end;
  return steps;
}

// o = softmax(s·QKᵀ)V and L for one (batch·head) pair; st (N·lanes_ld(N) floats: the saved
// probabilities, or scratch) receives P, transposed: st[c][r] = P[r][c], zero where masked.
// `ahead` fetches the next pair's P block and O rows for writing and its q, k, v rows for reading
// (which pays where a thread's share of the projection is past L2, as the ViT's is). Measured:
// docs/benchmarks.md, "Softmax attention's CPU kernels".
void tile_forward(const Problem& p, const Rows<const float>& Q, const Rows<const float>& K,
                  const Rows<const float>& V, const Rows<float>& O, int64_t bh, float* L, float* st,
                  FetchAhead& ahead) {
  const int64_t N = p.N, h = causal_split(p), ld = lanes_ld(N);
  const float scale = static_cast<float>(p.scale);
  scores_t(N, h, K.pair(bh), K.ld, Q.pair(bh), Q.ld, p.d, st, ld);  // st[c][r] = k_c · q_r
  for (int64_t r0 = 0; r0 < N; r0 += kLanes) {
    const KeyRange keys = key_range(p, h, r0);
    const int64_t first_masked = p.causal ? r0 : N;  // keys from here on meet some masked row of the block
    const int64_t hi = N - r0;                       // lanes j >= hi are padding
    float m[kLanes], sum[kLanes];
    std::fill(m, m + kLanes, -std::numeric_limits<float>::infinity());
    std::fill(sum, sum + kLanes, 0.0f);
    // Key c is masked for the query rows r < c when causal; row 0 of st is never masked, so m is
    // finite in every real lane.
    for (int64_t c = 0; c < keys.end; ++c) {
      const float* sc = st + c * ld + r0;
      const int64_t lo = c < first_masked ? 0 : c - r0;
#pragma omp simd
      for (int64_t j = 0; j < kLanes; ++j) {
        const float x = scale * sc[j];
        m[j] = j >= lo && j < hi && m[j] < x ? x : m[j];  // std::max here stayed scalar (GCC 12)
      }
    }
    for (int64_t c = 0; c < keys.end; ++c) {
      float* sc = st + c * ld + r0;
      const int64_t lo = c < first_masked ? 0 : c - r0;
      ahead.step();
#pragma omp simd
      for (int64_t j = 0; j < kLanes; ++j) {
        const float e = j >= lo && j < hi ? vexp(scale * sc[j] - m[j]) : 0.0f;
        sc[j] = e;
        sum[j] += e;
      }
    }
    // P = e / l, so that o = P V and the backward reads P as it is.
    float inv[kLanes];
    for (int64_t j = 0; j < kLanes; ++j) inv[j] = j < hi ? 1.0f / sum[j] : 0.0f;
    for (int64_t c = 0; c < keys.end; ++c) {
      float* sc = st + c * ld + r0;
      for (int64_t j = 0; j < kLanes; ++j) sc[j] *= inv[j];
    }
    for (int64_t c = keys.end; c < keys.zero_end; ++c) std::fill(st + c * ld + r0, st + c * ld + r0 + kLanes, 0.0f);
    for (int64_t j = 0; j < std::min(kLanes, hi); ++j) L[r0 + j] = m[j] + std::log(sum[j]);
  }
  query_rows(N, h, st, ld, V.pair(bh), V.ld, p.dv, O.pair(bh), O.ld);  // o_r = Σ_c P[r][c] v_c
}

// D[r] = rowsum(dO ∘ O) for the N rows of pair bh: the softmax Jacobian's correction term.
template <class T>
void row_dots(const Rows<const T>& O, const Rows<const T>& G, int64_t bh, int64_t N, int64_t dv, T* D) {
  for (int64_t r = 0; r < N; ++r) {
    const T *po = O.row(bh, r), *pg = G.row(bh, r);
    D[r] = lane_sum<T>(dv, [&](int64_t e) { return po[e] * pg[e]; });  // one chain of adds was 5% of the kernels
  }
}

// The gradients of one (batch·head) pair from the forward's P (pt, as tile_forward left it); dst
// is scratch for N·lanes_ld(N) floats; `ahead` fetches the next pair's P and q, k, v rows into L2,
// all saved by the forward long before. dQ, dK, dV are not fetched for writing (with P and the
// scratch, L1 is full), nor dO. D = rowsum(dO∘O) is taken as rowsum(P∘dP), the same sum
// (O = PV, so dO·o_r = Σ_c P[r][c] dO_r·v_c), down the key rows like the rest: no horizontal sums
// and no read of O. Measured: docs/benchmarks.md, "Softmax attention's CPU kernels".
void tile_backward(const Problem& p, const Rows<const float>& Q, const Rows<const float>& K,
                   const Rows<const float>& V, const Rows<const float>& G, const Rows<float>& DQ,
                   const Rows<float>& DK, const Rows<float>& DV, int64_t bh, const float* pt, float* dst,
                   FetchAhead& ahead) {
  const int64_t N = p.N, h = causal_split(p), ld = lanes_ld(N);
  const float scale = static_cast<float>(p.scale);
  const float *q = Q.pair(bh), *k = K.pair(bh), *dout = G.pair(bh);
  scores_t(N, h, V.pair(bh), V.ld, dout, G.ld, p.dv, dst, ld);  // dPᵀ[c][r] = v_c · dO_r
  for (int64_t r0 = 0; r0 < N; r0 += kLanes) {
    const KeyRange keys = key_range(p, h, r0);
    const int64_t first_masked = p.causal ? r0 : N;
    // P is 0 wherever masked (and in the padding lanes), so the sum runs over whole vectors.
    float Dr[kLanes] = {};
    for (int64_t c = 0; c < keys.end; ++c) {
      const float *pc = pt + c * ld + r0, *dc = dst + c * ld + r0;
      ahead.step();
      for (int64_t j = 0; j < kLanes; ++j) Dr[j] += pc[j] * dc[j];
    }
    for (int64_t c = 0; c < keys.end; ++c) {
      const float* pc = pt + c * ld + r0;
      float* dc = dst + c * ld + r0;
      const int64_t lo = c < first_masked ? 0 : c - r0, hi = N - r0;
      ahead.step();
#pragma omp simd
      for (int64_t j = 0; j < kLanes; ++j)  // s·dSᵀ: the scale of S = s·QKᵀ folded in
        dc[j] = j >= lo && j < hi ? scale * pc[j] * (dc[j] - Dr[j]) : 0.0f;
    }
    for (int64_t c = keys.end; c < keys.zero_end; ++c) std::fill(dst + c * ld + r0, dst + c * ld + r0 + kLanes, 0.0f);
  }
  key_rows(N, h, pt, ld, dout, G.ld, p.dv, DV.pair(bh), DV.ld);  // dV = Pᵀ dO
  key_rows(N, h, dst, ld, q, Q.ld, p.d, DK.pair(bh), DK.ld);     // dK = s·dSᵀ Q
  query_rows(N, h, dst, ld, k, K.ld, p.d, DQ.pair(bh), DQ.ld);   // dQ = s·dS K
}

// ---- the tiled form (any N, float64, or a CPU without the direct kernel)

// probs: where not null, the one-tile form's P for the backward (probs_size(N) floats per pair).
template <class T>
void flash_forward(const Problem& p, const Rows<const T>& Q, const Rows<const T>& K, const Rows<const T>& V,
                   const Rows<T>& O, T* lse, T* probs) {
  if constexpr (std::is_same_v<T, float>)
    if (transposed_tile(p.N)) {
      const int64_t size = probs_size(p.N);
      const int64_t steps = key_steps(p);
#pragma omp parallel if (p.parallel())
      {
        std::vector<float> scratch(probs ? 0 : size);  // reused by every pair: no need to fetch it
        const TaskRange mine = my_tasks(p.BH);
        for (int64_t bh = mine.begin; bh < mine.end; ++bh) {
          FetchAhead ahead(steps);
          if (bh + 1 < mine.end) {
            if (probs) ahead.add(probs + (bh + 1) * size, size * 4, FetchAhead::Write);
            fetch_rows(ahead, O, bh + 1, 1, p.N, FetchAhead::Write);
            for (const Rows<const float>* x : {&Q, &K, &V}) fetch_rows(ahead, *x, bh + 1, 1, p.N, FetchAhead::Read);
          }
          tile_forward(p, Q, K, V, O, bh, lse + bh * p.N, probs ? probs + bh * size : scratch.data(), ahead);
        }
      }
      return;
    }
  const int64_t tiles = (p.N + kBr - 1) / kBr;
  const T scale = static_cast<T>(p.scale), neg_inf = -std::numeric_limits<T>::infinity();
  parallel_if(p.parallel(), [&] {
    std::vector<T> s_buf(kBr * kBc), m(kBr), l(kBr);
#pragma omp for schedule(dynamic)
    for (int64_t task = 0; task < p.BH * tiles; ++task) {
      const int64_t bh = task / tiles, r0 = task % tiles * kBr, br = std::min(kBr, p.N - r0);
      T* out = O.row(bh, r0);
      for (int64_t r = 0; r < br; ++r) std::fill(out + r * O.ld, out + r * O.ld + p.dv, T(0));
      std::fill(m.begin(), m.end(), neg_inf);
      std::fill(l.begin(), l.end(), T(0));
      const int64_t key_end = p.causal ? r0 + br : p.N;  // tiles wholly above the diagonal are skipped
      for (int64_t c0 = 0; c0 < key_end; c0 += kBc) {
        const int64_t bc = std::min(kBc, key_end - c0);
        const bool diagonal = p.causal && c0 + bc - 1 > r0;  // some (row, key) pair here is masked
        T* s = s_buf.data();
        tile_gemm<T>(false, true, br, bc, p.d, Q.row(bh, r0), Q.ld, K.row(bh, c0), K.ld, false, s, bc);  // QKᵀ
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
          for (int64_t e = 0; e < p.dv; ++e) out[r * O.ld + e] *= alpha;
        }
        tile_gemm<T>(false, false, br, p.dv, bc, s, bc, V.row(bh, c0), V.ld, true, out, O.ld);  // out += PV
      }
      T* L = lse + bh * p.N + r0;
      for (int64_t r = 0; r < br; ++r) {
        for (int64_t e = 0; e < p.dv; ++e) out[r * O.ld + e] /= l[r];
        L[r] = m[r] + std::log(l[r]);
      }
    }
  });
}

// Gradients of the tiled forward, recomputing P tile by tile. Parallel over (batch·head, key
// tile): each task owns its rows of dK and dV. With several key tiles, dQ rows are shared between
// tasks, so every thread accumulates into its own dQ buffer and the buffers are summed at the end;
// with one (N <= kBc, the small models' case) a task owns its pair's dQ rows too and writes them.
template <class T>
void flash_backward(const Problem& p, const Rows<const T>& Q, const Rows<const T>& K, const Rows<const T>& V,
                    const Rows<const T>& O, const T* lse, const T* probs, const Rows<const T>& G,
                    const Rows<T>& DQ, const Rows<T>& DK, const Rows<T>& DV) {
  const int64_t tiles = (p.N + kBc - 1) / kBc;
  const T scale = static_cast<T>(p.scale);
  if constexpr (std::is_same_v<T, float>)
    if (transposed_tile(p.N)) {
      const int64_t size = probs_size(p.N);
      const int64_t steps = 2 * key_steps(p);  // the D loop's and the dS loop's
#pragma omp parallel if (p.parallel())
      {
        std::vector<float> dst(size);
        const TaskRange mine = my_tasks(p.BH);
        for (int64_t bh = mine.begin; bh < mine.end; ++bh) {
          FetchAhead ahead(steps);
          if (bh + 1 < mine.end) {
            ahead.add(probs + (bh + 1) * size, size * 4, FetchAhead::Read);
            for (const Rows<const float>* x : {&Q, &K, &V}) fetch_rows(ahead, *x, bh + 1, 1, p.N, FetchAhead::Read);
          }
          tile_backward(p, Q, K, V, G, DQ, DK, DV, bh, probs + bh * size, dst.data(), ahead);
        }
      }
      return;
    }
  // D for every query row first: the key-tile tasks below each read all of a pair's rows.
  std::vector<T> D(p.BH * p.N);
#pragma omp parallel for schedule(static) if (p.parallel())
  for (int64_t bh = 0; bh < p.BH; ++bh) row_dots(O, G, bh, p.N, p.dv, D.data() + bh * p.N);
  const int threads = p.parallel() ? omp_get_max_threads() : 1;  // parallel_if's team: the default size
  const bool shared_dq = tiles > 1;
  // dQ's rows: the output's own with one key tile, else each thread's contiguous [BH, N, d] part.
  std::vector<std::vector<T>> dq_parts(shared_dq ? threads : 0);
  auto zero_rows = [](const Rows<T>& x, int64_t bh, int64_t r0, int64_t rows, int64_t e) {
    for (int64_t r = 0; r < rows; ++r) std::fill(x.row(bh, r0 + r), x.row(bh, r0 + r) + e, T(0));
  };
  parallel_if(p.parallel(), [&] {
    std::vector<T>* part = shared_dq ? &dq_parts[omp_get_thread_num()] : nullptr;
    if (part) part->assign(p.BH * p.N * p.d, T(0));
    std::vector<T> p_buf(kBr * kBc), dp_buf(kBr * kBc);
#pragma omp for schedule(dynamic)
    for (int64_t task = 0; task < p.BH * tiles; ++task) {
      const int64_t bh = task / tiles, c0 = task % tiles * kBc, bc = std::min(kBc, p.N - c0);
      T *dk_j = DK.row(bh, c0), *dv_j = DV.row(bh, c0);
      zero_rows(DK, bh, c0, bc, p.d);
      zero_rows(DV, bh, c0, bc, p.dv);
      const int64_t first = p.causal ? c0 / kBr * kBr : 0;  // query tiles wholly above are skipped
      for (int64_t r0 = first; r0 < p.N; r0 += kBr) {
        const int64_t br = std::min(kBr, p.N - r0);
        const bool diagonal = p.causal && c0 + bc - 1 > r0;
        T *P = p_buf.data(), *dS = dp_buf.data();
        tile_gemm<T>(false, true, br, bc, p.d, Q.row(bh, r0), Q.ld, K.row(bh, c0), K.ld, false, P, bc);
        tile_gemm<T>(false, true, br, bc, p.dv, G.row(bh, r0), G.ld, V.row(bh, c0), V.ld, false, dS, bc);
        const T* L = lse + bh * p.N + r0;
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
        // dV += Pᵀ dO, dK += s·dSᵀ Q, dQ += s·dS K, accumulated by the products themselves.
        tile_gemm<T>(true, false, bc, p.dv, br, P, bc, G.row(bh, r0), G.ld, true, dv_j, DV.ld);
        tile_gemm<T>(true, false, bc, p.d, br, dS, bc, Q.row(bh, r0), Q.ld, true, dk_j, DK.ld);
        if (part)
          tile_gemm<T>(false, false, br, p.d, bc, dS, bc, K.row(bh, c0), K.ld, true,
                       part->data() + (bh * p.N + r0) * p.d, p.d);
        else
          tile_gemm<T>(false, false, br, p.d, bc, dS, bc, K.row(bh, c0), K.ld, c0 > 0, DQ.row(bh, r0), DQ.ld);
      }
    }
  });
  if (!shared_dq) return;
  for (int64_t i = 0; i < p.BH * p.N; ++i) {  // the parts summed in thread order: deterministic
    T* out = DQ.row(i / p.N, i % p.N);
    std::fill(out, out + p.d, T(0));
    for (const std::vector<T>& part : dq_parts)
      if (!part.empty())
        for (int64_t e = 0; e < p.d; ++e) out[e] += part[i * p.d + e];
  }
}

}  // namespace

// The one-tile form keeps P: at N <= 128 a pair's is at most 64 KB, and the backward then skips
// recomputing S = q kᵀ and its exps (measured: docs/benchmarks.md, "Softmax attention's CPU
// kernels").
int64_t CpuBackend::attention_probs_size(int64_t N, DType dtype) const {
  return dtype == DType::Float32 && transposed_tile(N) ? probs_size(N) : 0;
}

void CpuBackend::do_attention_forward(const Tensor& q, const Tensor& k, const Tensor& v, double scale, bool causal,
                                      const Tensor& out, const Tensor& lse, const Tensor& probs) {
  dispatch_floating(q.dtype(), "attention_forward", [&]<class T>() {
    flash_forward<T>(problem(q, v, scale, causal), Rows<const T>(q), Rows<const T>(k), Rows<const T>(v), Rows<T>(out),
                     lse.data<T>(), probs.defined() ? probs.data<T>() : nullptr);
  });
}

void CpuBackend::do_attention_backward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out,
                                       const Tensor& lse, const Tensor& probs, const Tensor& dout, double scale,
                                       bool causal, const Tensor& dq, const Tensor& dk, const Tensor& dv) {
  dispatch_floating(q.dtype(), "attention_backward", [&]<class T>() {
    flash_backward<T>(problem(q, v, scale, causal), Rows<const T>(q), Rows<const T>(k), Rows<const T>(v),
                      Rows<const T>(out), lse.data<T>(), probs.defined() ? probs.data<T>() : nullptr,
                      Rows<const T>(dout), Rows<T>(dq), Rows<T>(dk), Rows<T>(dv));
  });
}

}  // namespace linea::cpu::inline LINEA_ISA_NS

#include "linea/tensor/cpu/isa_end.h"
