#include "linea/tensor/cpu/cpu_backend.h"

namespace linea::cpu {

void CpuBackend::reduce(ReduceOp, const Tensor&, const Tensor&, int64_t, int64_t, int64_t) { throw Error("[reduce] TODO: not implemented yet"); }
void CpuBackend::softmax(const Tensor&, const Tensor&, bool) { throw Error("[softmax] TODO: not implemented yet"); }
void CpuBackend::softmax_backward(const Tensor&, const Tensor&, const Tensor&, bool) { throw Error("[softmax_backward] TODO: not implemented yet"); }

}  // namespace linea::cpu
