// Fused softmax attention on the GPU: FlashAttention-2's algorithm in its simplest form (no
// tensor cores), the same maths as the CPU's tensor/cpu/cpu_attention.cpp.
//
// Everything works on 32×32 tiles: 32 query rows × 32 keys, one key (or one query) per lane, so
// every row-wise reduction of a score tile is a warp shuffle. A block has 4 warps; in each tile
// loop a warp owns 8 rows (query rows for the forward and dq, key rows for dk/dv) and keeps their
// accumulators in registers: lane l holds columns l, l + 32, l + 64, l + 96 of each row (head
// dims up to 128). Operand tiles go through shared memory:
//   - a tile read with a different row per lane is stored with row stride cols + 1, so the 32
//     lanes hit 32 different banks (float; for double the 8-byte words make it 2 passes anyway);
//   - a tile read at one address by the whole warp (a broadcast) or along a row is unpadded.
//
// Forward, one block per (batch·head, query tile): for each key tile S = scale·Q Kᵀ, then per
// row the online softmax (running max m, running sum l, accumulator rescaled by exp(m_old − m)),
// O += P V. Writes O / l and lse = m + log l.
// Backward, with P = exp(S − lse) recomputed and D = rowsum(dO ∘ O) from a small kernel first:
//   dk/dv kernel, one block per (batch·head, key tile), looping over query tiles:
//     dV += Pᵀ dO,  dK += dSᵀ Q  with dS = scale · P ∘ (dO Vᵀ − D);
//   dq kernel, one block per (batch·head, query tile), looping over key tiles:  dQ += dS K.
// Two passes recompute P twice but every output row has one owner: no atomics, deterministic.
//
// Causal masking: key j > query i is masked. Query and key tiles have the same size and start at
// multiples of 32, so a query tile needs key tiles up to and including its own, and a key tile
// needs query tiles from its own on. Key 0 is visible to every row and lives in the first key
// tile, so the running max is finite from the first tile on (no exp(−inf − (−inf)) = NaN).
//
// CudaBackend::do_attention_forward / do_attention_backward, at the end, run the kernels on
// contiguous [B·H, N, e] blocks (packed_rows.h), after Backend's shared checks and the GPU's own
// (check_attention, cuda_backend.h). The backward is three launches: D = rowsum(dO ∘ O), then
// dK/dV and dQ in two separate passes (deterministic, no atomics).
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <type_traits>

#include "linea/cuda/cuda_backend.h"
#include "linea/cuda/packed_rows.h"

