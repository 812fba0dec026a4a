// The GPU's ceilings, measured on the card the other benchmarks run on, so their numbers can be
// read as fractions of what the hardware gives:
//   - copy bandwidth: cudaMemcpyAsync of 1 GiB device -> device; (bytes read + bytes written) / time
//   - matrix rate: linea::matmul of two 8192 x 8192 float32 matrices (2·8192³ FLOPs) at each
//     matmul precision (tensor/precision.h): Highest (float32 FMA), TF32 and BF16 (tensor cores)
// Each is the median of repeated samples after a warm-up; a sample times `reps` calls on the host
// clock between two device-wide synchronisations (so the few microseconds a synchronisation costs
// are spread over the calls). Only public headers: <linea/linea.h> and the CUDA runtime's own.
// Usage: bench_ceilings        (prints one skip line and exits 0 without a GPU or in a CPU-only build)
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include <linea/linea.h>

#ifdef LINEA_BENCH_CUDA
#include <cuda_runtime.h>

#include <chrono>

using namespace linea;

namespace {

// Stops with the CUDA runtime's message when a runtime call fails.
void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    std::fprintf(stderr, "bench_ceilings: %s: %s\n", what, cudaGetErrorString(e));
    std::exit(1);
  }
}

// Median milliseconds per call of f over `samples` samples of `reps` calls each, after `warmup` calls.
template <class F>
double median_ms(int warmup, int samples, int reps, F&& f) {
  check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");  // the inputs are ready
  for (int i = 0; i < warmup; ++i) f();
  std::vector<double> ms;
  for (int i = 0; i < samples; ++i) {
    check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
    const auto t0 = std::chrono::steady_clock::now();
    for (int r = 0; r < reps; ++r) f();
    check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count() / reps);
  }
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

}  // namespace

int main() {
  if (!cuda::is_available()) {
    std::printf("bench_ceilings: SKIPPED (no CUDA device)\n");
    return 0;
  }
  cudaDeviceProp prop{};
  check(cudaGetDeviceProperties(&prop, 0), "cudaGetDeviceProperties");
  std::printf("bench_ceilings on %s (%d SMs, %.0f GiB)\n", prop.name, prop.multiProcessorCount,
              double(prop.totalGlobalMem) / (1 << 30));

  // Copy bandwidth: 1 GiB read and 1 GiB written per copy.
  {
    const int64_t n = int64_t(1) << 30;
    const Tensor src = zeros({n}, {DType::UInt8, Device::cuda()}), dst = empty({n}, DType::UInt8, Device::cuda());
    const double ms = median_ms(3, 20, 5, [&] {
      check(cudaMemcpyAsync(dst.data_ptr(), src.data_ptr(), n, cudaMemcpyDeviceToDevice), "cudaMemcpyAsync");
    });
    std::printf("%-28s %9.3f ms  %8.1f GB/s  (read + written)\n", "copy d2d 1 GiB", ms, 2.0 * double(n) / ms / 1e6);
  }

  // Matrix rate through linea's matmul (cuBLAS), at each precision.
  {
    const int64_t n = 8192;
    Generator gen(1);
    const Tensor a = randn({n, n}, gen).to(Device::cuda()), b = randn({n, n}, gen).to(Device::cuda());
    const double flops = 2.0 * double(n) * double(n) * double(n);
    const std::pair<const char*, MatmulPrecision> precisions[] = {
        {"matmul 8192^3 fp32 Highest", MatmulPrecision::Highest},
        {"matmul 8192^3 TF32", MatmulPrecision::TF32},
        {"matmul 8192^3 BF16", MatmulPrecision::BF16}};
    for (const auto& [label, p] : precisions) {
      AutocastGuard guard(p);
      const double ms = median_ms(2, 10, 3, [&] { matmul(a, b); });
      std::printf("%-28s %9.3f ms  %8.1f TFLOP/s\n", label, ms, flops / ms / 1e9);
    }
  }
  return 0;
}

#else

int main() {
  std::printf("bench_ceilings: SKIPPED (CPU-only build: configure with LINEA_CUDA=ON)\n");
  return 0;
}

#endif
