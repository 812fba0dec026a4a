#include "linea/tensor/backend.h"

#include <array>

#include "linea/cuda/runtime.h"
#include "linea/tensor/cpu/cpu_backend.h"
#include "linea/tensor/profiler.h"
#include "linea/tensor/profiling_backend.h"

namespace linea {

namespace {
std::array<Backend*, 2>& registry() {
  static std::array<Backend*, 2> r{};
  return r;
}
}  // namespace

void register_backend(DeviceType type, Backend* b) { registry()[static_cast<int>(type)] = b; }

namespace {
Backend& device_backend(Device device) {
  if (device.is_cpu()) return cpu::instance();
  LINEA_CHECK(device.index == 0, "[backend] only one GPU (cuda:0) is supported, got {}", device);
  Backend* b = registry()[static_cast<int>(device.type)];
  if (b == nullptr && device.is_cuda()) {
    // The CUDA backend registers itself on first use, once the runtime has found a device.
    b = cuda::backend_if_available();
    if (b != nullptr) register_backend(DeviceType::CUDA, b);
  }
  LINEA_CHECK(b != nullptr, "[backend] no backend for device {}: {}", device,
              device.is_cuda() ? "this build or machine has no CUDA support (see linea::cuda::is_available())"
                               : "the CPU backend was not registered");
  return *b;
}
}  // namespace

// While linea::Profiler records, every kernel goes through its timing wrapper (profiler.h).
Backend& backend(Device device) {
  if (Profiler::active()) [[unlikely]] return profiling_backend(device_backend(device), device);
  return device_backend(device);
}

}  // namespace linea
