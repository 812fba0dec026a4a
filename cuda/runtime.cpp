// The CUDA build's answer to the device questions of runtime.h, straight from the CUDA runtime.
// (The allocator's statistics are in allocator.cpp.)
#include <cuda_runtime.h>

#include "linea/cuda/cuda_backend.h"
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

bool is_available() {
  static const bool available = device_count() > 0;  // asked on every CUDA tensor op: probe once
  return available;
}


void synchronize() {
  if (is_available()) LINEA_CUDA_CHECK(cudaStreamSynchronize(stream()));
}

}  // namespace linea::cuda

