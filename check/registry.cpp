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
    if (prefix == "all" || c.name == prefix || c.name.starts_with(prefix + " ")) out.push_back(&c);
  return out;
}

namespace {
// The layout's view of a (contiguous) base tensor, detached into a leaf.
Tensor layout_view(const Input& in, const Tensor& base) {
  const int64_t n = base.dim();
  if (in.layout == Layout::Transposed) return base.transpose(-1, -2).detach();
  if (in.layout == Layout::Strided) return base.slice(n - 1, 0, base.size(n - 1), 2).detach();
  return base;
}

// Writes `value` into element e (row-major) of the CPU tensor t, through t's strides.
void set_element(const Tensor& t, int64_t e, double value) {
  const std::vector<int64_t> idx = multi_index(e, t.shape());
  int64_t off = 0;
  for (size_t d = 0; d < idx.size(); ++d) off += idx[d] * t.strides()[d];
  if (t.dtype() == DType::Float64) static_cast<double*>(t.data_ptr())[off] = value;
  else static_cast<float*>(t.data_ptr())[off] = static_cast<float>(value);
}

// One N(0, 1) input in its layout, made on the CPU and then moved, so that every device gets the
// same numbers; the view is taken on the device and detached into a (non-contiguous) leaf.
Tensor make_input(const Input& in, DType dtype, Device device, Generator& gen, const Poke* poke) {
  Shape base = in.shape;
  const size_t n = base.size();
  if (in.layout == Layout::Transposed) {
    LINEA_CHECK(n >= 2, "[linea-check] a transposed input needs 2 dims, got shape {}", shape_str(in.shape));
    std::swap(base[n - 1], base[n - 2]);
  }
  if (in.layout == Layout::Strided) base[n - 1] *= 2;
  Tensor t = randn(base, gen, dtype);
  if (poke) set_element(layout_view(in, t), poke->element, poke->value);
  return layout_view(in, t.to(device));
}
}  // namespace

std::vector<Tensor> make_inputs(const OpCase& c, DType dtype, Device device, uint64_t seed, bool grad,
                                const Poke* poke) {
  Generator gen(seed);
  std::vector<Tensor> xs;
  for (size_t i = 0; i < c.inputs.size(); ++i) {
    Tensor t = make_input(c.inputs[i], dtype, device, gen, poke && poke->input == i ? poke : nullptr);
    if (grad && c.differentiable && c.inputs[i].requires_grad) t.requires_grad_();
    xs.push_back(t);
  }
  return xs;
}

}  // namespace linea::check
