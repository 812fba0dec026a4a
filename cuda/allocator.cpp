// The caching allocator (allocator.h) and the statistics of runtime.h.
//
// Size classes. A request is rounded up to a class, and a free block is only reused for a request
// of exactly its class:
// - under 1 MiB, to a multiple of 512 bytes: at most 511 bytes wasted, and at most 2048 small
//   classes, so the few sizes a training step uses repeat exactly;
// - from 1 MiB up, to a multiple of 2 MiB, the driver's page size for large allocations (it
//   rounds them to 2 MiB pages anyway, so the coarser class costs no extra device memory).
// Exact-class reuse with no block splitting keeps the bookkeeping trivial; a workload whose sizes
// keep changing fills the cache with blocks it never reuses, and that is what empty_cache() and
// the retry on out-of-memory are for.
//
// Stream-ordered reuse. Every linea kernel and copy runs on the one stream stream(). When the
// host frees a block (its last Storage dies), kernels that read or write it may still be queued
// on that stream. The block goes straight back to its free list anyway and may be handed to the
// very next allocation: whatever uses it next is also queued on stream(), so it runs after every
// earlier use has finished. No event or synchronisation is needed as long as nothing touches
// linea memory from another stream. Only giving memory back to the driver (cudaFree) must first
// wait for the stream, since the driver may hand the pages to someone who is not on our stream.
#include "linea/cuda/allocator.h"

#include <algorithm>
#include <cstdint>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "linea/cuda/cuda_backend.h"
#include "linea/cuda/runtime.h"
#include "linea/tensor/error.h"

namespace linea::cuda {

namespace {

constexpr std::size_t kSmallStep = 512;
constexpr std::size_t kLargeFrom = std::size_t(1) << 20;
constexpr std::size_t kLargeStep = std::size_t(2) << 20;

std::size_t round_up(std::size_t n, std::size_t step) { return (n + step - 1) / step * step; }

struct Cache {
  std::mutex mu;
  std::unordered_map<std::size_t, std::vector<void*>> free;  // size class -> cached free blocks
  MemoryStats stats;
};

// Created once and never destroyed: Storages that die during static destruction (globals holding
// tensors) still find their free list.
Cache& cache() {
  static Cache* c = new Cache;
  return *c;
}

std::string mib(std::size_t bytes) { return fmt::format("{:.1f} MiB", static_cast<double>(bytes) / (1 << 20)); }

// cudaFree every cached block. The caller holds c.mu.
void release_cached(Cache& c) {
  bool any = false;
  for (const auto& [size, blocks] : c.free) any = any || !blocks.empty();
  if (!any) return;  // also keeps this call CUDA-free on a machine without a device
  // Queued kernels may still use blocks freed by the host (see "stream-ordered reuse" above).
  LINEA_CUDA_CHECK(cudaStreamSynchronize(stream()));
  for (auto& [size, blocks] : c.free) {
    while (!blocks.empty()) {  // pop before freeing: a failing cudaFree leaves no dangling entry
      void* p = blocks.back();
      blocks.pop_back();
      c.stats.reserved -= size;
      LINEA_CUDA_CHECK(cudaFree(p));
    }
  }
  c.free.clear();
}

// A fresh block from the driver; on out-of-memory, empty the cache and try once more. The caller
// holds c.mu.
void* device_malloc(Cache& c, std::size_t size, std::size_t requested) {
  void* p = nullptr;
  cudaError_t err = cudaMalloc(&p, size);
  if (err == cudaErrorMemoryAllocation) {
    cudaGetLastError();  // out-of-memory is not sticky: clear it and retry with the cache emptied
    release_cached(c);
    err = cudaMalloc(&p, size);
  }
  if (err == cudaErrorMemoryAllocation) {
    cudaGetLastError();
    std::size_t free_b = 0, total_b = 0;
    if (cudaMemGetInfo(&free_b, &total_b) != cudaSuccess) cudaGetLastError();
    throw Error(fmt::format("[allocate] CUDA out of memory: cannot allocate {} bytes (size class {}); linea holds {} "
                            "in live tensors (peak {}), {} reserved after emptying its cache; the device has {} free "
                            "of {}",
                            requested, mib(size), mib(c.stats.allocated), mib(c.stats.peak_allocated),
                            mib(c.stats.reserved), mib(free_b), mib(total_b)));
  }
  if (err != cudaSuccess) throw_cuda_error(err, "cudaMalloc", __FILE__, __LINE__);
  ++c.stats.device_allocs;
  c.stats.reserved += size;
  return p;
}

}  // namespace

Block cache_allocate(std::size_t nbytes) {
  LINEA_CHECK(nbytes <= (std::size_t(1) << 62), "[allocate] {} bytes is not a possible device allocation", nbytes);
  const std::size_t size = nbytes < kLargeFrom ? round_up(nbytes, kSmallStep) : round_up(nbytes, kLargeStep);
  Cache& c = cache();
  std::lock_guard<std::mutex> lock(c.mu);
  void* p = nullptr;
  auto it = c.free.find(size);
  if (it != c.free.end() && !it->second.empty()) {
    p = it->second.back();
    it->second.pop_back();
    ++c.stats.cache_hits;
  } else {
    p = device_malloc(c, size, nbytes);
  }
  c.stats.allocated += size;
  c.stats.peak_allocated = std::max(c.stats.peak_allocated, c.stats.allocated);
  return {p, size};
}

void cache_release(const Block& block) noexcept {
  try {
    Cache& c = cache();
    std::lock_guard<std::mutex> lock(c.mu);
    c.free[block.size].push_back(block.ptr);
    c.stats.allocated -= block.size;
  } catch (...) {
    // Only a failed push_back (host out of memory) lands here: the block is lost to the cache
    // and stays counted as allocated, which beats throwing from a destructor.
  }
}

MemoryStats memory_stats() {
  Cache& c = cache();
  std::lock_guard<std::mutex> lock(c.mu);
  return c.stats;
}

void reset_peak_stats() {
  Cache& c = cache();
  std::lock_guard<std::mutex> lock(c.mu);
  c.stats.peak_allocated = c.stats.allocated;
}

void empty_cache() {
  Cache& c = cache();
  std::lock_guard<std::mutex> lock(c.mu);
  release_cached(c);
}

}  // namespace linea::cuda
