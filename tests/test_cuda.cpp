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