namespace linea::cuda {

// ---- the launchers (defined after the kernels) ----
// Every matrix is contiguous, [BH, N, d] (q, k, dq, dk), [BH, N, dv] (v, out, dout, dv) or
// [BH, N] (lse, D), in one dtype (F32 or F64); d, dv <= kAttentionMaxHead. Each launcher returns
// the error of its setup call (the kernel's shared-memory size); the caller checks the launch
// itself with check_launch right after.

struct AttentionShape {
  int64_t BH, N;  // problems (batch · heads), sequence length
  int d, dv;      // head dims of q/k and of v
  double scale;   // S = scale · q kᵀ
  bool causal;    // key j > query i masked
};

// out = softmax(S) v, lse = logsumexp of S's rows.
cudaError_t launch_attention_forward(DType dt, const AttentionShape& s, const void* q, const void* k, const void* v,
                                     void* out, void* lse);
// D = rowsum(dout ∘ out): one number per query row, the softmax Jacobian's correction term.
cudaError_t launch_attention_row_dot(DType dt, const AttentionShape& s, const void* out, const void* dout, void* D);
// dk = scale · dSᵀ q and dv = Pᵀ dout, one block per key tile (each owns its rows: no atomics).
cudaError_t launch_attention_dkdv(DType dt, const AttentionShape& s, const void* q, const void* k, const void* v,
                                  const void* dout, const void* lse, const void* D, void* dk, void* dv);
// dq = scale · dS k, one block per query tile: a separate pass, so dq is deterministic.
cudaError_t launch_attention_dq(DType dt, const AttentionShape& s, const void* q, const void* k, const void* v,
                                const void* dout, const void* lse, const void* D, void* dq);

namespace {

constexpr int kTile = kAttentionTile;          // query rows and keys per tile: one per lane
static_assert(kTile == 32, "the kernels give one key (or query) of a tile to each lane of a warp");
constexpr int kWarps = 4;
constexpr int kThreads = kWarps * 32;
constexpr int kRowsPerWarp = kTile / kWarps;   // rows a warp owns in a tile loop
constexpr int kColsPerLane = kAttentionMaxHead / 32;
constexpr unsigned kFullMask = 0xffffffffu;    // every block is whole warps, all lanes active

template <class T>
__device__ T warp_max(T x) {
  for (int o = 16; o > 0; o /= 2) {
    const T y = __shfl_xor_sync(kFullMask, x, o);
    x = x < y ? y : x;
  }
  return x;
}

template <class T>
__device__ T warp_sum(T x) {
  for (int o = 16; o > 0; o /= 2) x += __shfl_xor_sync(kFullMask, x, o);
  return x;
}

// Rows [r0, r0 + kTile) of a contiguous [N, cols] matrix into shared memory with row stride ld;
// rows past N become zeros (so they add nothing and never make a NaN).
template <class T>
__device__ void load_tile(T* dst, int ld, const T* src, int64_t r0, int64_t N, int cols) {
  for (int i = threadIdx.x; i < kTile * cols; i += blockDim.x) {
    const int r = i / cols, c = i % cols;
    dst[r * ld + c] = r0 + r < N ? src[(r0 + r) * cols + c] : T(0);
  }
}

// Is key `key` visible to query `row`? Out-of-range rows and keys never are.
__device__ bool visible(int64_t row, int64_t key, int64_t N, bool causal) {
  return row < N && key < N && (!causal || key <= row);
}

// out[i] = a_row · b_lane over n columns, for the warp's rows a_row = warp + kWarps·i of the
// broadcast tile a ([kTile][n], unpadded) and row `lane` of the padded tile b ([kTile][n + 1]).
template <class T>
__device__ void warp_dots(T (&out)[kRowsPerWarp], const T* a, const T* b, int n, int warp, int lane) {
#pragma unroll
  for (int i = 0; i < kRowsPerWarp; ++i) out[i] = 0;
  for (int x = 0; x < n; ++x) {
    const T bx = b[lane * (n + 1) + x];
#pragma unroll
    for (int i = 0; i < kRowsPerWarp; ++i) out[i] += a[(warp + kWarps * i) * n + x] * bx;
  }
}

// Shared memory of the kernels, in elements of T (the layouts are spelled out in each kernel).
int64_t forward_smem(int d, int dv) { return int64_t(kTile) * (d + (d + 1) + dv + kTile); }
int64_t dkdv_smem(int d, int dv) { return int64_t(kTile) * (d + dv + (d + 1) + (dv + 1) + 2 * kTile + 2); }
int64_t dq_smem(int d, int dv) { return int64_t(kTile) * (d + dv + (d + 1) + (dv + 1) + kTile); }

template <class T>
__global__ void __launch_bounds__(kThreads)
    attention_forward_kernel(const T* q, const T* k, const T* v, T* out, T* lse, int64_t N, int d, int dv, T scale,
                             bool causal) {
  extern __shared__ __align__(16) unsigned char smem[];
  T* Qs = reinterpret_cast<T*>(smem);  // [kTile][d]       rows read by the whole warp (broadcast)
  T* Ks = Qs + kTile * d;              // [kTile][d + 1]   row = lane: padded
  T* Vs = Ks + kTile * (d + 1);        // [kTile][dv]      read along a row
  T* Ps = Vs + kTile * dv;             // [kTile][kTile]   each warp writes and reads its own rows

  const int64_t tiles = (N + kTile - 1) / kTile;
  const int64_t bh = blockIdx.x / tiles, q0 = blockIdx.x % tiles * kTile;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  q += bh * N * d, k += bh * N * d, v += bh * N * dv;

  load_tile(Qs, d, q, q0, N, d);
  T m[kRowsPerWarp], l[kRowsPerWarp], acc[kRowsPerWarp][kColsPerLane];
  for (int i = 0; i < kRowsPerWarp; ++i) {
    m[i] = -std::numeric_limits<T>::infinity();
    l[i] = 0;
    for (int j = 0; j < kColsPerLane; ++j) acc[i][j] = 0;
  }
  const int64_t key_end = causal ? min(N, q0 + kTile) : N;
  for (int64_t c0 = 0; c0 < key_end; c0 += kTile) {
    __syncthreads();  // the previous K/V tile is no longer read
    load_tile(Ks, d + 1, k, c0, N, d);
    load_tile(Vs, dv, v, c0, N, dv);
    __syncthreads();  // K/V (and, on the first pass, Q) are in place

    // s[i] = q_row · k_key for the warp's rows row_i = q0 + warp + kWarps·i and key c0 + lane.
    T s[kRowsPerWarp];
    warp_dots(s, Qs, Ks, d, warp, lane);
    const int64_t key = c0 + lane;
#pragma unroll
    for (int i = 0; i < kRowsPerWarp; ++i) {
      const int r = warp + kWarps * i;
      // Rows past N compute harmless values from zero inputs; they are never written.
      const bool vis = key < N && (!causal || key <= q0 + r);
      const T si = vis ? scale * s[i] : -std::numeric_limits<T>::infinity();
      const T mx = max(m[i], warp_max(si));  // finite: see the file comment
      const T alpha = exp(m[i] - mx);        // rescales the previous tiles (0 on the first)
      const T p = vis ? exp(si - mx) : T(0);
      l[i] = l[i] * alpha + warp_sum(p);
      m[i] = mx;
#pragma unroll
      for (int j = 0; j < kColsPerLane; ++j) acc[i][j] *= alpha;
      Ps[r * kTile + lane] = p;
    }
    __syncwarp();  // the warp's P rows are complete before any lane reads them

    // acc[i][j] += Σ_c P[row_i][c] V[c][lane + 32 j]
    for (int c = 0; c < kTile; ++c) {
      T vc[kColsPerLane];
#pragma unroll
      for (int j = 0; j < kColsPerLane; ++j) vc[j] = lane + 32 * j < dv ? Vs[c * dv + lane + 32 * j] : T(0);
#pragma unroll
      for (int i = 0; i < kRowsPerWarp; ++i) {
        const T p = Ps[(warp + kWarps * i) * kTile + c];
#pragma unroll
        for (int j = 0; j < kColsPerLane; ++j) acc[i][j] += p * vc[j];
      }
    }
    __syncwarp();  // all lanes are done with P before the next tile overwrites it
  }
#pragma unroll
  for (int i = 0; i < kRowsPerWarp; ++i) {
    const int64_t row = q0 + warp + kWarps * i;
    if (row >= N) continue;
#pragma unroll
    for (int j = 0; j < kColsPerLane; ++j)
      if (lane + 32 * j < dv) out[(bh * N + row) * dv + lane + 32 * j] = acc[i][j] / l[i];
    if (lane == 0) lse[bh * N + row] = m[i] + log(l[i]);
  }
}

// D[row] = Σ_e out[row][e] · dout[row][e], one warp per row.
template <class T>
__global__ void attention_row_dot_kernel(const T* out, const T* dout, T* D, int64_t rows, int dv) {
  const int lane = threadIdx.x % 32;
  const int64_t warps = int64_t(gridDim.x) * (blockDim.x / 32);
  for (int64_t row = (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) / 32; row < rows; row += warps) {
    T acc = 0;
    for (int e = lane; e < dv; e += 32) acc += out[row * dv + e] * dout[row * dv + e];
    acc = warp_sum(acc);
    if (lane == 0) D[row] = acc;
  }
}

template <class T>
__global__ void __launch_bounds__(kThreads)
    attention_dkdv_kernel(const T* q, const T* k, const T* v, const T* dout, const T* lse, const T* D, T* dk, T* dv_out,
                          int64_t N, int d, int dv, T scale, bool causal) {
  extern __shared__ __align__(16) unsigned char smem[];
  T* Ks = reinterpret_cast<T*>(smem);  // [kTile][d]        broadcast
  T* Vs = Ks + kTile * d;              // [kTile][dv]       broadcast
  T* Qs = Vs + kTile * dv;             // [kTile][d + 1]    row = lane, then along rows: padded
  T* dOs = Qs + kTile * (d + 1);       // [kTile][dv + 1]   likewise
  T* Ps = dOs + kTile * (dv + 1);      // [kTile keys][kTile queries], each warp its own key rows
  T* dSs = Ps + kTile * kTile;         // likewise
  T* Ls = dSs + kTile * kTile;         // [kTile] lse of the query tile
  T* Ds = Ls + kTile;                  // [kTile] D of the query tile

  const int64_t tiles = (N + kTile - 1) / kTile;
  const int64_t bh = blockIdx.x / tiles, c0 = blockIdx.x % tiles * kTile;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  q += bh * N * d, k += bh * N * d, v += bh * N * dv, dout += bh * N * dv, lse += bh * N, D += bh * N;

  load_tile(Ks, d, k, c0, N, d);
  load_tile(Vs, dv, v, c0, N, dv);
  T acc_k[kRowsPerWarp][kColsPerLane], acc_v[kRowsPerWarp][kColsPerLane];
  for (int i = 0; i < kRowsPerWarp; ++i)
    for (int j = 0; j < kColsPerLane; ++j) acc_k[i][j] = acc_v[i][j] = 0;

  for (int64_t r0 = causal ? c0 : 0; r0 < N; r0 += kTile) {
    __syncthreads();  // the previous Q/dO tile is no longer read
    load_tile(Qs, d + 1, q, r0, N, d);
    load_tile(dOs, dv + 1, dout, r0, N, dv);
    if (threadIdx.x < kTile) {
      const int64_t row = r0 + threadIdx.x;
      Ls[threadIdx.x] = row < N ? lse[row] : T(0);
      Ds[threadIdx.x] = row < N ? D[row] : T(0);
    }
    __syncthreads();

    // For the warp's keys key_i = c0 + warp + kWarps·i and query row r0 + lane:
    // s[i] = q · k, dp[i] = dO · v.
    T s[kRowsPerWarp], dp[kRowsPerWarp];
    warp_dots(s, Ks, Qs, d, warp, lane);
    warp_dots(dp, Vs, dOs, dv, warp, lane);
#pragma unroll
    for (int i = 0; i < kRowsPerWarp; ++i) {
      const int c = warp + kWarps * i;
      const T p = visible(r0 + lane, c0 + c, N, causal) ? exp(scale * s[i] - Ls[lane]) : T(0);
      Ps[c * kTile + lane] = p;
      dSs[c * kTile + lane] = scale * p * (dp[i] - Ds[lane]);  // the scale of S = scale·QKᵀ folded in
    }
    __syncwarp();

    // acc_v[i][j] += Σ_r P[r][key_i] dO[r][lane + 32 j],  acc_k[i][j] += Σ_r dS[r][key_i] Q[r][lane + 32 j]
    for (int r = 0; r < kTile; ++r) {
      T g[kColsPerLane], qr[kColsPerLane];
#pragma unroll
      for (int j = 0; j < kColsPerLane; ++j) {
        const int e = lane + 32 * j;
        g[j] = e < dv ? dOs[r * (dv + 1) + e] : T(0);
        qr[j] = e < d ? Qs[r * (d + 1) + e] : T(0);
      }
#pragma unroll
      for (int i = 0; i < kRowsPerWarp; ++i) {
        const int c = warp + kWarps * i;
        const T p = Ps[c * kTile + r], ds = dSs[c * kTile + r];
#pragma unroll
        for (int j = 0; j < kColsPerLane; ++j) {
          acc_v[i][j] += p * g[j];
          acc_k[i][j] += ds * qr[j];
        }
      }
    }
    __syncwarp();
  }
#pragma unroll
  for (int i = 0; i < kRowsPerWarp; ++i) {
    const int64_t key = c0 + warp + kWarps * i;
    if (key >= N) continue;
#pragma unroll
    for (int j = 0; j < kColsPerLane; ++j) {
      const int e = lane + 32 * j;
      if (e < d) dk[(bh * N + key) * d + e] = acc_k[i][j];
      if (e < dv) dv_out[(bh * N + key) * dv + e] = acc_v[i][j];
    }
  }
}

template <class T>
__global__ void __launch_bounds__(kThreads)
    attention_dq_kernel(const T* q, const T* k, const T* v, const T* dout, const T* lse, const T* D, T* dq, int64_t N,
                        int d, int dv, T scale, bool causal) {
  extern __shared__ __align__(16) unsigned char smem[];
  T* Qs = reinterpret_cast<T*>(smem);  // [kTile][d]        broadcast
  T* dOs = Qs + kTile * d;             // [kTile][dv]       broadcast
  T* Ks = dOs + kTile * dv;            // [kTile][d + 1]    row = lane, then along rows: padded
  T* Vs = Ks + kTile * (d + 1);        // [kTile][dv + 1]   row = lane: padded
  T* dSs = Vs + kTile * (dv + 1);      // [kTile queries][kTile keys], each warp its own rows

  const int64_t tiles = (N + kTile - 1) / kTile;
  const int64_t bh = blockIdx.x / tiles, q0 = blockIdx.x % tiles * kTile;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  q += bh * N * d, k += bh * N * d, v += bh * N * dv, dout += bh * N * dv, lse += bh * N, D += bh * N;

  load_tile(Qs, d, q, q0, N, d);
  load_tile(dOs, dv, dout, q0, N, dv);
  T L[kRowsPerWarp], Dr[kRowsPerWarp], acc[kRowsPerWarp][kColsPerLane];
  for (int i = 0; i < kRowsPerWarp; ++i) {
    const int64_t row = q0 + warp + kWarps * i;
    L[i] = row < N ? lse[row] : T(0);
    Dr[i] = row < N ? D[row] : T(0);
    for (int j = 0; j < kColsPerLane; ++j) acc[i][j] = 0;
  }
  const int64_t key_end = causal ? min(N, q0 + kTile) : N;
  for (int64_t c0 = 0; c0 < key_end; c0 += kTile) {
    __syncthreads();  // the previous K/V tile is no longer read
    load_tile(Ks, d + 1, k, c0, N, d);
    load_tile(Vs, dv + 1, v, c0, N, dv);
    __syncthreads();

    // For the warp's rows row_i = q0 + warp + kWarps·i and key c0 + lane: s = q · k, dp = dO · v.
    T s[kRowsPerWarp], dp[kRowsPerWarp];
    warp_dots(s, Qs, Ks, d, warp, lane);
    warp_dots(dp, dOs, Vs, dv, warp, lane);
#pragma unroll
    for (int i = 0; i < kRowsPerWarp; ++i) {
      const int r = warp + kWarps * i;
      const T p = visible(q0 + r, c0 + lane, N, causal) ? exp(scale * s[i] - L[i]) : T(0);
      dSs[r * kTile + lane] = scale * p * (dp[i] - Dr[i]);
    }
    __syncwarp();

    // acc[i][j] += Σ_c dS[row_i][c] K[c][lane + 32 j]
    for (int c = 0; c < kTile; ++c) {
      T kc[kColsPerLane];
#pragma unroll
      for (int j = 0; j < kColsPerLane; ++j) kc[j] = lane + 32 * j < d ? Ks[c * (d + 1) + lane + 32 * j] : T(0);
#pragma unroll
      for (int i = 0; i < kRowsPerWarp; ++i) {
        const T ds = dSs[(warp + kWarps * i) * kTile + c];
#pragma unroll
        for (int j = 0; j < kColsPerLane; ++j) acc[i][j] += ds * kc[j];
      }
    }
    __syncwarp();
  }
#pragma unroll
  for (int i = 0; i < kRowsPerWarp; ++i) {
    const int64_t row = q0 + warp + kWarps * i;
    if (row >= N) continue;
#pragma unroll
    for (int j = 0; j < kColsPerLane; ++j)
      if (lane + 32 * j < d) dq[(bh * N + row) * d + lane + 32 * j] = acc[i][j];
  }
}

// One block per (batch·head, tile); above 48 KiB of dynamic shared memory a kernel must opt in.
template <class Kernel>
cudaError_t prepare(Kernel kernel, int64_t smem_bytes) {
  if (smem_bytes <= 48 * 1024) return cudaSuccess;
  return cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem_bytes));
}

