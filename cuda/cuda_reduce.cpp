// CudaBackend: reduce, softmax, softmax_backward. The checks shared with the CPU
// (tensor/kernel_checks.h), then the launchers of reduce.cu.
#include "linea/cuda/cuda_backend.h"
#include "linea/cuda/launch_reduce.h"
#include "linea/tensor/kernel_checks.h"

namespace linea::cuda {

void CudaBackend::reduce(ReduceOp op, const Tensor& x, const Tensor& out, int64_t outer, int64_t n, int64_t inner) {
  if (!kernel_checks::reduce(op, x, out, outer, n, inner)) return;
  const TensorArg xa = arg(x, "reduce"), oa = arg(out, "reduce");
  const ReducePlan plan = plan_reduce(op, xa.dtype, outer, n, inner);
  // Partial results of split rows/columns; freed here, but the caching allocator hands memory
  // back in stream order, so the kernels below finish with it first.
  Tensor scratch;
  if (plan.scratch_bytes > 0) scratch = empty({static_cast<int64_t>(plan.scratch_bytes)}, DType::UInt8, x.device());
  check_launch(launch_reduce(op, xa.dtype, xa.data, oa.data, outer, n, inner, plan,
                             scratch.defined() ? scratch.data_ptr() : nullptr));
}

void CudaBackend::softmax(const Tensor& x, const Tensor& out, bool log) {
  kernel_checks::softmax(x, out);
  if (x.numel() == 0) return;
  dispatch_floating(x.dtype(), "softmax", []<class T>() {});
  const TensorArg xa = arg(x, "softmax"), oa = arg(out, "softmax");
  const auto [rows, n] = kernel_checks::last_dim_rows(x);
  check_launch(launch_softmax(xa.dtype, xa.data, oa.data, rows, n, log));
}

void CudaBackend::softmax_backward(const Tensor& y, const Tensor& dy, const Tensor& dx, bool log) {
  kernel_checks::softmax_backward(y, dy, dx);
  if (y.numel() == 0) return;
  dispatch_floating(y.dtype(), "softmax_backward", []<class T>() {});
  const TensorArg ya = arg(y, "softmax_backward"), ga = arg(dy, "softmax_backward"), da = arg(dx, "softmax_backward");
  const auto [rows, n] = kernel_checks::last_dim_rows(y);
  check_launch(launch_softmax_backward(ya.dtype, ya.data, ga.data, da.data, rows, n, log));
}

}  // namespace linea::cuda
