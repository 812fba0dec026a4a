// CudaBackend: LayerNorm / RMSNorm forward and backward. The checks shared with the CPU
// (tensor/kernel_checks.h), then the launchers of norm.cu.
#include "linea/cuda/cuda_backend.h"
#include "linea/cuda/launch_norm.h"
#include "linea/tensor/kernel_checks.h"

namespace linea::cuda {

namespace {

// The kernel's pointer for an optional operand: nullptr when undefined.
void* data_or_null(const Tensor& t, const char* op) { return t.defined() ? arg(t, op).data : nullptr; }

void norm_forward(const char* op, bool center, const Tensor& x, const Tensor& weight, const Tensor& bias, double eps,
                  const Tensor& out, const Tensor& mean, const Tensor& rstd, int64_t rows, int64_t n) {
  const TensorArg xa = arg(x, op);
  check_launch(launch_norm_forward(xa.dtype, center, xa.data, data_or_null(weight, op), data_or_null(bias, op), eps,
                                   arg(out, op).data, data_or_null(mean, op), arg(rstd, op).data, rows, n));
}

void norm_backward(const char* op, bool center, const Tensor& dy, const Tensor& x, const Tensor& weight,
                   const Tensor& mean, const Tensor& rstd, const Tensor& dx, const Tensor& dweight,
                   const Tensor& dbias, int64_t rows, int64_t n) {
  const TensorArg xa = arg(x, op);
  const NormParamsPlan plan = plan_norm_params(rows, n);
  // Partial column sums for dweight/dbias; freed on return, but the caching allocator reuses
  // memory in stream order, so the kernels finish with it first.
  Tensor scratch;
  if ((dweight.defined() || dbias.defined()) && plan.scratch_bytes > 0)
    scratch = empty({static_cast<int64_t>(plan.scratch_bytes)}, DType::UInt8, x.device());
  check_launch(launch_norm_backward(xa.dtype, center, arg(dy, op).data, xa.data, data_or_null(weight, op),
                                    data_or_null(mean, op), arg(rstd, op).data, arg(dx, op).data,
                                    data_or_null(dweight, op), data_or_null(dbias, op), rows, n, plan,
                                    scratch.defined() ? scratch.data_ptr() : nullptr));
}

}  // namespace

void CudaBackend::layernorm_forward(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps,
                                    const Tensor& out, const Tensor& mean, const Tensor& rstd) {
  const auto [rows, n] = kernel_checks::layernorm_forward(x, weight, bias, out, mean, rstd);
  norm_forward("layernorm_forward", true, x, weight, bias, eps, out, mean, rstd, rows, n);
}

void CudaBackend::layernorm_backward(const Tensor& dy, const Tensor& x, const Tensor& weight, const Tensor& mean,
                                     const Tensor& rstd, const Tensor& dx, const Tensor& dweight,
                                     const Tensor& dbias) {
  const auto [rows, n] = kernel_checks::layernorm_backward(dy, x, weight, mean, rstd, dx, dweight, dbias);
  norm_backward("layernorm_backward", true, dy, x, weight, mean, rstd, dx, dweight, dbias, rows, n);
}

void CudaBackend::rmsnorm_forward(const Tensor& x, const Tensor& weight, double eps, const Tensor& out,
                                  const Tensor& rstd) {
  const auto [rows, n] = kernel_checks::rmsnorm_forward(x, weight, out, rstd);
  norm_forward("rmsnorm_forward", false, x, weight, Tensor(), eps, out, Tensor(), rstd, rows, n);
}

void CudaBackend::rmsnorm_backward(const Tensor& dy, const Tensor& x, const Tensor& weight, const Tensor& rstd,
                                   const Tensor& dx, const Tensor& dweight) {
  const auto [rows, n] = kernel_checks::rmsnorm_backward(dy, x, weight, rstd, dx, dweight);
  norm_backward("rmsnorm_backward", false, dy, x, weight, Tensor(), rstd, dx, dweight, Tensor(), rows, n);
}

}  // namespace linea::cuda