unsigned tile_blocks(const AttentionShape& s) { return static_cast<unsigned>(s.BH * ((s.N + kTile - 1) / kTile)); }

// Calls f with a T* caster for the dtype (F32 or F64, checked by the caller).
template <class F>
cudaError_t by_dtype(DType dt, F&& f) {
  switch (dt) {
    case DType::Float32: return f([](const void* p) { return static_cast<float*>(const_cast<void*>(p)); });
    case DType::Float64: return f([](const void* p) { return static_cast<double*>(const_cast<void*>(p)); });
    default: return cudaErrorInvalidValue;
  }
}

}  // namespace

cudaError_t launch_attention_forward(DType dt, const AttentionShape& s, const void* q, const void* k, const void* v,
                                     void* out, void* lse) {
  return by_dtype(dt, [&](auto as) {
    using T = std::remove_pointer_t<decltype(as(q))>;
    const int64_t bytes = forward_smem(s.d, s.dv) * int64_t(sizeof(T));
    if (cudaError_t err = prepare(attention_forward_kernel<T>, bytes); err != cudaSuccess) return err;
    attention_forward_kernel<T><<<tile_blocks(s), kThreads, bytes, stream()>>>(as(q), as(k), as(v), as(out), as(lse),
                                                                                s.N, s.d, s.dv, T(s.scale), s.causal);
    return cudaSuccess;
  });
}

