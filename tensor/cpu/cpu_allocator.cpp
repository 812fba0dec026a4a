// The host caching allocator (cpu_allocator.h).
//
// Size classes. A request is rounded up to a class and a free block is only reused for a request
// of exactly its class (no splitting, no merging: the bookkeeping stays trivial):
// - under 1 MiB, to a multiple of 512 bytes: the few small sizes a step uses repeat exactly;
// - from 1 MiB up, to a multiple of 1/8 of the power of two below it (1 MiB -> 128 KiB steps,
//   8 MiB -> 1 MiB steps): at most 12.5% more than asked, and nearby sizes share a class.
// Untouched pages at a block's tail are never faulted in, so the rounding costs address space
// more than resident memory. Blocks of 64 MiB and more skip the cache (malloc and free as before).
#include "linea/tensor/cpu/cpu_allocator.h"

#include <algorithm>
#include <bit>
#include <cstdlib>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "linea/tensor/env.h"
#include "linea/tensor/error.h"

namespace linea::cpu {

namespace {

constexpr std::size_t kSmallStep = 512;
constexpr std::size_t kLargeFrom = std::size_t(1) << 20;
// Blocks this big are never cached: they are one-off buffers (a dataset being converted, say),
// and caching them kept a make train run's peak RSS 400 MB above what it was without the cache.
constexpr std::size_t kUncachedFrom = std::size_t(64) << 20;

std::size_t size_class(std::size_t n) {
  const std::size_t step = n < kLargeFrom ? kSmallStep : std::bit_floor(n) / 8;
  return (n + step - 1) / step * step;
}

struct Cache {
  std::mutex mu;
  std::unordered_map<std::size_t, std::vector<void*>> free;  // size class -> cached free blocks
  HostMemoryStats stats;
};

// The cap: LINEA_HOST_CACHE_MB from the environment, 0 to 1 TiB (0 turns caching off: every free
// goes back to the C library at once), else 2 GiB. A malformed value throws at the first allocation.
std::size_t initial_limit() {
  return static_cast<std::size_t>(env_integer("LINEA_HOST_CACHE_MB", 2048, 0, int64_t(1) << 20, "MiB")) << 20;
}

// Created once and never destroyed: Storages that die during static destruction (globals holding
// tensors) still find their free list.
Cache& cache() {
  static Cache* c = [] {
    auto* fresh = new Cache;
    fresh->stats.cache_limit = initial_limit();
    return fresh;
  }();
  return *c;
}

// Frees cached blocks, largest classes first, until at most `keep` bytes stay cached. The caller
// holds c.mu.
void trim(Cache& c, std::size_t keep) {
  if (c.stats.cached <= keep) return;
  std::vector<std::size_t> sizes;
  for (const auto& [size, blocks] : c.free)
    if (!blocks.empty()) sizes.push_back(size);
  std::sort(sizes.rbegin(), sizes.rend());
  for (std::size_t size : sizes) {
    auto& blocks = c.free[size];
    while (!blocks.empty() && c.stats.cached > keep) {
      std::free(blocks.back());
      blocks.pop_back();
      c.stats.cached -= size;
      ++c.stats.system_frees;
    }
  }
}

}  // namespace

HostBlock host_allocate(std::size_t nbytes) {
  LINEA_CHECK(nbytes <= PTRDIFF_MAX, "[allocate] {} bytes is more than any host can address", nbytes);
  const std::size_t size = size_class(nbytes);
  Cache& c = cache();
  std::lock_guard<std::mutex> lock(c.mu);
  void* p = nullptr;
  auto it = c.free.find(size);
  if (it != c.free.end() && !it->second.empty()) {
    p = it->second.back();
    it->second.pop_back();
    c.stats.cached -= size;
    ++c.stats.cache_hits;
  } else {
    p = std::aligned_alloc(64, size);  // full cache lines and aligned SIMD loads for BLAS and our loops
    if (p == nullptr) {  // out of memory: give the cache back and try once more
      trim(c, 0);
      p = std::aligned_alloc(64, size);
    }
    LINEA_CHECK(p != nullptr, "[allocate] out of host memory allocating {} bytes ({} in live tensors)", nbytes,
                c.stats.allocated);
    ++c.stats.system_allocs;
  }
  c.stats.allocated += size;
  c.stats.peak_allocated = std::max(c.stats.peak_allocated, c.stats.allocated);
  return {p, size};
}

void host_release(const HostBlock& block) noexcept {
  Cache& c = cache();
  std::lock_guard<std::mutex> lock(c.mu);
  c.stats.allocated -= block.size;
  try {
    if (block.size < kUncachedFrom && c.stats.cached + block.size <= c.stats.cache_limit) {
      c.free[block.size].push_back(block.ptr);
      c.stats.cached += block.size;
      return;
    }
  } catch (...) {  // a failed push_back (out of memory): free the block instead of caching it
  }
  std::free(block.ptr);
  ++c.stats.system_frees;
}

HostMemoryStats host_memory_stats() {
  Cache& c = cache();
  std::lock_guard<std::mutex> lock(c.mu);
  return c.stats;
}

void reset_peak_host_stats() {
  Cache& c = cache();
  std::lock_guard<std::mutex> lock(c.mu);
  c.stats.peak_allocated = c.stats.allocated;
}

void empty_host_cache() {
  Cache& c = cache();
  std::lock_guard<std::mutex> lock(c.mu);
  trim(c, 0);
}

void set_host_cache_limit(std::size_t bytes) {
  Cache& c = cache();
  std::lock_guard<std::mutex> lock(c.mu);
  c.stats.cache_limit = bytes;
  trim(c, bytes);
}

}  // namespace linea::cpu
