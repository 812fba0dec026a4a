// The CUDA runtime probe. On a machine without a GPU (or in a CPU-only build) the GPU checks are
// skipped with a message; the probe itself must still answer, not throw.
#include <iostream>

#include "helpers.h"

TEST_CASE("cuda runtime probe answers without throwing") {
  bool available = false;
  int count = -1;
  CHECK_NOTHROW(available = linea::cuda::is_available());
  CHECK_NOTHROW(count = linea::cuda::device_count());
  CHECK(count >= 0);
  CHECK(available == (count > 0));
}

TEST_CASE("cuda device present") {
  if (!linea::cuda::is_available()) {
    std::cout << "skipping GPU tests: no CUDA device" << std::endl;
    MESSAGE("skipping GPU tests: no CUDA device");
    return;
  }
  CHECK(linea::cuda::device_count() > 0);
}

// cuda/register.cpp registers the backend from a static initializer that nothing references (the
// linker keeps it through the library's -u link option). Where the runtime finds a device the
// backend must be there; everywhere else (CPU-only build, no driver, no GPU) a CUDA tensor fails
// with one clear error, not a crash.
TEST_CASE("the CUDA backend is registered exactly when a device is present") {
  if (linea::cuda::is_available()) {
    CHECK_NOTHROW(linea::backend(linea::Device::cuda()));
    CHECK(linea::zeros({3}).to(linea::Device::cuda()).device() == linea::Device::cuda());
    return;
  }
  CHECK_THROWS_WITH_AS(
      linea::zeros({3}).to(linea::Device::cuda()),
      doctest::Contains("[backend] no backend for device cuda:0: this build or machine has no CUDA support"),
      linea::Error);
}
