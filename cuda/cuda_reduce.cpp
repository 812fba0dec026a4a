// CudaBackend: reduce, softmax, softmax_backward. The same checks and errors as
// tensor/cpu/cpu_reduce.cpp, then the launchers of reduce.cu.
#include "linea/cuda/cuda_backend.h"
#include "linea/cuda/launch_reduce.h"

namespace linea::cuda {

static_assert(static_cast<int>(ReduceOp::Sum) == static_cast<int>(Red::Sum) &&
                  static_cast<int>(ReduceOp::Max) == static_cast<int>(Red::Max) &&
                  static_cast<int>(ReduceOp::Min) == static_cast<int>(Red::Min) &&
                  static_cast<int>(ReduceOp::ArgMax) == static_cast<int>(Red::ArgMax) &&
                  static_cast<int>(ReduceOp::LogSumExp) == static_cast<int>(Red::LogSumExp),
              "launch_reduce.h's Red must list the ops in linea::ReduceOp's order");

void CudaBackend::reduce(ReduceOp op, const Tensor& x, const Tensor& out, int64_t outer, int64_t n, int64_t inner) {
  LINEA_CHECK(x.is_contiguous() && out.is_contiguous(), "[reduce] operands must be contiguous");
  LINEA_CHECK(x.numel() == outer * n * inner && out.numel() == outer * inner,
              "[reduce] x {} / out {} do not match [outer={}, n={}, inner={}]", shape_str(x.shape()),
              shape_str(out.shape()), outer, n, inner);
  LINEA_CHECK(n > 0 || op == ReduceOp::Sum || op == ReduceOp::LogSumExp,
              "[reduce] max/min/argmax over an empty dim (n = 0) has no result");
  if (outer * inner == 0) return;
  if (op == ReduceOp::LogSumExp) dispatch_floating(x.dtype(), "logsumexp", []<class T>() {});
  const DType want = op == ReduceOp::ArgMax ? DType::Int64 : x.dtype();
  LINEA_CHECK(out.dtype() == want, "[reduce] output dtype {} should be {}", out.dtype(), want);
  const TensorArg xa = arg(x, "reduce"), oa = arg(out, "reduce");
  const Red red = static_cast<Red>(op);
  const ReducePlan plan = plan_reduce(red, xa.dtype, outer, n, inner);
  // Partial results of split rows/columns; freed here, but the caching allocator hands memory
  // back in stream order, so the kernels below finish with it first.
  Tensor scratch;
  if (plan.scratch_bytes > 0) scratch = empty({static_cast<int64_t>(plan.scratch_bytes)}, DType::UInt8, x.device());
  check_launch(launch_reduce(red, xa.dtype, xa.data, oa.data, outer, n, inner, plan,
                             scratch.defined() ? scratch.data_ptr() : nullptr));
}

// n and rows of a softmax over the last dim (a 0-d tensor is one row of one element).
static std::pair<int64_t, int64_t> last_dim_rows(const Tensor& t) {
  const int64_t n = t.dim() == 0 ? 1 : t.shape().back();
  return {t.numel() / n, n};
}

void CudaBackend::softmax(const Tensor& x, const Tensor& out, bool log) {
  LINEA_CHECK(x.is_contiguous() && out.is_contiguous() && x.shape() == out.shape() && x.dtype() == out.dtype(),
              "[softmax] x {} {} and out {} {} must be contiguous with one shape and dtype", shape_str(x.shape()),
              x.dtype(), shape_str(out.shape()), out.dtype());
  if (x.numel() == 0) return;
  dispatch_floating(x.dtype(), "softmax", []<class T>() {});
  const TensorArg xa = arg(x, "softmax"), oa = arg(out, "softmax");
  const auto [rows, n] = last_dim_rows(x);
  check_launch(launch_softmax(xa.dtype, xa.data, oa.data, rows, n, log));
}

void CudaBackend::softmax_backward(const Tensor& y, const Tensor& dy, const Tensor& dx, bool log) {
  LINEA_CHECK(y.is_contiguous() && dy.is_contiguous() && dx.is_contiguous() && y.shape() == dy.shape() &&
                  y.shape() == dx.shape() && y.dtype() == dy.dtype() && y.dtype() == dx.dtype(),
              "[softmax_backward] y {}, dy {}, dx {} must be contiguous with one shape and dtype",
              shape_str(y.shape()), shape_str(dy.shape()), shape_str(dx.shape()));
  if (y.numel() == 0) return;
  dispatch_floating(y.dtype(), "softmax_backward", []<class T>() {});
  const TensorArg ya = arg(y, "softmax_backward"), ga = arg(dy, "softmax_backward"), da = arg(dx, "softmax_backward");
  const auto [rows, n] = last_dim_rows(y);
  check_launch(launch_softmax_backward(ya.dtype, ya.data, ga.data, da.data, rows, n, log));
}

}  // namespace linea::cuda
