// The caching allocator behind CpuBackend::allocate, the host twin of cuda/allocator.h.
//
// A training step frees and re-allocates the same activation and gradient sizes every step.
// Freed blocks go to free lists keyed by their size class, and the next request of that class
// takes one from there instead of calling malloc: from the third step on (the first makes the
// optimizer state, the second may still meet new sizes) a step does no malloc or free of tensor
// storage. The cached bytes are capped (set_host_cache_limit), blocks of 64 MiB and more are not
// cached at all, and empty_host_cache() hands everything cached back: call it between phases that
// use different sizes (the examples do after each evaluation), or each phase's blocks stay cached.
#pragma once
#include <cstddef>
#include <cstdint>

namespace linea::cpu {

struct HostMemoryStats {
  std::size_t allocated = 0;       // bytes in live tensors (rounded up to the size class)
  std::size_t cached = 0;          // bytes in free blocks kept for reuse
  std::size_t peak_allocated = 0;  // max of `allocated` since the start or reset_peak_host_stats()
  std::size_t cache_limit = 0;     // the most `cached` may hold (set_cache_limit)
  int64_t system_allocs = 0;       // blocks taken from the C library (aligned_alloc)
  int64_t system_frees = 0;        // blocks given back to it
  int64_t cache_hits = 0;          // requests served from a free list
};

HostMemoryStats host_memory_stats();
void reset_peak_host_stats();
// Frees every cached block (live tensors keep theirs).
void empty_host_cache();
// A freed block that would take the cache above `bytes` goes back to the C library instead;
// lowering the limit frees cached blocks until it holds. Default: 2 GiB, or LINEA_HOST_CACHE_MB
// from the environment (0: no caching, every free goes straight back to the C library).
void set_host_cache_limit(std::size_t bytes);

// Used by CpuBackend::allocate: a 64-byte-aligned block of at least nbytes > 0 bytes and the
// size class it really holds; release gives it back to its free list (never throws).
struct HostBlock {
  void* ptr = nullptr;
  std::size_t size = 0;
};
HostBlock host_allocate(std::size_t nbytes);
void host_release(const HostBlock& block) noexcept;

}  // namespace linea::cpu
