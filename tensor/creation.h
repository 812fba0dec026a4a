// Creating tensors: constants, ranges, random numbers, and wrapping host data.
#pragma once
#include <functional>
#include <vector>

#include "linea/tensor/random.h"
#include "linea/tensor/tensor.h"

namespace linea {

// dtype + device of a new tensor; converts from either, so `zeros({2, 3}, float64)` works.
struct Options {
  DType dtype = DType::Float32;
  Device device = Device::cpu();
  Options() = default;
  Options(DType t) : dtype(t) {}
  Options(Device d) : device(d) {}
  Options(DType t, Device d) : dtype(t), device(d) {}
};

Tensor zeros(Shape shape, Options opts = {});
Tensor ones(Shape shape, Options opts = {});
Tensor full(Shape shape, double value, Options opts = {});
Tensor scalar(double value, Options opts = {});  // a 0-d tensor
Tensor zeros_like(const Tensor& t);
Tensor ones_like(const Tensor& t);
Tensor full_like(const Tensor& t, double value);
Tensor empty_like(const Tensor& t);

Tensor arange(int64_t end, Options opts = DType::Int64);                        // 0, 1, ..., end-1
Tensor arange(double start, double end, double step, Options opts = {});        // [start, end)
Tensor linspace(double start, double end, int64_t steps, Options opts = {});    // both ends included
Tensor eye(int64_t n, Options opts = {});

Tensor randn(Shape shape, Generator& gen, Options opts = {});
Tensor randn(Shape shape, Options opts = {});                                   // default_generator()
Tensor rand(Shape shape, Generator& gen, Options opts = {});                    // uniform [0, 1)
Tensor rand(Shape shape, Options opts = {});
Tensor randint(int64_t low, int64_t high, Shape shape, Generator& gen, Options opts = DType::Int64);  // [low, high)
Tensor randint(int64_t low, int64_t high, Shape shape, Options opts = DType::Int64);

// Bool [rows, cols] masks: true where col <= row + k (tril) or col >= row + k (triu).
Tensor tril_mask(int64_t rows, int64_t cols, int64_t k = 0, Device device = Device::cpu());
Tensor triu_mask(int64_t rows, int64_t cols, int64_t k = 0, Device device = Device::cpu());

// Copies host data into a new tensor of the given shape (the shape defaults to 1-d).
template <class T>
Tensor from_vector(const std::vector<T>& data, Shape shape = {}, Device device = Device::cpu());
// Wraps caller-owned CPU memory without copying; `deleter` (optional) runs when the last view
// goes away. The memory must outlive the tensor when no deleter is given.
Tensor from_blob(void* data, Shape shape, DType dtype, std::function<void(void*)> deleter = {});

extern template Tensor from_vector<float>(const std::vector<float>&, Shape, Device);
extern template Tensor from_vector<double>(const std::vector<double>&, Shape, Device);
extern template Tensor from_vector<int64_t>(const std::vector<int64_t>&, Shape, Device);
extern template Tensor from_vector<uint8_t>(const std::vector<uint8_t>&, Shape, Device);

}  // namespace linea
