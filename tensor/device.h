// Where a tensor's storage lives. Part of every tensor from day one; kernels for a device are
// found through the backend registry (backend.h). Plain C++ (no fmt): nvcc compiles it too;
// the fmt formatter for Device is in error.h.
#pragma once
#include <cstdint>
#include <string>


namespace linea {

enum class DeviceType : uint8_t { CPU, CUDA };

struct Device {
  DeviceType type = DeviceType::CPU;
  int index = 0;

  static constexpr Device cpu() { return {DeviceType::CPU, 0}; }
  static constexpr Device cuda(int i = 0) { return {DeviceType::CUDA, i}; }
  bool is_cpu() const { return type == DeviceType::CPU; }
  bool is_cuda() const { return type == DeviceType::CUDA; }
  bool operator==(const Device&) const = default;
  std::string str() const { return is_cpu() ? "cpu" : "cuda:" + std::to_string(index); }
};

}  // namespace linea
