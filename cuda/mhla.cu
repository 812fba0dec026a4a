// Fused MHLA kernels (docs/mhla.md, "Fused CUDA kernels"). The simple, obviously-correct version:
// every kernel works on one (pair, block) at a time and stages tiles of kTile tokens in shared
// memory, with φ applied as tokens are loaded and the ones column of V' = [V | 1] never stored.
// Tokens past N are never loaded, which is exactly the zero padding of the last block.
//
// Thread ownership: within a block, element i of a shared result tile is always handled by thread
// i % blockDim (the same strided loop everywhere), so a thread that accumulates into an element
// in several passes is its only writer; __syncthreads() separates loading a tile from reading it
// and reading it from overwriting it.
//
// CudaBackend::do_mhla_forward / do_mhla_backward, at the end, order these kernels, after
// Backend's shared checks and the GPU's own (check_mhla, cuda_backend.h). The products BETWEEN
// blocks — the mixing W S', its transpose and dW — are batched cuBLAS GEMMs through do_gemm with
// W broadcast over the pairs, and dW's sum over pairs is do_reduce: per-pair partials, no atomics,
// so dmix is deterministic. docs/mhla.md, "Fused CUDA kernels", has the maths in order.
#include <algorithm>
#include <cstdint>
#include <cuda_runtime.h>

#include "linea/cuda/cuda_backend.h"
#include "linea/cuda/packed_rows.h"

namespace linea::cuda {

// ---- the launchers (defined after the kernels) ----
// All token tensors are contiguous [BH, N, e] (BH = B·H pairs), per-block matrices are contiguous
// [BH, M, rows, cols], M = ceil(N / L) blocks of L tokens (the last one may be shorter: its
// missing tokens are never read, which is the zero padding of docs/mhla.md). `fm` is the feature
// map (tensor/ops.h), applied as tokens are loaded; FeatureMap::Identity loads them as they are.

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

namespace {

constexpr int kThreads = 256;
constexpr int kTile = kMhlaTile;  // tokens per shared-memory tile
constexpr int kPer = 8;    // summary outputs per thread (held in registers)

template <class T>
__device__ T phi(T x, FeatureMap fm, T eps) {
  switch (fm) {
    case FeatureMap::ReluEps: return op_math::relu(x) + eps;
    case FeatureMap::Elu1: return x > T(0) ? x + T(1) : exp(x);  // exp(NaN) is NaN
    case FeatureMap::Relu: return op_math::relu(x);
    case FeatureMap::Identity: break;
  }
  return x;
}

template <class T>
__device__ T phi_grad(T x, FeatureMap fm) {
  switch (fm) {
    case FeatureMap::ReluEps:
    case FeatureMap::Relu: return x > T(0) ? T(1) : T(0);
    case FeatureMap::Elu1: return x > T(0) ? T(1) : exp(x);
    case FeatureMap::Identity: break;
  }
  return T(1);
}

// Tokens in the next tile when `left` tokens remain (0 when none).
__device__ inline int tile_rows(int64_t left) { return left <= 0 ? 0 : left < kTile ? static_cast<int>(left) : kTile; }

// The device view of MhlaOperand (above): element (t, c) of pair bh.
template <class T>
struct Operand {
  const T* x;
  int w, cols;
  FeatureMap fm;
  T eps;
  const T* rdiv;
  const T* extra;
  __device__ T operator()(int64_t bh, int64_t N, int64_t t, int c) const {
    const int64_t row = bh * N + t;
    if (c >= w) return extra ? extra[row] : T(1);
    T v = x[row * w + c];
    v = phi(v, fm, eps);
    if (rdiv) v /= rdiv[row];
    return v;
  }
};

template <class T>
Operand<T> device_operand(const MhlaOperand& o) {
  return {static_cast<const T*>(o.x), o.w, o.cols, o.fm, static_cast<T>(o.eps), static_cast<const T*>(o.rdiv),
          static_cast<const T*>(o.extra)};
}

// sh[r, c] = op(t0 + r, c) for the first `rows` rows of a [kTile, cols] shared tile.
template <class T, class F>
__device__ void load_rows(T* sh, int rows, int cols, int64_t t0, const F& op) {
  for (int i = threadIdx.x; i < rows * cols; i += blockDim.x) sh[i] = op(t0 + i / cols, i % cols);
}

// Shared memory over 48 KiB must be asked for per kernel; a failure here shows up in the
// caller's check_launch.
template <class K>
void allow_smem(K kernel, size_t bytes) {
  if (bytes > 48 * 1024) cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)bytes);
}

