// The CUDA backend's memory family on a GPU: the caching allocator's statistics, host <-> device
// transfers (chunked through pinned staging buffers), and the device copy (dtype conversion,
// strided views on either side) and fill kernels, checked against the CPU backend.
#include "helpers.h"

using namespace linea;
namespace cu = linea::cuda;

namespace {

const Device kGpu = Device::cuda(0);
const DType kAll[] = {DType::Float32, DType::Float64, DType::Int64, DType::Bool, DType::UInt8};

// CPU values every dtype holds after the CPU's cast: zeros (false), small non-negative integers
// and halves (truncated by the integer dtypes), so conversions are defined in C++ for all pairs.
Tensor sample(Shape shape, DType t) {
  std::vector<double> v(static_cast<size_t>(numel(shape)));
  for (size_t i = 0; i < v.size(); ++i) v[i] = i % 7 == 0 ? 0.0 : static_cast<double>((i * 37) % 200) + (i % 3 ? 0.0 : 0.5);
  return from_vector(v, shape).to(t);
}

}  // namespace

TEST_CASE("the caching allocator rounds to size classes and reuses freed blocks") {
  cu::empty_cache();
  const cu::MemoryStats s0 = cu::memory_stats();
  CHECK(s0.reserved == s0.allocated);  // an empty cache holds nothing beyond the live tensors
  {
    Tensor a = empty({1000}, DType::Float32, kGpu);  // 4000 bytes: the 4096-byte class
    const cu::MemoryStats s1 = cu::memory_stats();
    CHECK(s1.allocated - s0.allocated == 4096);
    CHECK(s1.reserved - s0.reserved == 4096);
    CHECK(s1.device_allocs == s0.device_allocs + 1);
  }
  const cu::MemoryStats s2 = cu::memory_stats();
  CHECK(s2.allocated == s0.allocated);
  CHECK(s2.reserved == s0.reserved + 4096);  // freed into the cache, not to the driver
  {
    Tensor b = empty({1020}, DType::Float32, kGpu);  // 4080 bytes: the same class, from the free list
    const cu::MemoryStats s3 = cu::memory_stats();
    CHECK(s3.cache_hits == s2.cache_hits + 1);
    CHECK(s3.device_allocs == s2.device_allocs);
    CHECK(s3.allocated - s2.allocated == 4096);
  }
  {
    Tensor c = empty({3 << 20}, DType::UInt8, kGpu);  // 3 MiB: large blocks come in 2 MiB steps
    CHECK(cu::memory_stats().allocated - s0.allocated == (4u << 20));
  }
  Tensor none = empty({0, 5}, DType::Float64, kGpu);  // empty tensors take no device memory
  CHECK(none.to_vector().empty());
  CHECK(cu::memory_stats().allocated == s0.allocated);
  cu::empty_cache();
  const cu::MemoryStats s4 = cu::memory_stats();
  CHECK(s4.reserved == s0.reserved);
  CHECK(s4.allocated == s0.allocated);
}

TEST_CASE("peak statistics follow the largest live allocation since the reset") {
  cu::reset_peak_stats();
  const cu::MemoryStats s0 = cu::memory_stats();
  CHECK(s0.peak_allocated == s0.allocated);
  {
    Tensor big = empty({8 << 20}, DType::UInt8, kGpu);
    Tensor small = empty({100}, DType::UInt8, kGpu);
  }
  const cu::MemoryStats s1 = cu::memory_stats();
  CHECK(s1.allocated == s0.allocated);
  CHECK(s1.peak_allocated == s0.allocated + (8u << 20) + 512);
  cu::reset_peak_stats();
  CHECK(cu::memory_stats().peak_allocated == s0.allocated);
}

TEST_CASE("reused blocks hold correct results: stream-ordered reuse across many steps") {
  const int64_t hits0 = cu::memory_stats().cache_hits;
  for (int step = 0; step < 20; ++step) {
    Tensor x = full({257, 33}, static_cast<double>(step), kGpu);
    Tensor y = x * 2.0 + 1.0;  // temporaries are freed and reused while kernels are still queued
    CHECK((y - x).to_vector() == std::vector<double>(257 * 33, step + 1.0));
  }
  CHECK(cu::memory_stats().cache_hits > hits0);
}

