// CudaBackend memory methods: allocate (through the caching allocator), host <-> device transfers
// (through pinned staging buffers), and the copy / fill kernels of elementwise.cu.
#include <algorithm>
#include <cstring>
#include <mutex>

#include "linea/cuda/allocator.h"
#include "linea/cuda/cuda_backend.h"
#include "linea/tensor/error.h"

namespace linea::cuda {

namespace {

// Host <-> device copies go through two pinned (page-locked) buffers: DMA only works on pinned
// memory, so from ordinary (pageable) memory the driver would stage the bytes itself, and with
// two buffers of our own the host's memcpy into or out of one overlaps the DMA of the other.
// done[b] is recorded on stream() after the last transfer that uses buffer b; the host waits on
// it before touching b again.
constexpr std::size_t kChunk = std::size_t(8) << 20;  // bytes per buffer

struct Staging {
  std::mutex mu;  // one transfer at a time owns both buffers
  char* buf[2] = {};
  cudaEvent_t done[2] = {};
};

// Allocated on the first transfer and never freed: freeing pinned memory during static
// destruction could fail once the CUDA context is gone.
Staging& staging() {
  static Staging* s = [] {
    auto* st = new Staging;
    for (int b = 0; b < 2; ++b) {
      LINEA_CUDA_CHECK(cudaMallocHost(reinterpret_cast<void**>(&st->buf[b]), kChunk));
      LINEA_CUDA_CHECK(cudaEventCreateWithFlags(&st->done[b], cudaEventDisableTiming));
    }
    return st;
  }();
  return *s;
}

}  // namespace

std::shared_ptr<Storage> CudaBackend::do_allocate(std::size_t nbytes) {
  if (nbytes == 0) return std::make_shared<Storage>(nullptr, 0, Device::cuda(0), nullptr);
  const Block block = cache_allocate(nbytes);
  try {
    return std::make_shared<Storage>(block.ptr, nbytes, Device::cuda(0),
                                     [block](void*) { cache_release(block); });
  } catch (...) {  // host out of memory for the Storage itself: do not lose the block
    cache_release(block);
    throw;
  }
}

void CudaBackend::do_copy_from_host(Storage& dst, std::size_t off, const void* src, std::size_t nbytes) {
  if (nbytes == 0) return;
  Staging& st = staging();
  std::lock_guard<std::mutex> lock(st.mu);
  char* d = static_cast<char*>(dst.data) + off;
  const char* s = static_cast<const char*>(src);
  // The host's memcpy into the staging buffer is the last read of src, so the caller may reuse
  // src as soon as this returns; the DMA out of the staging buffer finishes later, on stream(),
  // before any kernel queued after it reads dst.
  for (std::size_t pos = 0, c = 0; pos < nbytes; pos += kChunk, ++c) {
    const std::size_t n = std::min(kChunk, nbytes - pos);
    const int b = static_cast<int>(c % 2);
    LINEA_CUDA_CHECK(cudaEventSynchronize(st.done[b]));  // the buffer's previous transfer is over
    std::memcpy(st.buf[b], s + pos, n);
    LINEA_CUDA_CHECK(cudaMemcpyAsync(d + pos, st.buf[b], n, cudaMemcpyHostToDevice, stream()));
    LINEA_CUDA_CHECK(cudaEventRecord(st.done[b], stream()));
  }
}

void CudaBackend::do_copy_to_host(void* dst, const Storage& src, std::size_t off, std::size_t nbytes) {
  if (nbytes == 0) return;
  Staging& st = staging();
  std::lock_guard<std::mutex> lock(st.mu);
  const char* s = static_cast<const char*>(src.data) + off;
  char* d = static_cast<char*>(dst);
  const std::size_t nchunks = (nbytes + kChunk - 1) / kChunk;
  // Chunk c lands in buffer c % 2. The DMA of chunk c + 1 is queued before the host copies chunk c
  // out, so the two overlap; buffer (c + 1) % 2 is free then, since the host finished reading
  // chunk c - 1 from it, and a pending upload from it is earlier on the same stream.
  auto queue = [&](std::size_t c) {
    const int b = static_cast<int>(c % 2);
    const std::size_t pos = c * kChunk, n = std::min(kChunk, nbytes - pos);
    LINEA_CUDA_CHECK(cudaMemcpyAsync(st.buf[b], s + pos, n, cudaMemcpyDeviceToHost, stream()));
    LINEA_CUDA_CHECK(cudaEventRecord(st.done[b], stream()));
  };
  queue(0);
  for (std::size_t c = 0; c < nchunks; ++c) {
    if (c + 1 < nchunks) queue(c + 1);
    const int b = static_cast<int>(c % 2);
    // Waiting for chunk c also waits for all earlier work on stream(), the kernels that wrote src.
    LINEA_CUDA_CHECK(cudaEventSynchronize(st.done[b]));
    const std::size_t pos = c * kChunk;
    std::memcpy(d + pos, st.buf[b], std::min(kChunk, nbytes - pos));
  }
}

void CudaBackend::do_copy(const Tensor& src, const Tensor& dst) {
  const TensorArg s = arg(src, "copy"), d = arg(dst, "copy");
  if (src.numel() == 0) return;
  if (src.dtype() == dst.dtype() && src.is_contiguous() && dst.is_contiguous()) {
    LINEA_CUDA_CHECK(cudaMemcpyAsync(d.data, s.data, static_cast<std::size_t>(src.numel()) * itemsize(src.dtype()),
                                     cudaMemcpyDeviceToDevice, stream()));
    return;
  }
  launch_copy(s, d);
  check_launch("elementwise copy");
}

void CudaBackend::do_fill(const Tensor& dst, double value) {
  launch_fill(arg(dst, "fill"), value);
  check_launch("elementwise fill");
}

}  // namespace linea::cuda
