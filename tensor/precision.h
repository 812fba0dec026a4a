// How float32 matrix products may round their operands. A process-wide switch, read by every
// gemm: the GPU's picks the cuBLAS compute type, the CPU's honours BF16 (tensor/cpu/gemm_bf16.h:
// an AVX512-BF16 kernel where the CPU has one) and multiplies TF32 in full float32 (no CPU has it).
//
//   Highest  full float32 products (the default; what the tests and gradchecks assume)
//   TF32     operands rounded to TF32 (10-bit mantissa) on tensor cores, float32 accumulation:
//            relative error ~3e-4, several times the float32 matrix rate on A100/H100
//   BF16     "bf16 autocast": operands rounded to bfloat16 (7-bit mantissa) on tensor cores or
//            AVX512-BF16, float32 accumulation; relative error ~1e-3..1e-2. Parameters, activations and
//            optimizer state stay float32 tensors: only the products inside gemm round.
// float64 products are never rounded.
#pragma once

namespace linea {

enum class MatmulPrecision { Highest, TF32, BF16 };

void set_matmul_precision(MatmulPrecision p);
MatmulPrecision matmul_precision();

// Whether this CPU has bf16 dot-product instructions (AVX512-BF16), which make BF16 faster than
// Highest on the CPU; without them BF16 rounds the same way but multiplies no faster (slower).
bool cpu_has_bf16_dot();

// Scoped switch, like torch.autocast: { AutocastGuard bf16; loss = model(x); } restores the
// previous precision on scope exit.
class AutocastGuard {
 public:
  explicit AutocastGuard(MatmulPrecision p = MatmulPrecision::BF16) : saved_(matmul_precision()) {
    set_matmul_precision(p);
  }
  ~AutocastGuard() { set_matmul_precision(saved_); }
  AutocastGuard(const AutocastGuard&) = delete;
  AutocastGuard& operator=(const AutocastGuard&) = delete;

 private:
  MatmulPrecision saved_;
};

}  // namespace linea
