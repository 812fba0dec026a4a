// The CUDA build's answer to runtime.h, straight from the CUDA runtime.
#include <cuda_runtime.h>

#include "linea/cuda/runtime.h"

namespace linea::cuda {

int device_count() {
  int n = 0;
  // No driver, no device, or a driver too old for this runtime: all mean "no GPU here".
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();  // clear the sticky error so later runtime calls start clean
    return 0;
  }
  return n;
}

bool is_available() { return device_count() > 0; }

}  // namespace linea::cuda