// ---- block summaries: out[bh, j] = Σ_{t in block j} X(t)ᵀ Y(t) ----
// grid.x = BH·M (one pair and block), grid.y slices the X.cols × Y.cols outputs, kPer per thread.
template <class T>
__global__ void summaries_kernel(Operand<T> xa, Operand<T> ya, T* out, int64_t N, int64_t L, int64_t M) {
  extern __shared__ __align__(16) unsigned char smem[];
  T* xs = reinterpret_cast<T*>(smem);  // [kTile, xa.cols]
  T* ys = xs + kTile * xa.cols;        // [kTile, ya.cols]
  const int64_t bh = blockIdx.x / M, j = blockIdx.x % M;
  const int nout = xa.cols * ya.cols, base = blockIdx.y * kThreads * kPer;
  const int64_t t_begin = j * L, t_end = min(t_begin + L, N);
  T acc[kPer];
#pragma unroll
  for (int r = 0; r < kPer; ++r) acc[r] = T(0);
  for (int64_t t0 = t_begin; t0 < t_end; t0 += kTile) {
    const int rows = tile_rows(t_end - t0);
    __syncthreads();  // the previous tile has been read by everyone
    load_rows(xs, rows, xa.cols, t0, [&](int64_t t, int c) { return xa(bh, N, t, c); });
    load_rows(ys, rows, ya.cols, t0, [&](int64_t t, int c) { return ya(bh, N, t, c); });
    __syncthreads();
#pragma unroll
    for (int r = 0; r < kPer; ++r) {
      const int e = base + r * kThreads + threadIdx.x;
      if (e < nout) {
        const int a = e / ya.cols, c = e % ya.cols;
        T s = T(0);
        for (int tt = 0; tt < rows; ++tt) s += xs[tt * xa.cols + a] * ys[tt * ya.cols + c];
        acc[r] += s;
      }
    }
  }
#pragma unroll
  for (int r = 0; r < kPer; ++r) {
    const int e = base + r * kThreads + threadIdx.x;
    if (e < nout) out[static_cast<int64_t>(blockIdx.x) * nout + e] = acc[r];
  }
}

// ---- per-token products with a per-block matrix: Y(t) = X(t) Z_j, then an epilogue ----
// grid.x = BH·M·tiles (one tile of kTile tokens of one block).
template <class T>
__global__ void apply_kernel(Operand<T> xa, const T* z, int64_t zblock, int64_t zr, int64_t zc, int ncols,
                             MhlaEpilogue epi, T* out, T* r, const T* aux, FeatureMap fm, T eps, int64_t N, int64_t L,
                             int64_t M, int64_t tiles) {
  extern __shared__ __align__(16) unsigned char smem[];
  T* xs = reinterpret_cast<T*>(smem);  // [kTile, xa.cols]
  T* ys = xs + kTile * xa.cols;        // [kTile, ncols]
  const int64_t tile = blockIdx.x % tiles, j = (blockIdx.x / tiles) % M, bh = blockIdx.x / tiles / M;
  const int64_t t0 = j * L + tile * kTile, t_end = min(j * L + L, N);
  if (t0 >= t_end) return;  // a tile past a short last block (uniform over the block)
  const int rows = tile_rows(t_end - t0);
  load_rows(xs, rows, xa.cols, t0, [&](int64_t t, int c) { return xa(bh, N, t, c); });
  __syncthreads();
  const T* zj = z + (bh * M + j) * zblock;
  for (int i = threadIdx.x; i < rows * ncols; i += blockDim.x) {
    const int tt = i / ncols, c = i % ncols;
    T s = T(0);
    for (int k = 0; k < xa.cols; ++k) s += xs[tt * xa.cols + k] * zj[k * zr + c * zc];
    ys[i] = s;
  }
  __syncthreads();  // Normalise reads another thread's element (the row's last column)
  for (int i = threadIdx.x; i < rows * ncols; i += blockDim.x) {
    const int tt = i / ncols, c = i % ncols;
    const int64_t row = bh * N + t0 + tt;
    const T* y = ys + tt * ncols;
    switch (epi) {
      case MhlaEpilogue::Normalise: {
        const T den = y[ncols - 1] + eps;
        if (c < ncols - 1) out[row * (ncols - 1) + c] = y[c] / den;
        else r[row] = den;
        break;
      }
      case MhlaEpilogue::PhiGrad: out[row * ncols + c] = y[c] * phi_grad(aux[row * ncols + c], fm); break;
      case MhlaEpilogue::Store: out[row * ncols + c] = y[c]; break;
    }
  }
}

