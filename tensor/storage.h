// Storage: one reference-counted block of bytes on one device. Tensors are views over it
// (shape, strides, offset), so many tensors can share one Storage without copying.
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>

#include "linea/tensor/device.h"

namespace linea {

struct Storage {
  void* data = nullptr;
  std::size_t nbytes = 0;
  Device device;
  std::function<void(void*)> deleter;  // empty for memory the tensor does not own (from_blob)
  // Counts the in-place ops that wrote this storage (Tensor's +=, -=, *=, /=, zero_, fill_), so
  // that autograd can tell when a value a backward needs was overwritten (autograd/graph.h).
  uint64_t version = 0;

  Storage(void* d, std::size_t n, Device dev, std::function<void(void*)> del)
      : data(d), nbytes(n), device(dev), deleter(std::move(del)) {}
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;
  ~Storage() {
    if (deleter) deleter(data);
  }
};

}  // namespace linea
