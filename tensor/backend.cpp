#include "linea/tensor/backend.h"

#include <array>

#include "linea/tensor/cpu/cpu_backend.h"

namespace linea {

namespace {
std::array<Backend*, 2>& registry() {
  static std::array<Backend*, 2> r{};
  return r;
}
}  // namespace

void register_backend(DeviceType type, Backend* b) { registry()[static_cast<int>(type)] = b; }

Backend& backend(Device device) {
  if (device.is_cpu()) return cpu::instance();
  Backend* b = registry()[static_cast<int>(device.type)];
  LINEA_CHECK(b != nullptr, "[backend] no backend for device {}: {}", device,
              device.is_cuda() ? "this build or machine has no CUDA support (see linea::cuda::is_available())"
                               : "the CPU backend was not registered");
  return *b;
}

}  // namespace linea