template <class T>
__global__ void delta_kernel(const T* g, const T* o, const T* r, T* delta, int64_t rows, int dv) {
  for (int64_t row = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; row < rows; row += (int64_t)gridDim.x * blockDim.x) {
    T s = T(0);
    for (int c = 0; c < dv; ++c) s += g[row * dv + c] * o[row * dv + c];
    delta[row] = -s / r[row];
  }
}

template <class T>
__global__ void strict_lower_kernel(const T* w, T* mixer, int64_t M, T scale) {
  for (int64_t e = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; e < M * M; e += (int64_t)gridDim.x * blockDim.x)
    mixer[e] = (e % M) < (e / M) ? scale * w[e] : T(0);
}

// ---- causal chunks (spec §3, §5.3). One kernel block = one tile of kTile tokens of chunk i of
// pair bh; the intra-chunk C×C part is walked in kTile × kTile score tiles, masked u ≤ t. ----
struct Chunk {
  int64_t bh, i, t0, t_end, c0;  // c0: the chunk's first token
  int rows;
};
__device__ inline Chunk chunk_of(int64_t N, int64_t C, int64_t M, int64_t tiles) {
  Chunk k;
  const int64_t tile = blockIdx.x % tiles;
  k.i = (blockIdx.x / tiles) % M;
  k.bh = blockIdx.x / tiles / M;
  k.c0 = k.i * C;
  k.t0 = k.c0 + tile * kTile;
  k.t_end = min(k.c0 + C, N);
  k.rows = tile_rows(k.t_end - k.t0);
  return k;
}

// s[a, b] = Σ_e x[a, e] · y[b, e] for a < ra, b < rb (row-major tiles with `e` columns), zero
// where `masked(a, b)`.
template <class T, class Mask>
__device__ void tile_dots(T* s, const T* x, int ra, const T* y, int rb, int e, const Mask& masked) {
  for (int i = threadIdx.x; i < ra * kTile; i += blockDim.x) {
    const int a = i / kTile, b = i % kTile;
    T acc = T(0);
    if (b < rb && !masked(a, b))
      for (int c = 0; c < e; ++c) acc += x[a * e + c] * y[b * e + c];
    s[i] = acc;
  }
}

// y[a, c] (+)= f · Σ_b s[a, b] · x[b, c] for a < ra, c < e, b < rb (s is [., kTile]).
template <class T>
__device__ void tile_accumulate(T* y, const T* s, const T* x, int ra, int rb, int e, T f) {
  for (int i = threadIdx.x; i < ra * e; i += blockDim.x) {
    const int a = i / e, c = i % e;
    T acc = T(0);
    for (int b = 0; b < rb; ++b) acc += s[a * kTile + b] * x[b * e + c];
    y[i] += f * acc;
  }
}

// y[a, c] = Σ_k x[a, k] · m[k, c]  (m row-major [k, e], or [e, k] when transposed), a < ra, c < e.
template <class T>
__device__ void tile_times(T* y, const T* x, int ra, int kdim, const T* m, int e, bool transposed) {
  for (int i = threadIdx.x; i < ra * e; i += blockDim.x) {
    const int a = i / e, c = i % e;
    T acc = T(0);
    for (int k = 0; k < kdim; ++k) acc += x[a * kdim + k] * (transposed ? m[c * kdim + k] : m[k * e + c]);
    y[i] = acc;
  }
}

