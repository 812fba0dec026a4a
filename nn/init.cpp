#include "linea/nn/init.h"

#include <cmath>
#include <vector>

#include "linea/autograd/graph.h"
#include "linea/tensor/backend.h"
#include "linea/tensor/creation.h"
#include "linea/tensor/error.h"

namespace linea::nn {

namespace {

// Fills t (any device, any strides) with draw() in row-major order, through a host buffer.
template <class F>
Tensor fill_with(std::string_view op, Tensor t, F&& draw) {
  LINEA_CHECK(t.defined() && is_floating(t.dtype()), "[{}] expected a floating tensor, got {}", op,
              t.defined() ? dtype_name(t.dtype()) : "an undefined tensor");
  NoGradGuard guard;
  Tensor host = empty(t.shape(), t.dtype());
  dispatch_floating(t.dtype(), op, [&]<class T>() {
    T* p = host.data<T>();
    for (int64_t i = 0; i < host.numel(); ++i) p[i] = static_cast<T>(draw());
  });
  Tensor dst = t.detach();
  if (dst.device() == host.device()) {
    backend(dst.device()).copy(host, dst);
  } else {
    Tensor staged = host.to(dst.device());  // then a same-device copy, which handles dst's strides
    backend(dst.device()).copy(staged, dst);
  }
  return t;
}

// Swaps t's data for c's (contiguous) under the existing TensorImpl: every handle on t follows.
void replace_data(Tensor t, const Tensor& c) {
  t.zero_grad();
  TensorImpl& impl = t.impl();
  impl.storage = c.storage();
  impl.strides = c.strides();
  impl.offset = c.offset();
  impl.dtype = c.dtype();
}

}  // namespace

Tensor zeros_(Tensor t) { return constant_(std::move(t), 0); }
Tensor ones_(Tensor t) { return constant_(std::move(t), 1); }

Tensor constant_(Tensor t, double value) {
  LINEA_CHECK(t.defined(), "[constant_] the tensor is undefined");
  NoGradGuard guard;
  backend(t.device()).fill(t.detach(), value);
  return t;
}

Tensor uniform_(Tensor t, double low, double high, Generator& gen) {
  LINEA_CHECK(low <= high, "[uniform_] low {} must not exceed high {}", low, high);
  return fill_with("uniform_", std::move(t), [&] { return low + (high - low) * gen.uniform(); });
}

Tensor normal_(Tensor t, double mean, double std, Generator& gen) {
  LINEA_CHECK(std >= 0, "[normal_] std must be >= 0, got {}", std);
  return fill_with("normal_", std::move(t), [&] { return mean + std * gen.normal(); });
}

Tensor trunc_normal_(Tensor t, double std, std::optional<double> a, std::optional<double> b, Generator& gen) {
  const double lo = a.value_or(-2 * std), hi = b.value_or(2 * std);
  LINEA_CHECK(std > 0 && lo < hi, "[trunc_normal_] need std > 0 and a < b, got std {}, [{}, {}]", std, lo, hi);
  // Rejection sampling needs the interval to hold a fair share of the mass to terminate quickly.
  const double mass = 0.5 * (std::erfc(-hi / (std * std::sqrt(2.0))) - std::erfc(-lo / (std * std::sqrt(2.0))));
  LINEA_CHECK(mass > 1e-3, "[trunc_normal_] [{}, {}] holds only {:.2g} of N(0, {}²): too far in the tail", lo, hi,
              mass, std);
  return fill_with("trunc_normal_", std::move(t), [&] {
    for (;;) {
      const double v = std * gen.normal();
      if (v >= lo && v <= hi) return v;
    }
  });
}

Tensor xavier_uniform_(Tensor t, double gain, Generator& gen) {
  LINEA_CHECK(t.defined() && t.dim() >= 2, "[xavier_uniform_] needs a tensor with at least 2 dims, got {}",
              t.defined() ? shape_str(t.shape()) : "an undefined tensor");
  const int64_t receptive = t.numel() / std::max<int64_t>(1, t.size(0) * t.size(1));
  const double fan_in = static_cast<double>(t.size(1) * receptive);
  const double fan_out = static_cast<double>(t.size(0) * receptive);
  const double bound = gain * std::sqrt(6.0 / (fan_in + fan_out));
  return uniform_(std::move(t), -bound, bound, gen);
}

void to(Module& m, DType dtype) {
  LINEA_CHECK(is_floating(dtype), "[nn::to] target dtype must be floating, got {}", dtype);
  NoGradGuard guard;
  auto convert = [&](Tensor t) {
    if (is_floating(t.dtype()) && t.dtype() != dtype) replace_data(t, t.detach().to(dtype).contiguous());
  };
  for (auto& [_, t] : m.named_parameters()) convert(t);
  for (auto& [_, t] : m.named_buffers()) convert(t);
}

void to(Module& m, Device device) {
  NoGradGuard guard;
  backend(device);  // a clear error up front (e.g. no GPU) rather than from the first parameter
  auto move = [&](Tensor t) {
    if (t.device() != device) replace_data(t, t.detach().to(device));
  };
  for (auto& [_, t] : m.named_parameters()) move(t);
  for (auto& [_, t] : m.named_buffers()) move(t);
}

}  // namespace linea::nn
