// The GPU runtime itself: device count and the stream answer on a machine with a device.
#include "helpers.h"

TEST_CASE("a CUDA device is visible and its stream synchronises") {
  CHECK(linea::cuda::device_count() > 0);
  CHECK_NOTHROW(linea::cuda::synchronize());
}