template <class T>
__global__ void causal_out_kernel(const T* q, const T* k, const T* v, const T* sp, const T* w, T scale, FeatureMap fm, T eps,
                                  T* out, int64_t N, int64_t C, int64_t M, int64_t tiles, int d, int dv) {
  extern __shared__ __align__(16) unsigned char smem[];
  T* qs = reinterpret_cast<T*>(smem);  // [kTile, d]  φ(q)
  T* ks = qs + kTile * d;              // [kTile, d]  φ(k)
  T* vs = ks + kTile * d;              // [kTile, dv]
  T* ys = vs + kTile * dv;             // [kTile, dv] output rows
  T* a = ys + kTile * dv;              // [kTile, kTile] masked scores
  const Chunk ch = chunk_of(N, C, M, tiles);
  if (ch.rows == 0) return;
  const int64_t bh = ch.bh;
  load_rows(qs, ch.rows, d, ch.t0, [&](int64_t t, int c) { return phi(q[(bh * N + t) * d + c], fm, eps); });
  __syncthreads();
  tile_times(ys, qs, ch.rows, d, sp + (bh * M + ch.i) * d * dv, dv, false);  // Q̂_i (s·P_i)
  const T wd = scale * w[ch.i * M + ch.i];
  for (int64_t u0 = ch.c0; u0 < ch.t0 + ch.rows; u0 += kTile) {  // keys up to the tile's last query
    const int urows = tile_rows(ch.t_end - u0);
    __syncthreads();
    load_rows(ks, urows, d, u0, [&](int64_t t, int c) { return phi(k[(bh * N + t) * d + c], fm, eps); });
    load_rows(vs, urows, dv, u0, [&](int64_t t, int c) { return v[(bh * N + t) * dv + c]; });
    __syncthreads();
    tile_dots(a, qs, ch.rows, ks, urows, d, [&](int tt, int uu) { return u0 + uu > ch.t0 + tt; });
    __syncthreads();
    tile_accumulate(ys, a, vs, ch.rows, urows, dv, wd);
  }
  for (int i = threadIdx.x; i < ch.rows * dv; i += blockDim.x) out[(bh * N + ch.t0) * dv + i] = ys[i];
}

template <class T>
__global__ void causal_dq_kernel(const T* q, const T* k, const T* v, const T* g, const T* sp, const T* w, T scale,
                                 FeatureMap fm, T eps, T* dq, T* dwd, int64_t N, int64_t C, int64_t M, int64_t tiles, int d,
                                 int dv) {
  extern __shared__ __align__(16) unsigned char smem[];
  T* qs = reinterpret_cast<T*>(smem);  // [kTile, d]  φ(q)
  T* ks = qs + kTile * d;              // [kTile, d]  φ(k)
  T* ys = ks + kTile * d;              // [kTile, d]  dφ(q)
  T* gs = ys + kTile * d;              // [kTile, dv]
  T* vs = gs + kTile * dv;             // [kTile, dv]
  T* gv = vs + kTile * dv;             // [kTile, kTile] g_t·v_u, masked
  T* qk = gv + kTile * kTile;          // [kTile, kTile] q̂_t·k̂_u, masked
  T* dw = qk + kTile * kTile;          // [kTile] Σ_u gv·qk per query
  const Chunk ch = chunk_of(N, C, M, tiles);
  if (ch.rows == 0) return;
  const int64_t bh = ch.bh;
  load_rows(qs, ch.rows, d, ch.t0, [&](int64_t t, int c) { return phi(q[(bh * N + t) * d + c], fm, eps); });
  load_rows(gs, ch.rows, dv, ch.t0, [&](int64_t t, int c) { return g[(bh * N + t) * dv + c]; });
  if (threadIdx.x < kTile) dw[threadIdx.x] = T(0);
  __syncthreads();
  tile_times(ys, gs, ch.rows, dv, sp + (bh * M + ch.i) * d * dv, d, true);  // G (s·P_i)ᵀ
  const T wd = scale * w[ch.i * M + ch.i];
  auto above = [&](int64_t u0) { return [=](int tt, int uu) { return u0 + uu > ch.t0 + tt; }; };
  for (int64_t u0 = ch.c0; u0 < ch.t0 + ch.rows; u0 += kTile) {
    const int urows = tile_rows(ch.t_end - u0);
    __syncthreads();
    load_rows(ks, urows, d, u0, [&](int64_t t, int c) { return phi(k[(bh * N + t) * d + c], fm, eps); });
    load_rows(vs, urows, dv, u0, [&](int64_t t, int c) { return v[(bh * N + t) * dv + c]; });
    __syncthreads();
    tile_dots(gv, gs, ch.rows, vs, urows, dv, above(u0));
    tile_dots(qk, qs, ch.rows, ks, urows, d, above(u0));
    __syncthreads();
    tile_accumulate(ys, gv, ks, ch.rows, urows, d, wd);  // + s·W_ii tril(G Vᵀ) K̂
    if (threadIdx.x < ch.rows)
      for (int uu = 0; uu < urows; ++uu) dw[threadIdx.x] += gv[threadIdx.x * kTile + uu] * qk[threadIdx.x * kTile + uu];
  }
  for (int i = threadIdx.x; i < ch.rows * d; i += blockDim.x) {
    const int64_t e = (bh * N + ch.t0) * d + i;
    dq[e] = ys[i] * phi_grad(q[e], fm);
  }
  if (threadIdx.x < ch.rows) dwd[bh * N + ch.t0 + threadIdx.x] = dw[threadIdx.x];
}

