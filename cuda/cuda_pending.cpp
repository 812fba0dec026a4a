// TEMPORARY while the CUDA backend is being written: methods not implemented yet throw. Each
// family's author deletes its methods from here when adding them in its own file; this file is
// removed when it is empty.
#include "linea/cuda/cuda_backend.h"
#include "linea/cuda/runtime.h"

namespace linea::cuda {

#define LINEA_CUDA_PENDING(name) throw Error("[" name "] not implemented on CUDA yet")

// memory + elementwise
std::shared_ptr<Storage> CudaBackend::allocate(std::size_t) { LINEA_CUDA_PENDING("allocate"); }
void CudaBackend::copy_from_host(Storage&, std::size_t, const void*, std::size_t) { LINEA_CUDA_PENDING("copy_from_host"); }
void CudaBackend::copy_to_host(void*, const Storage&, std::size_t, std::size_t) { LINEA_CUDA_PENDING("copy_to_host"); }
void CudaBackend::copy(const Tensor&, const Tensor&) { LINEA_CUDA_PENDING("copy"); }
void CudaBackend::fill(const Tensor&, double) { LINEA_CUDA_PENDING("fill"); }
void CudaBackend::unary(UnaryOp, const Tensor&, const Tensor&, double, double) { LINEA_CUDA_PENDING("unary"); }
void CudaBackend::binary(BinaryOp, const Tensor&, const Tensor&, const Tensor&) { LINEA_CUDA_PENDING("binary"); }
void CudaBackend::where(const Tensor&, const Tensor&, const Tensor&, const Tensor&) { LINEA_CUDA_PENDING("where"); }
MemoryStats memory_stats() { return {}; }
void reset_peak_stats() {}
void empty_cache() {}

}  // namespace linea::cuda
