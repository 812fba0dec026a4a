#include "linea/tensor/cpu/cpu_backend.h"

namespace linea::cpu {

void CpuBackend::index_select(const Tensor&, int64_t, const Tensor&, const Tensor&) { throw Error("[index_select] TODO: not implemented yet"); }
void CpuBackend::index_add(const Tensor&, int64_t, const Tensor&, const Tensor&) { throw Error("[index_add] TODO: not implemented yet"); }
void CpuBackend::gather(const Tensor&, int64_t, const Tensor&, const Tensor&) { throw Error("[gather] TODO: not implemented yet"); }
void CpuBackend::scatter_add(const Tensor&, int64_t, const Tensor&, const Tensor&) { throw Error("[scatter_add] TODO: not implemented yet"); }

}  // namespace linea::cpu