template <class T>
__global__ void causal_dkv_kernel(const T* q, const T* k, const T* v, const T* g, const T* ds, const T* w, T scale,
                                  FeatureMap fm, T eps, T* dk, T* dvo, int64_t N, int64_t C, int64_t M, int64_t tiles, int d,
                                  int dv) {
  extern __shared__ __align__(16) unsigned char smem[];
  T* ks = reinterpret_cast<T*>(smem);  // [kTile, d]  φ(k) of this tile's keys
  T* qs = ks + kTile * d;              // [kTile, d]  φ(q) of later queries
  T* yk = qs + kTile * d;              // [kTile, d]  dφ(k)
  T* vs = yk + kTile * d;              // [kTile, dv]
  T* gs = vs + kTile * dv;             // [kTile, dv]
  T* yv = gs + kTile * dv;             // [kTile, dv] dv
  T* gv = yv + kTile * dv;             // [kTile, kTile] g_t·v_u, masked (rows: keys)
  T* qk = gv + kTile * kTile;          // [kTile, kTile] q̂_t·k̂_u, masked
  const Chunk ch = chunk_of(N, C, M, tiles);  // here t0.. are this tile's keys
  if (ch.rows == 0) return;
  const int64_t bh = ch.bh;
  load_rows(ks, ch.rows, d, ch.t0, [&](int64_t t, int c) { return phi(k[(bh * N + t) * d + c], fm, eps); });
  load_rows(vs, ch.rows, dv, ch.t0, [&](int64_t t, int c) { return v[(bh * N + t) * dv + c]; });
  __syncthreads();
  const T* dsj = ds + (bh * M + ch.i) * d * dv;
  tile_times(yk, vs, ch.rows, dv, dsj, d, true);   // V dS_jᵀ
  tile_times(yv, ks, ch.rows, d, dsj, dv, false);  // K̂ dS_j
  const T wd = scale * w[ch.i * M + ch.i];
  for (int64_t s0 = ch.t0; s0 < ch.t_end; s0 += kTile) {  // queries from the tile's first key on
    const int srows = tile_rows(ch.t_end - s0);
    auto before = [&](int uu, int tt) { return s0 + tt < ch.t0 + uu; };  // query earlier than key: masked
    __syncthreads();
    load_rows(qs, srows, d, s0, [&](int64_t t, int c) { return phi(q[(bh * N + t) * d + c], fm, eps); });
    load_rows(gs, srows, dv, s0, [&](int64_t t, int c) { return g[(bh * N + t) * dv + c]; });
    __syncthreads();
    tile_dots(gv, vs, ch.rows, gs, srows, dv, before);
    tile_dots(qk, ks, ch.rows, qs, srows, d, before);
    __syncthreads();
    tile_accumulate(yk, gv, qs, ch.rows, srows, d, wd);   // + s·W_jj tril(G Vᵀ)ᵀ Q̂
    tile_accumulate(yv, qk, gs, ch.rows, srows, dv, wd);  // + s·W_jj tril(Q̂ K̂ᵀ)ᵀ G
  }
  for (int i = threadIdx.x; i < ch.rows * d; i += blockDim.x) {
    const int64_t e = (bh * N + ch.t0) * d + i;
    dk[e] = yk[i] * phi_grad(k[e], fm);
  }
  for (int i = threadIdx.x; i < ch.rows * dv; i += blockDim.x) dvo[(bh * N + ch.t0) * dv + i] = yv[i];
}

