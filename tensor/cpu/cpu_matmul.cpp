#include "linea/tensor/cpu/cpu_backend.h"

namespace linea::cpu {

void CpuBackend::gemm(const Tensor&, const Tensor&, const Tensor&) { throw Error("[gemm] TODO: not implemented yet"); }

}  // namespace linea::cpu
