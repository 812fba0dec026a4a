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

Tensor custom_function(std::string name, const std::vector<Tensor>& inputs, const CustomForward& forward,
                       CustomBackward backward) {
  Forward f;
  {
    NoGradGuard guard;  // the forward's inner ops are not part of the graph
    f = forward(inputs);
  }
  LINEA_CHECK(f.output.defined(), "[{}] custom forward returned an undefined output", name);
  std::vector<Tensor> saved;
  bool saves_output = false;
  if (autograd::needs_grad(inputs))
    for (const Tensor& s : f.saved) {
      saved.push_back(s.defined() ? s.detach() : s);
      saves_output = saves_output || (s.defined() && s.storage() == f.output.storage());
    }
  // record() returns the output as it is when no gradient is needed (after anomaly mode's check).
  Tensor out = autograd::record(name, f.output.detach(), inputs,
                                [saved = std::move(saved), backward = std::move(backward)](const Tensor& g) {
                                  return backward(saved, g);
                                },
                                saves_output ? autograd::Saves::InputsAndOutput : autograd::Saves::Inputs);
  // The saved tensors are detached: a backward over them cannot be recorded for create_graph.
  autograd::once_differentiable(out, "a custom_function's backward is differentiable once; use a form written "
                                     "with linea ops (mhla_composite for MHLA, softmax(q kᵀ / √d) v for softmax "
                                     "attention, log_softmax for cross_entropy)");
  return out;
}

}  // namespace linea