TEST_CASE("out of device memory throws a linea::Error naming the request, and the allocator still works") {
  const int64_t huge = int64_t(1) << 48;  // 256 TiB
  CHECK_THROWS_WITH_AS(empty({huge}, DType::UInt8, kGpu), doctest::Contains("out of memory"), Error);
  CHECK_THROWS_WITH_AS(empty({huge}, DType::UInt8, kGpu), doctest::Contains("281474976710656 bytes"), Error);
  CHECK(full({3}, 1.5, kGpu).to_vector() == std::vector<double>(3, 1.5));
}

TEST_CASE("transfers larger than the staging buffers arrive intact, at any offset") {
  const int64_t n = (20 << 20) / 4 + 3;  // ~20 MiB of float32: three chunks, the last one partial
  const Tensor h = arange(0.0, static_cast<double>(n), 1.0);
  const Tensor d = h.to(kGpu);
  CHECK(d.to(Device::cpu()).to_vector() == h.to_vector());
  CHECK(d.at({n - 1}) == static_cast<double>(n - 1));  // one element at the storage's far end
  // A write into the middle of a storage (nn/module.cpp loads parameters this way).
  const float src[2] = {-1.0f, -2.0f};
  backend(kGpu).copy_from_host(*d.storage(), 5 * sizeof(float), src, sizeof(src));
  CHECK(d.narrow(0, 4, 4).to_vector() == std::vector<double>{4, -1, -2, 7});
  float back[2];
  CHECK_THROWS_AS(backend(kGpu).copy_to_host(back, *d.storage(), n * sizeof(float) - 4, sizeof(back)), Error);
  CHECK_THROWS_AS(backend(kGpu).copy_from_host(*d.storage(), n * sizeof(float) - 4, src, sizeof(src)), Error);
}

TEST_CASE("device copies convert between every pair of dtypes like the CPU, from and into strided views") {
  for (DType s : kAll) {
    for (DType t : kAll) {
      const std::string pair = std::string(dtype_name(s)) + " -> " + std::string(dtype_name(t));
      INFO(pair);
      const Tensor h = sample({6, 5}, s);
      const Tensor hv = h.t().slice(1, 0, 6, 2);  // [5, 3], strides (1, 10)
      const std::vector<double> expect = hv.to(t).to_vector();
      const Tensor gv = h.to(kGpu).t().slice(1, 0, 6, 2);
      CHECK(gv.to(t).to_vector() == expect);           // strided source, contiguous destination
      Tensor dst = zeros({3, 5}, {t, kGpu}).t();     // [5, 3], a transposed destination
      backend(kGpu).copy(gv, dst);
      CHECK(dst.to_vector() == expect);
      CHECK(h.to(kGpu).to(t).to_vector() == h.to(t).to_vector());  // both contiguous
    }
  }
}

TEST_CASE("same-dtype device copies: contiguous (memcpy), with offsets, broadcast and strided") {
  const Tensor h = sample({4, 6}, DType::Float32);
  const Tensor g = h.to(kGpu);
  CHECK(g.clone().to_vector() == h.to_vector());
  CHECK(g.narrow(0, 1, 2).clone().to_vector() == h.narrow(0, 1, 2).to_vector());
  CHECK(g.t().contiguous().to_vector() == h.t().contiguous().to_vector());
  CHECK(g.slice(1, 1, 6, 2).contiguous().to_vector() == h.slice(1, 1, 6, 2).contiguous().to_vector());
  const Tensor row = g.select(0, 2).unsqueeze(0).expand({3, 6});
  CHECK(row.contiguous().to_vector() == h.select(0, 2).unsqueeze(0).expand({3, 6}).contiguous().to_vector());
  CHECK(g.to(kGpu).same(g));  // to() its own device is the tensor itself
}

TEST_CASE("fill writes every element of a strided view and nothing else, in every dtype") {
  for (DType t : kAll) {
    INFO(dtype_name(t));
    for (double value : {3.0, 0.0, 1.5}) {
      Tensor cpu_base = zeros({4, 6}, t);
      Tensor gpu_base = zeros({4, 6}, {t, kGpu});
      backend(Device::cpu()).fill(cpu_base.slice(1, 1, 6, 2), value);
      backend(kGpu).fill(gpu_base.slice(1, 1, 6, 2), value);
      CHECK(gpu_base.to_vector() == cpu_base.to_vector());
    }
  }
  CHECK(full({5}, -2.5, kGpu).to_vector() == std::vector<double>(5, -2.5));
}
