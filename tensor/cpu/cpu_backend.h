// The CPU implementation of the kernel interface, one copy per instruction set (isa_begin.h). Its
// kernels (the do_ methods of backend.h) are spread over one file per kernel family:
// cpu_memory.cpp (allocate/copy/fill), cpu_elementwise.cpp, cpu_reduce.cpp, cpu_norm.cpp,
// cpu_matmul.cpp (OpenBLAS), cpu_index.cpp, cpu_loss.cpp, cpu_optim.cpp, cpu_random.cpp,
// cpu_scan.cpp, cpu_attention.cpp, cpu_mhla.cpp.
#pragma once
#ifndef LINEA_ISA_NS
#error "a kernel header: include linea/tensor/cpu/isa_begin.h first"
#endif
#include "linea/tensor/backend.h"

namespace linea::cpu::inline LINEA_ISA_NS {

class CpuBackend final : public Backend {
 public:
  CpuBackend() : Backend(DeviceType::CPU) {}
  bool has_fused_causal_normaliser() const override { return true; }
  int64_t attention_probs_size(int64_t N, DType dtype) const override;  // cpu_attention.cpp

 protected:
  LINEA_BACKEND_KERNELS(override)
  void do_activation_with_grad(UnaryOp op, const Tensor& x, const Tensor& y, const Tensor& dydx) override;
  void do_linear_weight_grad(const Tensor& g, const Tensor& x, const Tensor& dw, const Tensor& db) override;
};

Backend& backend();  // this ISA's CpuBackend; cpu::instance() (backend.h) picks the one that runs

}  // namespace linea::cpu::inline LINEA_ISA_NS