template <class T>
__global__ void causal_dmix_kernel(const T* raw, const T* dwd, T* dmix, int64_t M, int64_t BH, int64_t N, int64_t C,
                                   T scale) {
  for (int64_t e = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; e < M * M; e += (int64_t)gridDim.x * blockDim.x) {
    const int64_t i = e / M, j = e % M;
    T val = T(0);
    if (j < i) {
      val = scale * raw[e];
    } else if (j == i) {  // a fixed order over (bh, t): deterministic
      const int64_t t_end = min((i + 1) * C, N);
      for (int64_t bh = 0; bh < BH; ++bh)
        for (int64_t t = i * C; t < t_end; ++t) val += dwd[bh * N + t];
      val *= scale;
    }
    dmix[e] = val;
  }
}

int64_t blocks_of(int64_t N, int64_t L) { return (N + L - 1) / L; }
// Tiles per block: a block never holds more than N tokens (block_len may exceed N), and the
// grid must not be sized by L alone (empty tiles, or a grid past gridDim.x's limit).
int64_t tiles_of(int64_t N, int64_t L) { return (std::min(L, N) + kTile - 1) / kTile; }

template <class T>
void summaries(const MhlaOperand& x, const MhlaOperand& y, void* out, int64_t BH, int64_t N, int64_t L) {
  const int64_t M = blocks_of(N, L);
  const int nout = x.cols * y.cols;
  dim3 grid(static_cast<unsigned>(BH * M), static_cast<unsigned>((nout + kThreads * kPer - 1) / (kThreads * kPer)));
  const size_t smem = sizeof(T) * kTile * (x.cols + y.cols);
  allow_smem(summaries_kernel<T>, smem);
  summaries_kernel<T><<<grid, kThreads, smem, stream()>>>(device_operand<T>(x), device_operand<T>(y),
                                                          static_cast<T*>(out), N, L, M);
}

template <class T>
void apply(const MhlaOperand& x, const void* z, int64_t zblock, int64_t zr, int64_t zc, int ncols, MhlaEpilogue epi,
           void* out, void* r, const void* aux, FeatureMap fm, double eps, int64_t BH, int64_t N, int64_t L) {
  const int64_t M = blocks_of(N, L), tiles = tiles_of(N, L);
  const size_t smem = sizeof(T) * kTile * (x.cols + ncols);
  allow_smem(apply_kernel<T>, smem);
  apply_kernel<T><<<static_cast<unsigned>(BH * M * tiles), kThreads, smem, stream()>>>(
      device_operand<T>(x), static_cast<const T*>(z), zblock, zr, zc, ncols, epi, static_cast<T*>(out),
      static_cast<T*>(r), static_cast<const T*>(aux), fm, static_cast<T>(eps), N, L, M, tiles);
}

template <class T>
void causal_out(const void* q, const void* k, const void* v, const void* sp, const void* w, double scale, FeatureMap fm,
                double eps, void* out, int64_t BH, int64_t N, int64_t C, int d, int dv) {
  const int64_t M = blocks_of(N, C), tiles = tiles_of(N, C);
  const size_t smem = sizeof(T) * kTile * (2 * d + 2 * dv + kTile);
  allow_smem(causal_out_kernel<T>, smem);
  causal_out_kernel<T><<<static_cast<unsigned>(BH * M * tiles), kThreads, smem, stream()>>>(
      static_cast<const T*>(q), static_cast<const T*>(k), static_cast<const T*>(v), static_cast<const T*>(sp),
      static_cast<const T*>(w), static_cast<T>(scale), fm, static_cast<T>(eps), static_cast<T*>(out), N, C, M, tiles,
      d, dv);
}

