// Is there a GPU to run on, and how is its memory doing? The questions the rest of linea asks the
// CUDA runtime directly. All functions are safe to call in any build and on any machine: a
// CPU-only build (LINEA_CUDA off) or a machine without a driver or device answers false / 0 /
// empty statistics instead of throwing.
#pragma once
#include <cstddef>
#include <cstdint>

namespace linea::cuda {

bool is_available();  // at least one usable CUDA device
int device_count();   // number of usable CUDA devices, 0 when none

// The caching allocator (cuda/allocator.cpp). Freed device blocks go back to per-size-class free
// lists instead of cudaFree, so a training step reuses last step's memory without a device sync.
struct MemoryStats {
  std::size_t allocated = 0;       // bytes in live tensors (rounded up to the size class)
  std::size_t reserved = 0;        // bytes held from the driver: allocated + cached free blocks
  std::size_t peak_allocated = 0;  // max of `allocated` since the start or reset_peak_stats()
  int64_t device_allocs = 0;       // cudaMalloc calls made
  int64_t cache_hits = 0;          // allocations served from the free lists
};
MemoryStats memory_stats();
void reset_peak_stats();
void empty_cache();   // returns every cached free block to the driver
void synchronize();   // waits for all work queued on linea's stream

}  // namespace linea::cuda
