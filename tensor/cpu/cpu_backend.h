// The CPU implementation of the kernel interface, one copy per instruction set (isa_begin.h). Its
// methods are spread over one file per kernel family: cpu_memory.cpp (allocate/copy/fill),
// cpu_elementwise.cpp, cpu_reduce.cpp, cpu_norm.cpp, cpu_matmul.cpp (OpenBLAS), cpu_index.cpp.
#pragma once
#ifndef LINEA_ISA_NS
#error "a kernel header: include linea/tensor/cpu/isa_begin.h first"
#endif
#include "linea/tensor/backend.h"

namespace linea::cpu::inline LINEA_ISA_NS {

class CpuBackend final : public Backend {
 public:
  std::shared_ptr<Storage> allocate(std::size_t nbytes) override;
  void copy_from_host(Storage& dst, std::size_t dst_byte_offset, const void* src, std::size_t nbytes) override;
  void copy_to_host(void* dst, const Storage& src, std::size_t src_byte_offset, std::size_t nbytes) override;

  void copy(const Tensor& src, const Tensor& dst) override;
  void fill(const Tensor& dst, double value) override;
  void unary(UnaryOp op, const Tensor& x, const Tensor& out, double p0, double p1) override;
  void binary(BinaryOp op, const Tensor& a, const Tensor& b, const Tensor& out) override;
  void where(const Tensor& cond, const Tensor& a, const Tensor& b, const Tensor& out) override;
  void activation_with_grad(UnaryOp op, const Tensor& x, const Tensor& y, const Tensor& dydx) override;

  void reduce(ReduceOp op, const Tensor& x, const Tensor& out, int64_t outer, int64_t n, int64_t inner) override;
  void softmax(const Tensor& x, const Tensor& out, bool log) override;
  void softmax_backward(const Tensor& y, const Tensor& dy, const Tensor& dx, bool log) override;

  void layernorm_forward(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps, const Tensor& out,
                         const Tensor& mean, const Tensor& rstd) override;
  void layernorm_backward(const Tensor& dy, const Tensor& x, const Tensor& weight, const Tensor& mean,
                          const Tensor& rstd, const Tensor& dx, const Tensor& dweight, const Tensor& dbias) override;
  void rmsnorm_forward(const Tensor& x, const Tensor& weight, double eps, const Tensor& out,
                       const Tensor& rstd) override;
  void rmsnorm_backward(const Tensor& dy, const Tensor& x, const Tensor& weight, const Tensor& rstd,
                        const Tensor& dx, const Tensor& dweight) override;

  void gemm(const Tensor& a, const Tensor& b, const Tensor& out, const Tensor& bias, const Tensor& residual) override;
  void linear_weight_grad(const Tensor& g, const Tensor& x, const Tensor& dw, const Tensor& db) override;

  void index_select(const Tensor& x, int64_t dim, const Tensor& idx, const Tensor& out) override;
  void index_add(const Tensor& out, int64_t dim, const Tensor& idx, const Tensor& src) override;
  void gather(const Tensor& x, int64_t dim, const Tensor& idx, const Tensor& out) override;
  void scatter_add(const Tensor& out, int64_t dim, const Tensor& idx, const Tensor& src) override;

  // fused kernels for nn/ (cpu_loss.cpp, cpu_optim.cpp, cpu_random.cpp, cpu_scan.cpp)
  void cross_entropy_forward(const Tensor& x, const Tensor& target, int64_t ignore_index, double label_smoothing,
                             const Tensor& lse, const Tensor& loss, const Tensor& total) override;
  void cross_entropy_backward(const Tensor& x, const Tensor& target, const Tensor& lse, const Tensor& weight,
                              int64_t ignore_index, double label_smoothing, const Tensor& dx) override;
  void adamw_step(const std::vector<AdamWParam>& params, double beta1, double beta2, double eps) override;
  void sgd_step(const std::vector<SgdParam>& params, double momentum, bool nesterov) override;
  void sum_squares(const std::vector<Tensor>& xs, const Tensor& out) override;
  void scale_all(const std::vector<Tensor>& xs, double factor) override;
  void random_uniform(const Tensor& out, uint64_t seed, uint64_t offset) override;
  void cumsum(const Tensor& x, const Tensor& out, int64_t outer, int64_t n, int64_t inner, bool exclusive,
              bool reverse) override;

  // fused MHLA, non-causal (cpu_mhla.cpp)
  bool has_fused_mhla(bool) const override { return true; }
  bool has_fused_causal_normaliser() const override { return true; }
  void mhla_forward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& mix, const MHLAArgs& a,
                    const Tensor& out, const Tensor& s, const Tensor& sh, const Tensor& r) override;
  void mhla_backward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& mix, const MHLAArgs& a,
                     const Tensor& out, const Tensor& s, const Tensor& sh, const Tensor& r, const Tensor& grad,
                     const Tensor& dq, const Tensor& dk, const Tensor& dv, const Tensor& dmix) override;

  // fused attention (cpu_attention.cpp)
  int64_t attention_probs_size(int64_t N, DType dtype) const override;
  void attention_forward(const Tensor& q, const Tensor& k, const Tensor& v, double scale, bool causal,
                         const Tensor& out, const Tensor& lse, const Tensor& probs) override;
  void attention_backward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out, const Tensor& lse,
                          const Tensor& probs, const Tensor& dout, double scale, bool causal, const Tensor& dq,
                          const Tensor& dk, const Tensor& dv) override;
};

Backend& backend();  // this ISA's CpuBackend; cpu::instance() (backend.h) picks the one that runs

}  // namespace linea::cpu::inline LINEA_ISA_NS
