// The CPU-only build (LINEA_CUDA=OFF) of runtime.h: there is never a GPU.
#include "linea/cuda/runtime.h"

namespace linea::cuda {

int device_count() { return 0; }
bool is_available() { return false; }
MemoryStats memory_stats() { return {}; }
void reset_peak_stats() {}
void empty_cache() {}
void synchronize() {}

}  // namespace linea::cuda
