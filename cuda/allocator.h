// The caching allocator behind CudaBackend::allocate (statistics and empty_cache are declared in
// runtime.h). cudaMalloc/cudaFree are slow (cudaFree also synchronises the whole device), and a
// training step frees and re-allocates the same activation sizes every step, so freed blocks go
// to free lists keyed by their size class and the next request of that class takes one from
// there, without a driver call.
#pragma once
#include <cstddef>

namespace linea::cuda {

struct Block {
  void* ptr = nullptr;
  std::size_t size = 0;  // the size class: what the block really holds, >= the request
};

// A device block for nbytes > 0 bytes. Throws a linea::Error naming the request and the
// allocator's statistics when the device is out of memory even after emptying the cache.
Block cache_allocate(std::size_t nbytes);

// Gives a block back to its free list. Never throws and makes no CUDA call, so it is safe in a
// Storage deleter, even at process exit when the CUDA context may already be gone.
void cache_release(const Block& block) noexcept;

}  // namespace linea::cuda