cudaError_t launch_attention_row_dot(DType dt, const AttentionShape& s, const void* out, const void* dout, void* D) {
  return by_dtype(dt, [&](auto as) {
    const int64_t rows = s.BH * s.N;
    attention_row_dot_kernel<<<blocks_for(rows * 32), 256, 0, stream()>>>(as(out), as(dout), as(D), rows, s.dv);
    return cudaSuccess;
  });
}

cudaError_t launch_attention_dkdv(DType dt, const AttentionShape& s, const void* q, const void* k, const void* v,
                                  const void* dout, const void* lse, const void* D, void* dk, void* dv) {
  return by_dtype(dt, [&](auto as) {
    using T = std::remove_pointer_t<decltype(as(q))>;
    const int64_t bytes = dkdv_smem(s.d, s.dv) * int64_t(sizeof(T));
    if (cudaError_t err = prepare(attention_dkdv_kernel<T>, bytes); err != cudaSuccess) return err;
    attention_dkdv_kernel<T><<<tile_blocks(s), kThreads, bytes, stream()>>>(
        as(q), as(k), as(v), as(dout), as(lse), as(D), as(dk), as(dv), s.N, s.d, s.dv, T(s.scale), s.causal);
    return cudaSuccess;
  });
}

cudaError_t launch_attention_dq(DType dt, const AttentionShape& s, const void* q, const void* k, const void* v,
                                const void* dout, const void* lse, const void* D, void* dq) {
  return by_dtype(dt, [&](auto as) {
    using T = std::remove_pointer_t<decltype(as(q))>;
    const int64_t bytes = dq_smem(s.d, s.dv) * int64_t(sizeof(T));
    if (cudaError_t err = prepare(attention_dq_kernel<T>, bytes); err != cudaSuccess) return err;
    attention_dq_kernel<T><<<tile_blocks(s), kThreads, bytes, stream()>>>(
        as(q), as(k), as(v), as(dout), as(lse), as(D), as(dq), s.N, s.d, s.dv, T(s.scale), s.causal);
    return cudaSuccess;
  });
}

