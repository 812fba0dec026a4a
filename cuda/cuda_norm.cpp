// CudaBackend: LayerNorm / RMSNorm forward and backward. The same checks and errors as
// tensor/cpu/cpu_norm.cpp, then the launchers of norm.cu.
#include "linea/cuda/cuda_backend.h"
#include "linea/cuda/launch_norm.h"

namespace linea::cuda {

namespace {

using Operands = std::initializer_list<std::pair<const char*, const Tensor*>>;

// Rows and row length of x, after checking every defined operand against x: same dtype,
// contiguous, and the shape of x (rowwise), [rows] (per_row) or [n] (per_feature).
std::pair<int64_t, int64_t> row_geometry(std::string_view op, const Tensor& x, Operands rowwise, Operands per_row,
                                         Operands per_feature) {
  LINEA_CHECK(x.is_contiguous() && x.dim() >= 1, "[{}] x must be contiguous with at least 1 dim, got {}", op,
              shape_str(x.shape()));
  const int64_t n = x.shape().back(), rows = n == 0 ? 0 : x.numel() / n;
  auto check = [&](Operands list, const Shape& shape) {
    for (auto [what, t] : list) {
      if (!t->defined()) continue;
      LINEA_CHECK(t->is_contiguous() && t->shape() == shape && t->dtype() == x.dtype(),
                  "[{}] {} must be contiguous {} {}, got {} {} (contiguous: {})", op, what, shape_str(shape),
                  x.dtype(), shape_str(t->shape()), t->dtype(), t->is_contiguous());
    }
  };
  check(rowwise, x.shape());
  check(per_row, {rows});
  check(per_feature, {n});
  return {rows, n};
}

// The kernel's pointer for an optional operand: nullptr when undefined.
void* data_or_null(const Tensor& t, const char* op) { return t.defined() ? arg(t, op).data : nullptr; }

void norm_forward(const char* op, bool center, const Tensor& x, const Tensor& weight, const Tensor& bias, double eps,
                  const Tensor& out, const Tensor& mean, const Tensor& rstd, int64_t rows, int64_t n) {
  dispatch_floating(x.dtype(), op, []<class T>() {});
  const TensorArg xa = arg(x, op);
  check_launch(launch_norm_forward(xa.dtype, center, xa.data, data_or_null(weight, op), data_or_null(bias, op), eps,
                                   arg(out, op).data, data_or_null(mean, op), arg(rstd, op).data, rows, n));
}

void norm_backward(const char* op, bool center, const Tensor& dy, const Tensor& x, const Tensor& weight,
                   const Tensor& mean, const Tensor& rstd, const Tensor& dx, const Tensor& dweight,
                   const Tensor& dbias, int64_t rows, int64_t n) {
  dispatch_floating(x.dtype(), op, []<class T>() {});
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
  auto [rows, n] = row_geometry("layernorm_forward", x, {{"out", &out}}, {{"mean", &mean}, {"rstd", &rstd}},
                                {{"weight", &weight}, {"bias", &bias}});
  LINEA_CHECK(out.defined() && mean.defined() && rstd.defined(), "[layernorm_forward] out, mean, rstd are required");
  norm_forward("layernorm_forward", true, x, weight, bias, eps, out, mean, rstd, rows, n);
}

void CudaBackend::layernorm_backward(const Tensor& dy, const Tensor& x, const Tensor& weight, const Tensor& mean,
                                     const Tensor& rstd, const Tensor& dx, const Tensor& dweight,
                                     const Tensor& dbias) {
  auto [rows, n] =
      row_geometry("layernorm_backward", x, {{"dy", &dy}, {"dx", &dx}}, {{"mean", &mean}, {"rstd", &rstd}},
                   {{"weight", &weight}, {"dweight", &dweight}, {"dbias", &dbias}});
  LINEA_CHECK(dy.defined() && dx.defined() && mean.defined() && rstd.defined(),
              "[layernorm_backward] dy, dx, mean, rstd are required");
  norm_backward("layernorm_backward", true, dy, x, weight, mean, rstd, dx, dweight, dbias, rows, n);
}

void CudaBackend::rmsnorm_forward(const Tensor& x, const Tensor& weight, double eps, const Tensor& out,
                                  const Tensor& rstd) {
  auto [rows, n] = row_geometry("rmsnorm_forward", x, {{"out", &out}}, {{"rstd", &rstd}}, {{"weight", &weight}});
  LINEA_CHECK(out.defined() && rstd.defined(), "[rmsnorm_forward] out and rstd are required");
  norm_forward("rmsnorm_forward", false, x, weight, Tensor(), eps, out, Tensor(), rstd, rows, n);
}

void CudaBackend::rmsnorm_backward(const Tensor& dy, const Tensor& x, const Tensor& weight, const Tensor& rstd,
                                   const Tensor& dx, const Tensor& dweight) {
  auto [rows, n] = row_geometry("rmsnorm_backward", x, {{"dy", &dy}, {"dx", &dx}}, {{"rstd", &rstd}},
                                {{"weight", &weight}, {"dweight", &dweight}});
  LINEA_CHECK(dy.defined() && dx.defined() && rstd.defined(), "[rmsnorm_backward] dy, dx, rstd are required");
  norm_backward("rmsnorm_backward", false, dy, x, weight, Tensor(), rstd, dx, dweight, Tensor(), rows, n);
}

}  // namespace linea::cuda
