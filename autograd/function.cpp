#include "linea/autograd/function.h"

#include "linea/autograd/anomaly.h"
#include "linea/autograd/ops_reduce.h"
#include "linea/tensor/error.h"

namespace linea::autograd {

bool needs_grad(const std::vector<Tensor>& inputs) {
  if (!grad_enabled()) return false;
  for (const Tensor& t : inputs)
    if (t.defined() && t.requires_grad()) return true;
  return false;
}

namespace {

// The node of `out`. `inputs_read` / `output_read`: whether its backward may read those values,
// whose versions are then checked before it runs (views and copies only read geometry, so a
// write after them is caught by the op that reads the values).
Tensor attach(std::string name, Tensor out, const std::vector<Tensor>& inputs, BackwardFn backward, bool inputs_read,
              bool output_read) {
  if (!needs_grad(inputs)) return out;
  LINEA_CHECK(!out.impl().autograd, "[{}] internal: the output handle is already part of a graph (an op must "
              "record on a fresh tensor, never on one of its inputs)", name);
  auto node = std::make_shared<Node>();
  node->op = std::move(name);
  for (const Tensor& t : inputs) {
    bool g = t.defined() && t.requires_grad();
    if (g && !t.impl().autograd) t.impl().autograd = std::make_shared<Meta>();
    node->inputs.push_back(g ? t.impl().autograd : nullptr);
    node->input_shapes.push_back(t.defined() ? t.shape() : Shape{});
    node->input_dtypes.push_back(t.defined() ? t.dtype() : DType::Float32);
    if (inputs_read && t.defined()) node->versions.push_back({t.storage(), t.storage()->version});
  }
  if (output_read) node->versions.push_back({out.storage(), out.storage()->version});
  node->is_view = inputs.size() == 1 && inputs[0].defined() && inputs[0].storage() == out.storage();
  node->backward = std::move(backward);
  // `out` may be a view sharing an impl with nothing else; give it its own Meta.
  auto meta = std::make_shared<Meta>();
  node->output = meta;
  meta->grad_fn = std::move(node);
  out.impl().autograd = std::move(meta);
  return out;
}

}  // namespace

Tensor record(std::string name, Tensor out, const std::vector<Tensor>& inputs, BackwardFn backward, Saves saves) {
  if (is_anomaly_enabled()) check_forward_finite(name, out, inputs);
  return attach(std::move(name), std::move(out), inputs, std::move(backward), true, saves == Saves::InputsAndOutput);
}

Tensor record_view(std::string name, Tensor out, const std::vector<Tensor>& inputs, BackwardFn backward) {
  return attach(std::move(name), std::move(out), inputs, std::move(backward), false, false);
}

Tensor sum_to(const Tensor& grad, const Shape& shape) {
  if (grad.shape() == shape) return grad;
  const int64_t lead = grad.dim() - static_cast<int64_t>(shape.size());
  std::vector<int64_t> dims;
  for (int64_t d = 0; d < grad.dim(); ++d)
    if (d < lead || (shape[d - lead] == 1 && grad.shape()[d] != 1)) dims.push_back(d);
  Tensor s = sum(grad, dims, /*keepdim=*/true);
  return s.reshape(shape);
}

}  // namespace linea::autograd

namespace linea {

namespace {

// A custom function's backward under create_graph: the gradients of composite(inputs) at its
// inputs, recorded. Each input goes through a node of its own, so an input passed twice (q = k)
// gets the gradient of each use once, not their sum twice.
std::vector<Tensor> composite_backward(const std::vector<Tensor>& kept, const CustomComposite& composite,
                                       const Tensor& g) {
  std::vector<Tensor> in, wrt;
  std::vector<size_t> at;
  for (size_t i = 0; i < kept.size(); ++i) {
    Tensor x = kept[i].defined() ? autograd::saved_input(kept[i], i) : kept[i];
    if (x.defined() && x.requires_grad()) {
      x = autograd::record_view("composite_input", x.detach(), {x},
                                [](const Tensor& gx) { return std::vector<Tensor>{gx}; });
      wrt.push_back(x);
      at.push_back(i);
    }
    in.push_back(x);
  }
  const std::vector<Tensor> d = autograd::grad({composite(in)}, wrt, {g}, /*retain_graph=*/true,
                                               /*create_graph=*/true, /*allow_unused=*/true);
  std::vector<Tensor> out(kept.size());
  for (size_t j = 0; j < at.size(); ++j) out[at[j]] = d[j];
  return out;
}

}  // namespace

Tensor custom_function(std::string name, const std::vector<Tensor>& inputs, const CustomForward& forward,
                       CustomBackward backward, CustomComposite composite) {
  Forward f;
  {
    NoGradGuard guard;  // the forward's inner ops are not part of the graph
    f = forward(inputs);
  }
  LINEA_CHECK(f.output.defined(), "[{}] custom forward returned an undefined output", name);
  std::vector<Tensor> saved, kept;
  bool saves_output = false;
  const bool has_composite = composite != nullptr;  // read before the lambda takes it
  if (autograd::needs_grad(inputs)) {
    for (const Tensor& s : f.saved) {
      saved.push_back(s.defined() ? s.detach() : s);
      saves_output = saves_output || (s.defined() && s.storage() == f.output.storage());
    }
    if (composite)
      for (const Tensor& x : inputs) kept.push_back(x.defined() ? x.detach() : x);
  }
  // record() returns the output as it is when no gradient is needed (after anomaly mode's check).
  Tensor out = autograd::record(
      name, f.output.detach(), inputs,
      [saved = std::move(saved), kept = std::move(kept), backward = std::move(backward),
       composite = std::move(composite)](const Tensor& g) {
        if (composite && autograd::recording_backward()) return composite_backward(kept, composite, g);
        return backward(saved, g);
      },
      saves_output ? autograd::Saves::InputsAndOutput : autograd::Saves::Inputs);
  // Without a composite the saved tensors are detached: its backward cannot be recorded.
  if (!has_composite)
    autograd::once_differentiable(out, "a custom_function's backward is differentiable once; use a form written "
                                       "with linea ops, or pass custom_function a composite");
  return out;
}

}  // namespace linea
