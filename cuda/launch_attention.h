// Launchers of the fused softmax attention kernels (attention.cu), called by
// cuda_attention.cpp.
//
// Every matrix is contiguous, [BH, N, d] (q, k, dq, dk), [BH, N, dv] (v, out, dout, dv) or
// [BH, N] (lse, D), in one dtype (F32 or F64); d, dv <= kAttentionMaxHead. Each launcher returns
// the error of its setup call (the kernel's shared-memory size); the caller checks the launch
// itself with check_launch right after.
#pragma once
#include <cstdint>

#include "linea/cuda/cuda_backend.h"

namespace linea::cuda {

inline constexpr int kAttentionMaxHead = 128;  // largest d and dv
inline constexpr int kAttentionTile = 32;      // query rows / keys per tile; one block per (problem, tile)

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

}  // namespace linea::cuda
