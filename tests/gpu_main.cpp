// main() of the GPU test files (tests/test_gpu_<family>.cpp). Without a usable CUDA device, or in
// a CPU-only build, it prints why and exits with 77, which ctest reports as "Skipped" (the
// SKIP_RETURN_CODE set in tests/CMakeLists.txt): GPU tests never fail and never silently pass
// on a machine that cannot run them.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cstdio>

#include <linea/cuda/runtime.h>

int main(int argc, char** argv) {
  if (!linea::cuda::is_available()) {
    std::printf("SKIPPED: no CUDA device (CPU-only build, no driver, or no GPU): the GPU tests did not run\n");
    return 77;
  }
  doctest::Context ctx(argc, argv);
  return ctx.run();
}