template <class T>
void causal_dq(const void* q, const void* k, const void* v, const void* g, const void* sp, const void* w, double scale,
               FeatureMap fm, double eps, void* dq, void* dwd, int64_t BH, int64_t N, int64_t C, int d, int dv) {
  const int64_t M = blocks_of(N, C), tiles = tiles_of(N, C);
  const size_t smem = sizeof(T) * (kTile * (3 * d + 2 * dv + 2 * kTile) + kTile);
  allow_smem(causal_dq_kernel<T>, smem);
  causal_dq_kernel<T><<<static_cast<unsigned>(BH * M * tiles), kThreads, smem, stream()>>>(
      static_cast<const T*>(q), static_cast<const T*>(k), static_cast<const T*>(v), static_cast<const T*>(g),
      static_cast<const T*>(sp), static_cast<const T*>(w), static_cast<T>(scale), fm, static_cast<T>(eps),
      static_cast<T*>(dq), static_cast<T*>(dwd), N, C, M, tiles, d, dv);
}

template <class T>
void causal_dkv(const void* q, const void* k, const void* v, const void* g, const void* ds, const void* w,
                double scale, FeatureMap fm, double eps, void* dk, void* dvo, int64_t BH, int64_t N, int64_t C, int d,
                int dv) {
  const int64_t M = blocks_of(N, C), tiles = tiles_of(N, C);
  const size_t smem = sizeof(T) * kTile * (3 * d + 3 * dv + 2 * kTile);
  allow_smem(causal_dkv_kernel<T>, smem);
  causal_dkv_kernel<T><<<static_cast<unsigned>(BH * M * tiles), kThreads, smem, stream()>>>(
      static_cast<const T*>(q), static_cast<const T*>(k), static_cast<const T*>(v), static_cast<const T*>(g),
      static_cast<const T*>(ds), static_cast<const T*>(w), static_cast<T>(scale), fm, static_cast<T>(eps),
      static_cast<T*>(dk), static_cast<T*>(dvo), N, C, M, tiles, d, dv);
}

}  // namespace

// The launchers: a switch on the dtype (float32 / float64; Backend::mhla_* has checked it).
#define LINEA_MHLA_DISPATCH(dt, call)    \
  do {                                   \
    if ((dt) == DType::Float64) {               \
      using T = double;                  \
      call;                              \
    } else {                             \
      using T = float;                   \
      call;                              \
    }                                    \
  } while (0)

void launch_mhla_summaries(DType dt, const MhlaOperand& x, const MhlaOperand& y, void* out, int64_t BH, int64_t N,
                           int64_t L) {
  LINEA_MHLA_DISPATCH(dt, summaries<T>(x, y, out, BH, N, L));
}

void launch_mhla_apply(DType dt, const MhlaOperand& x, const void* z, int64_t zblock, int64_t zr, int64_t zc,
                       int ncols, MhlaEpilogue epi, void* out, void* r, const void* aux, FeatureMap fm, double eps,
                       int64_t BH, int64_t N, int64_t L) {
  LINEA_MHLA_DISPATCH(dt, apply<T>(x, z, zblock, zr, zc, ncols, epi, out, r, aux, fm, eps, BH, N, L));
}

void launch_mhla_delta(DType dt, const void* g, const void* o, const void* r, void* delta, int64_t rows, int dv) {
  LINEA_MHLA_DISPATCH(dt, (delta_kernel<T><<<blocks_for(rows), 256, 0, stream()>>>(
                              static_cast<const T*>(g), static_cast<const T*>(o), static_cast<const T*>(r),
                              static_cast<T*>(delta), rows, dv)));
}

void launch_mhla_strict_lower(DType dt, const void* w, void* mixer, int64_t M, double scale) {
  LINEA_MHLA_DISPATCH(dt, (strict_lower_kernel<T><<<blocks_for(M * M), 256, 0, stream()>>>(
                              static_cast<const T*>(w), static_cast<T*>(mixer), M, static_cast<T>(scale))));
}

void launch_mhla_causal_out(DType dt, const void* q, const void* k, const void* v, const void* sp, const void* w,
                            double scale, FeatureMap fm, double eps, void* out, int64_t BH, int64_t N, int64_t C, int d,
                            int dv) {
  LINEA_MHLA_DISPATCH(dt, causal_out<T>(q, k, v, sp, w, scale, fm, eps, out, BH, N, C, d, dv));
}

