#include "linea/tensor/cpu/cpu_backend.h"

namespace linea::cpu {

void CpuBackend::unary(UnaryOp, const Tensor&, const Tensor&, double, double) { throw Error("[unary] TODO: not implemented yet"); }
void CpuBackend::binary(BinaryOp, const Tensor&, const Tensor&, const Tensor&) { throw Error("[binary] TODO: not implemented yet"); }
void CpuBackend::where(const Tensor&, const Tensor&, const Tensor&, const Tensor&) { throw Error("[where] TODO: not implemented yet"); }

}  // namespace linea::cpu
