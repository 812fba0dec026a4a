// CudaBackend::unary, binary, where: the checks and errors shared with the CPU
// (tensor/kernel_checks.h), then the launchers of elementwise.cu.
#include "linea/cuda/cuda_backend.h"
#include "linea/cuda/launch_elementwise.h"
#include "linea/tensor/kernel_checks.h"

namespace linea::cuda {

void CudaBackend::unary(UnaryOp op, const Tensor& x, const Tensor& out, double p0, double p1) {
  kernel_checks::unary(op, x, out);
  const char* name = op_name(op);
  if (!launch_unary(op, arg(x, name), arg(out, name), p0, p1))
    kernel_checks::unary_unsupported(op, x.dtype());
  check_launch("elementwise unary");
}

void CudaBackend::binary(BinaryOp op, const Tensor& a, const Tensor& b, const Tensor& out) {
  kernel_checks::binary(op, a, b, out);
  const char* name = op_name(op);
  if (!launch_binary(op, arg(a, name), arg(b, name), arg(out, name)))
    kernel_checks::binary_unsupported(op, a.dtype());
  check_launch("elementwise binary");
}

void CudaBackend::where(const Tensor& cond, const Tensor& a, const Tensor& b, const Tensor& out) {
  kernel_checks::where(cond, a, b, out);
  launch_where(arg(cond, "where"), arg(a, "where"), arg(b, "where"), arg(out, "where"));
  check_launch("elementwise where");
}

}  // namespace linea::cuda