namespace {

AttentionShape shape(const Tensor& q, const Tensor& v, double scale, bool causal) {
  return {q.size(0) * q.size(1), q.size(2), static_cast<int>(q.size(3)), static_cast<int>(v.size(3)), scale, causal};
}

}  // namespace

void CudaBackend::do_attention_forward(const Tensor& q, const Tensor& k, const Tensor& v, double scale, bool causal,
                                       const Tensor& out, const Tensor& lse, const Tensor& probs) {
  check_attention("attention_forward", q, v, {&q, &k, &v, &lse, &out});
  if (lse.numel() == 0) return;  // no rows: an empty grid is not a valid launch
  const Tensor qc = packed(*this, q), kc = packed(*this, k), vc = packed(*this, v), oc = packed_out(out);
  LINEA_CUDA_CHECK(launch_attention_forward(q.dtype(), shape(q, v, scale, causal), qc.data_ptr(), kc.data_ptr(),
                                            vc.data_ptr(), oc.data_ptr(), lse.data_ptr()));
  check_launch("attention_forward");
  unpack(*this, oc, out);
}

void CudaBackend::do_attention_backward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out,
                                        const Tensor& lse, const Tensor& probs, const Tensor& dout, double scale,
                                        bool causal, const Tensor& dq, const Tensor& dk, const Tensor& dv) {
  check_attention("attention_backward", q, v, {&q, &k, &v, &lse, &dq, &dk, &out, &dout, &dv});
  if (lse.numel() == 0) return;
  const AttentionShape s = shape(q, v, scale, causal);
  const DType t = q.dtype();
  const Tensor qc = packed(*this, q), kc = packed(*this, k), vc = packed(*this, v);
  const Tensor oc = packed(*this, out), gc = packed(*this, dout);
  const Tensor dqc = packed_out(dq), dkc = packed_out(dk), dvc = packed_out(dv);
  Tensor D = empty(lse.shape(), lse.dtype(), lse.device());
  LINEA_CUDA_CHECK(launch_attention_row_dot(t, s, oc.data_ptr(), gc.data_ptr(), D.data_ptr()));
  check_launch("attention_row_dot");
  LINEA_CUDA_CHECK(launch_attention_dkdv(t, s, qc.data_ptr(), kc.data_ptr(), vc.data_ptr(), gc.data_ptr(),
                                         lse.data_ptr(), D.data_ptr(), dkc.data_ptr(), dvc.data_ptr()));
  check_launch("attention_dkdv");
  LINEA_CUDA_CHECK(launch_attention_dq(t, s, qc.data_ptr(), kc.data_ptr(), vc.data_ptr(), gc.data_ptr(),
                                       lse.data_ptr(), D.data_ptr(), dqc.data_ptr()));
  check_launch("attention_dq");
  unpack(*this, dqc, dq);
  unpack(*this, dkc, dk);
  unpack(*this, dvc, dv);
}

}  // namespace linea::cuda
