// Launchers of cuda/fused.cu, the fused kernels for nn/: cross-entropy, the optimizer steps
// (multi-tensor apply), counter-based uniform numbers (dropout) and cumsum. cuda_fused.cpp
// validates the tensors and calls these. Element pointers are
// to element 0 of contiguous data; dt names the element type; everything runs on stream().
#pragma once
#include <cstdint>

#include "linea/cuda/cuda_backend.h"

namespace linea::cuda {

// Backend::cross_entropy_forward / _backward on x [rows, C] (dt F32 or F64). weight has
// `weight_stride` elements between rows (0: one weight for all rows).
void launch_cross_entropy_forward(DType dt, const void* x, const int64_t* target, int64_t rows, int64_t C,
                                  int64_t ignore_index, double eps, double* lse, double* loss);
void launch_cross_entropy_backward(DType dt, const void* x, const int64_t* target, const double* lse,
                                   const double* weight, int64_t weight_stride, int64_t rows, int64_t C,
                                   int64_t ignore_index, double eps, void* dx);

// ---- multi-tensor apply (optimizer steps) ----
// Each parameter is cut into chunks of kFusedChunk elements and one thread block updates one
// chunk, so a single launch covers every parameter. Block b belongs to the parameter i with the
// largest first_block <= b (a binary search over this table, which lives in device memory).
inline constexpr int64_t kFusedChunk = 16384;

struct FusedParam {
  void* param = nullptr;
  const void* grad = nullptr;
  void* buf0 = nullptr;  // AdamW: exp_avg;    SGD: momentum buffer (nullptr without momentum)
  void* buf1 = nullptr;  // AdamW: exp_avg_sq; SGD: unused
  int64_t n = 0;            // elements (> 0)
  int64_t first_block = 0;  // this parameter's first block in the launch
  double s0 = 0, s1 = 0, s2 = 0;  // AdamW: decay, step_size, sqrt_bc2; SGD: lr, weight_decay, unused;
                                  // scale_all: factor, unused, unused
  int32_t first = 0;              // SGD: the parameter's first step
};

// Blocks needed for n elements.
inline int64_t fused_blocks(int64_t n) { return (n + kFusedChunk - 1) / kFusedChunk; }

// `params` (device memory) holds `nparams` entries of one dtype dt, with first_block filled in;
// `nblocks` is the sum of fused_blocks(n) over them.
void launch_adamw_step(DType dt, const FusedParam* params, int nparams, int64_t nblocks, double beta1, double beta2,
                       double eps);
void launch_sgd_step(DType dt, const FusedParam* params, int nparams, int64_t nblocks, double momentum, bool nesterov);
// Backend::scale_all: each entry's param (n elements) times its s0.
void launch_scale_all(DType dt, const FusedParam* params, int nparams, int64_t nblocks);

// *out = Σ x_i² (square) or Σ x_i, in double, over n contiguous elements (dt F32 or F64). Two
// kernels: kSumBlocks blocks write partial sums to `partial` (device memory for that many
// doubles), one block adds them. The grid is fixed, so the order of the sum (and the result) is
// the same on every run and every GPU. Used for sum_squares and cross-entropy's total.
inline constexpr int kSumBlocks = 512;
void launch_sum(DType dt, const void* x, int64_t n, bool square, double* partial, double* out);

// out[i] = u(seed, offset + i), i < n (dt F32 or F64), tensor/counter_rng.h.
void launch_random_uniform(DType dt, void* out, int64_t n, uint64_t seed, uint64_t offset);

// Backend::cumsum over contiguous [outer, n, inner] (dt F32, F64 or I64).
void launch_cumsum(DType dt, const void* x, void* out, int64_t outer, int64_t n, int64_t inner, bool exclusive,
                   bool reverse);

}  // namespace linea::cuda