void launch_mhla_causal_dq(DType dt, const void* q, const void* k, const void* v, const void* g, const void* sp,
                           const void* w, double scale, FeatureMap fm, double eps, void* dq, void* dwd, int64_t BH,
                           int64_t N, int64_t C, int d, int dv) {
  LINEA_MHLA_DISPATCH(dt, causal_dq<T>(q, k, v, g, sp, w, scale, fm, eps, dq, dwd, BH, N, C, d, dv));
}

void launch_mhla_causal_dkv(DType dt, const void* q, const void* k, const void* v, const void* g, const void* ds,
                            const void* w, double scale, FeatureMap fm, double eps, void* dk, void* dv_out, int64_t BH,
                            int64_t N, int64_t C, int d, int dv) {
  LINEA_MHLA_DISPATCH(dt, causal_dkv<T>(q, k, v, g, ds, w, scale, fm, eps, dk, dv_out, BH, N, C, d, dv));
}

void launch_mhla_causal_dmix(DType dt, const void* raw, const void* dwd, void* dmix, int64_t M, int64_t BH, int64_t N,
                             int64_t C, double scale) {
  LINEA_MHLA_DISPATCH(dt, (causal_dmix_kernel<T><<<blocks_for(M * M), 256, 0, stream()>>>(
                              static_cast<const T*>(raw), static_cast<const T*>(dwd), static_cast<T*>(dmix), M, BH,
                              N, C, static_cast<T>(scale))));
}

#undef LINEA_MHLA_DISPATCH

namespace {

using Dims = Backend::MHLADims;

Tensor scratch(Shape shape, const Tensor& like) { return empty(std::move(shape), like.dtype(), like.device()); }

// Y[bh] = W X[bh] for every pair, one strided-batched GEMM; x, y are [BH, M, F] views of
// contiguous per-block summaries, w is [M, M] (any strides: a transpose is passed to cuBLAS).
void mix_blocks(CudaBackend& be, const Tensor& w, const Tensor& x, const Tensor& y) {
  be.do_gemm(w.unsqueeze(0).expand({x.size(0), -1, -1}), x, y, Tensor(), Tensor());
}

// Σ_pairs X[bh] Y[bh]ᵀ -> out [M, M]: per-pair GEMMs, then a sum over the pairs.
void pair_gram(CudaBackend& be, const Tensor& x, const Tensor& y, const Tensor& out) {
  const int64_t BH = x.size(0), M = x.size(1);
  Tensor partial = scratch({BH, M, M}, x);
  be.do_gemm(x, y.transpose(1, 2), partial, Tensor(), Tensor());
  be.do_reduce(ReduceOp::Sum, partial, out.view({1, M * M}), 1, BH, M * M);
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

void CudaBackend::do_mhla_forward(const Tensor& q_rows, const Tensor& k_rows, const Tensor& v_rows, const Tensor& mix,
                                  const MHLAArgs& a, const Tensor& out_rows, const Tensor& s, const Tensor& sh,
                                  const Tensor& r) {
  const Dims g = Dims::of(q_rows, v_rows, a);
  check_mhla("mhla_forward", q_rows, g, a);
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

void CudaBackend::do_mhla_backward(const Tensor& q_rows, const Tensor& k_rows, const Tensor& v_rows, const Tensor& mix,
                                   const MHLAArgs& a, const Tensor& out_rows, const Tensor& s, const Tensor& sh,
                                   const Tensor& r, const Tensor& grad_rows, const Tensor& dq_rows,
                                   const Tensor& dk_rows, const Tensor& dv_rows, const Tensor& dmix) {
  const char* op = "mhla_backward";
  const Dims g = Dims::of(q_rows, v_rows, a);
  check_mhla(op, q_rows, g, a);
  const DType t = q_rows.dtype();
  for (const Tensor* x : {&out_rows, &s, &sh, &grad_rows, &dq_rows, &dk_rows, &dv_rows, &dmix}) arg(*x, op);
  if (g.BH == 0) {  // no pairs: dmix is an empty sum, and an empty grid is not a valid launch
    do_fill(dmix, 0);
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
