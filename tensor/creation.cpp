#include "linea/tensor/creation.h"

#include <cmath>
#include <memory>

#include "linea/tensor/backend.h"
#include "linea/tensor/error.h"

namespace linea {

namespace {
// Fill a host buffer with f(i) in the tensor's dtype, then upload it; random and range
// creation run on the host so every device gets the same numbers for the same seed.
template <class F>
Tensor from_host_fn(Shape shape, Options opts, F&& f) {
  Tensor t = empty(std::move(shape), opts.dtype, opts.device);
  const int64_t n = t.numel();
  dispatch(opts.dtype, [&]<class T>() {
    auto host = std::make_unique<T[]>(static_cast<size_t>(n));  // not std::vector: vector<bool> has no data()
    for (int64_t i = 0; i < n; ++i) host[i] = static_cast<T>(f(i));
    backend(opts.device).copy_from_host(*t.storage(), 0, host.get(), n * sizeof(T));
  });
  return t;
}
}  // namespace

Tensor full(Shape shape, double value, Options opts) {
  Tensor t = empty(std::move(shape), opts.dtype, opts.device);
  backend(opts.device).fill(t, value);
  return t;
}
Tensor zeros(Shape shape, Options opts) { return full(std::move(shape), 0.0, opts); }
Tensor ones(Shape shape, Options opts) { return full(std::move(shape), 1.0, opts); }
Tensor scalar(double value, Options opts) { return full({}, value, opts); }
Tensor zeros_like(const Tensor& t) { return zeros(t.shape(), {t.dtype(), t.device()}); }
Tensor ones_like(const Tensor& t) { return ones(t.shape(), {t.dtype(), t.device()}); }
Tensor full_like(const Tensor& t, double v) { return full(t.shape(), v, {t.dtype(), t.device()}); }
Tensor empty_like(const Tensor& t) { return empty(t.shape(), t.dtype(), t.device()); }

Tensor arange(int64_t end, Options opts) { return arange(0.0, static_cast<double>(end), 1.0, opts); }

Tensor arange(double start, double end, double step, Options opts) {
  LINEA_CHECK(step != 0, "[arange] step must be non-zero");
  LINEA_CHECK(std::isfinite(start) && std::isfinite(end) && std::isfinite(step), "[arange] start/end/step must be finite");
  int64_t n = std::max<int64_t>(0, static_cast<int64_t>(std::ceil((end - start) / step)));
  return from_host_fn({n}, opts, [&](int64_t i) { return start + static_cast<double>(i) * step; });
}

Tensor linspace(double start, double end, int64_t steps, Options opts) {
  LINEA_CHECK(steps >= 0, "[linspace] steps must be >= 0, got {}", steps);
  double h = steps > 1 ? (end - start) / static_cast<double>(steps - 1) : 0.0;
  // The last value is `end` exactly, not start + (steps - 1) * h; one step gives just `start`.
  return from_host_fn({steps}, opts, [&](int64_t i) { return i == steps - 1 && i > 0 ? end : start + h * i; });
}

Tensor eye(int64_t n, Options opts) {
  return from_host_fn({n, n}, opts, [&](int64_t i) { return i / n == i % n ? 1.0 : 0.0; });
}

Tensor randn(Shape shape, Generator& gen, Options opts) {
  dispatch_floating(opts.dtype, "randn", []<class T>() {});
  return from_host_fn(std::move(shape), opts, [&](int64_t) { return gen.normal(); });
}
Tensor randn(Shape shape, Options opts) { return randn(std::move(shape), default_generator(), opts); }

Tensor rand(Shape shape, Generator& gen, Options opts) {
  dispatch_floating(opts.dtype, "rand", []<class T>() {});
  return from_host_fn(std::move(shape), opts, [&](int64_t) { return gen.uniform(); });
}
Tensor rand(Shape shape, Options opts) { return rand(std::move(shape), default_generator(), opts); }

Tensor randint(int64_t low, int64_t high, Shape shape, Generator& gen, Options opts) {
  LINEA_CHECK(high > low, "[randint] empty range [{}, {})", low, high);
  const uint64_t range = static_cast<uint64_t>(high - low);
  return from_host_fn(std::move(shape), opts, [&](int64_t) {
    return static_cast<double>(low + static_cast<int64_t>(gen.next_u64() % range));
  });
}
Tensor randint(int64_t low, int64_t high, Shape shape, Options opts) {
  return randint(low, high, std::move(shape), default_generator(), opts);
}

Tensor tril_mask(int64_t rows, int64_t cols, int64_t k, Device device) {
  return from_host_fn({rows, cols}, {DType::Bool, device}, [&](int64_t i) { return i % cols <= i / cols + k; });
}
Tensor triu_mask(int64_t rows, int64_t cols, int64_t k, Device device) {
  return from_host_fn({rows, cols}, {DType::Bool, device}, [&](int64_t i) { return i % cols >= i / cols + k; });
}

template <class T>
Tensor from_vector(const std::vector<T>& data, Shape shape, Device device) {
  if (shape.empty() && data.size() != 1) shape = {static_cast<int64_t>(data.size())};
  LINEA_CHECK(numel(shape) == static_cast<int64_t>(data.size()), "[from_vector] {} values do not fill shape {}",
              data.size(), shape_str(shape));
  Tensor t = empty(std::move(shape), dtype_v<T>, device);
  backend(device).copy_from_host(*t.storage(), 0, data.data(), data.size() * sizeof(T));
  return t;
}
template Tensor from_vector<float>(const std::vector<float>&, Shape, Device);
template Tensor from_vector<double>(const std::vector<double>&, Shape, Device);
template Tensor from_vector<int64_t>(const std::vector<int64_t>&, Shape, Device);
template Tensor from_vector<uint8_t>(const std::vector<uint8_t>&, Shape, Device);

Tensor from_blob(void* data, Shape shape, DType dtype, std::function<void(void*)> deleter) {
  const std::optional<int64_t> nbytes = checked_nbytes(shape, itemsize(dtype));
  LINEA_CHECK(nbytes.has_value(), "[from_blob] shape {} of {} is too large: its size in bytes overflows int64",
              shape_str(shape), dtype);
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = std::make_shared<Storage>(data, static_cast<size_t>(*nbytes), Device::cpu(), std::move(deleter));
  impl->strides = contiguous_strides(shape);
  impl->shape = std::move(shape);
  impl->dtype = dtype;
  return Tensor(std::move(impl));
}

}  // namespace linea
