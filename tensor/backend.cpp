#include "linea/tensor/backend.h"

#include <array>

#include "linea/tensor/error.h"
#include "linea/tensor/kernel_checks.h"
#include "linea/tensor/profiler.h"
#include "linea/tensor/profiling_backend.h"

namespace linea {

namespace {
// A function-local static: built on first use, so a registration from another file's static
// initializer finds it constructed, whatever the order of initialisation.
std::array<BackendProvider, 2>& providers() {
  static std::array<BackendProvider, 2> p{};
  return p;
}
}  // namespace

void register_backend(DeviceType type, BackendProvider provider) { providers()[static_cast<int>(type)] = provider; }

namespace {
Backend& device_backend(Device device) {
  if (device.is_cpu()) return cpu::instance();
  LINEA_CHECK(device.index == 0, "[backend] only one GPU (cuda:0) is supported, got {}", device);
  const BackendProvider provider = providers()[static_cast<int>(device.type)];
  Backend* b = provider != nullptr ? provider() : nullptr;
  LINEA_CHECK(b != nullptr, "[backend] no backend for device {}: {}", device,
              device.is_cuda() ? "this build or machine has no CUDA support (see linea::cuda::is_available())"
                               : "no backend registered for this device type");
  return *b;
}
}  // namespace

// While linea::Profiler records, every kernel goes through its timing wrapper (profiler.h).
Backend& backend(Device device) {
  if (Profiler::active()) [[unlikely]] return profiling_backend(device_backend(device), device);
  return device_backend(device);
}

void Backend::linear_weight_grad(const Tensor& g, const Tensor& x, const Tensor& dw, const Tensor& db) {
  const auto [rows, out, in] = kernel_checks::linear_weight_grad(g, x, dw, db);
  gemm(g.t().unsqueeze(0), x.unsqueeze(0), dw.unsqueeze(0), Tensor(), Tensor());
  if (db.defined()) reduce(ReduceOp::Sum, g, db, 1, rows, out);
}

void Backend::activation_with_grad(UnaryOp op, const Tensor& x, const Tensor& y, const Tensor& dydx) {
  kernel_checks::activation_with_grad(op, x, y, dydx);
  unary(op, x, y);
  fill(dydx, 1.0);
  binary(activation_backward_op(op), dydx, x, dydx);  // elementwise, so dydx may be read as it is written
}

void Backend::mhla_forward(const Tensor&, const Tensor&, const Tensor&, const Tensor&, const MHLAArgs&, const Tensor&,
                           const Tensor&, const Tensor&, const Tensor&) {
  throw Error("[mhla] this device has no fused MHLA kernels (has_fused_mhla() is false)");
}

void Backend::mhla_backward(const Tensor&, const Tensor&, const Tensor&, const Tensor&, const MHLAArgs&,
                            const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&,
                            const Tensor&, const Tensor&, const Tensor&) {
  throw Error("[mhla] this device has no fused MHLA kernels (has_fused_mhla() is false)");
}

}  // namespace linea
