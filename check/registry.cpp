#include "registry.h"

#include <set>

#include "linea/tensor/error.h"

namespace linea::check {

double compare_atol(Tol t, DType dtype) {
  if (dtype == DType::Float64) return 1e-10;
  return t == Tol::Elementwise ? 1e-6 : 1e-5;
}
double compare_rtol(Tol t, DType dtype) {
  if (dtype == DType::Float64) return 1e-10;
  return t == Tol::Elementwise ? 1e-5 : 1e-4;
}

const std::vector<OpCase>& registry() {
  static const std::vector<OpCase> all = [] {
    std::vector<OpCase> c;
    for (auto part : {elementwise_cases, reduce_cases, shape_cases, nn_cases})
      for (OpCase& oc : part()) c.push_back(std::move(oc));
    std::set<std::string> names;
    for (const OpCase& oc : c) {
      LINEA_CHECK(names.insert(oc.name).second, "[linea-check] op case '{}' is registered twice", oc.name);
      for (const Input& in : oc.inputs)
        LINEA_CHECK(in.layout == Layout::Contiguous || !in.shape.empty(),
                    "[linea-check] op case '{}': a 0-d input cannot be transposed or strided", oc.name);
    }
    return c;
  }();
  return all;
}

std::vector<const OpCase*> select_cases(const std::string& prefix) {
  std::vector<const OpCase*> out;
  for (const OpCase& c : registry())
    if (prefix.empty() || prefix == "all" || c.name == prefix || c.name.starts_with(prefix + " ")) out.push_back(&c);
  return out;
}

namespace {
// One N(0, 1) input in its layout, made on the CPU and then moved, so that every device gets the
// same numbers; the view is taken on the device and detached into a (non-contiguous) leaf.
Tensor make_input(const Input& in, DType dtype, Device device, Generator& gen) {
  Shape base = in.shape;
  const size_t n = base.size();
  if (in.layout == Layout::Transposed) {
    LINEA_CHECK(n >= 2, "[linea-check] a transposed input needs 2 dims, got shape {}", shape_str(in.shape));
    std::swap(base[n - 1], base[n - 2]);
  }
  if (in.layout == Layout::Strided) base[n - 1] *= 2;
  Tensor t = randn(base, gen, dtype).to(device);
  if (in.layout == Layout::Transposed) t = t.transpose(-1, -2).detach();
  if (in.layout == Layout::Strided) t = t.slice(static_cast<int64_t>(n) - 1, 0, base[n - 1], 2).detach();
  return t;
}
}  // namespace

std::vector<Tensor> make_inputs(const OpCase& c, DType dtype, Device device, uint64_t seed, bool grad) {
  Generator gen(seed);
  std::vector<Tensor> xs;
  for (const Input& in : c.inputs) {
    Tensor t = make_input(in, dtype, device, gen);
    if (grad && c.differentiable && in.requires_grad) t.requires_grad_();
    xs.push_back(t);
  }
  return xs;
}

}  // namespace linea::check
