// The backward engine (Tensor::backward lands here through autograd/tensor_methods.cpp).
//
// backward(): sort the nodes reachable from the root topologically (an explicit stack, so long
// graphs cannot overflow the call stack), then visit them once each in reverse order, calling
// each node's backward and summing the gradients that arrive at the same node or leaf.
#include <unordered_map>
#include <unordered_set>

#include "linea/autograd/anomaly.h"
#include "linea/autograd/graph.h"
#include "linea/tensor/backend.h"
#include "linea/tensor/error.h"

namespace linea::autograd {

namespace {
thread_local bool g_grad_enabled = true;

// a + b for two same-shape, same-dtype gradients, straight to the kernel (no graph).
Tensor accumulate(const Tensor& a, const Tensor& b) {
  Tensor out = empty(a.shape(), a.dtype(), a.device());
  backend(a.device()).binary(BinaryOp::Add, a, b, out);
  return out;
}

// A node's pending gradient plus one more (a tensor used twice: the residual stream's x feeds its
// LayerNorm and the skip connection). Added in place when the engine's copy is the only one: a
// fresh output would first be read into cache to be written (2 MB per add on the ViT).
void accumulate_pending(Tensor& pending, const Tensor& g) {
  if (exclusive(pending)) backend(pending.device()).binary(BinaryOp::Add, pending, g, pending);
  else pending = accumulate(pending, g);
}

std::vector<Node*> topo_order(Node* root) {
  std::vector<Node*> order;  // post-order: inputs before the nodes that use them
  std::unordered_set<Node*> seen{root};
  std::vector<std::pair<Node*, size_t>> stack{{root, 0}};
  while (!stack.empty()) {
    auto& [node, next] = stack.back();
    if (next < node->inputs.size()) {
      const auto& m = node->inputs[next++];
      Node* child = m ? m->grad_fn.get() : nullptr;
      if (child && seen.insert(child).second) stack.push_back({child, 0});
    } else {
      order.push_back(node);
      stack.pop_back();
    }
  }
  return {order.rbegin(), order.rend()};
}

void check_grad(const Node& node, size_t i, const Tensor& g) {
  LINEA_CHECK(g.shape() == node.input_shapes[i] && g.dtype() == node.input_dtypes[i],
              "[backward] {} returned a gradient of shape {} {} for input {} of shape {} {}", node.op,
              shape_str(g.shape()), g.dtype(), i, shape_str(node.input_shapes[i]), node.input_dtypes[i]);
}

// PyTorch's check: an in-place op since the forward wrote a tensor this node may have saved.
// linea checks every input and the output (PyTorch only the tensors the backward saved), so it
// also refuses a backward that would not have read the overwritten values.
void check_versions(const Node& node) {
  for (const SavedVersion& v : node.versions) {
    const std::shared_ptr<Storage> s = v.storage.lock();
    LINEA_CHECK(!s || s->version == v.version,
                "[backward] one of the tensors needed for gradient computation has been modified by an in-place "
                "operation: an input or the output of {} is at version {}; expected version {}. Write the update "
                "out of place (x = x + y) or do it after backward",
                node.name(), s ? s->version : 0, v.version);
  }
}

void accumulate_leaf(Meta& leaf, Tensor g) {
  // A gradient that nobody else references can be kept as is; otherwise copy it, so that an
  // in-place change to one .grad (clipping, say) never shows up in another.
  if (leaf.grad.defined()) {
    leaf.grad = accumulate(leaf.grad, g);
  } else if (exclusive(g)) {
    leaf.grad = std::move(g);
  } else {
    leaf.grad = empty(g.shape(), g.dtype(), g.device());
    backend(g.device()).copy(g, leaf.grad);
  }
}

// How many edges of the graph still lead into each hooked leaf: when the count reaches zero,
// no node left to run can add to that leaf's gradient. Empty (and free) when no leaf has a hook.
std::unordered_map<Meta*, int> hooked_leaf_edges(const std::vector<Node*>& order) {
  std::unordered_map<Meta*, int> edges;
  for (Node* node : order)
    for (const auto& m : node->inputs)
      if (m && !m->grad_fn && m->requires_grad && m->grad_ready) ++edges[m.get()];
  return edges;
}

// Called once per node, whether or not a gradient reached it: its edges into hooked leaves are done.
void release_leaf_edges(const Node& node, std::unordered_map<Meta*, int>& edges) {
  if (edges.empty()) return;
  for (const auto& m : node.inputs) {
    auto it = m ? edges.find(m.get()) : edges.end();
    if (it == edges.end() || --it->second > 0) continue;
    edges.erase(it);
    if (m->grad.defined()) m->grad_ready(m->grad);
  }
}
}  // namespace

bool grad_enabled() { return g_grad_enabled; }
void set_grad_enabled(bool on) { g_grad_enabled = on; }

bool exclusive(const Tensor& g) {
  return g.impl_ptr().use_count() == 1 && g.storage().use_count() == 1 && g.is_contiguous();
}

void set_grad_ready_hook(const Tensor& leaf, GradReadyHook hook) {
  LINEA_CHECK(leaf.defined() && leaf.is_leaf() && leaf.requires_grad(),
              "[set_grad_ready_hook] needs a leaf tensor that requires grad (a parameter), got {}",
              !leaf.defined() ? "an undefined tensor" : leaf.is_leaf() ? "one without requires_grad" : "an op output");
  leaf.impl().autograd->grad_ready = std::move(hook);
}

void run_backward(const Tensor& root, Tensor grad, bool retain_graph) {
  Meta& rm = *root.impl().autograd;
  if (!rm.grad_fn) {  // backward on a leaf: its gradient is the seed itself
    accumulate_leaf(rm, std::move(grad));
    if (rm.grad_ready) rm.grad_ready(rm.grad);
    return;
  }
  NoGradGuard guard;
  std::unordered_map<Node*, Tensor> grads{{rm.grad_fn.get(), std::move(grad)}};
  const std::vector<Node*> order = topo_order(rm.grad_fn.get());
  const bool anomaly = is_anomaly_enabled();
  std::unordered_map<Meta*, int> leaf_edges = hooked_leaf_edges(order);
  for (Node* node : order) {
    auto it = grads.find(node);
    if (it == grads.end()) {
      release_leaf_edges(*node, leaf_edges);
      continue;
    }
    Tensor g = std::move(it->second);
    grads.erase(it);
    LINEA_CHECK(node->backward != nullptr,
                "[backward] {}: the graph was already freed by an earlier backward; pass retain_graph=true to "
                "the first backward to run backward through it twice",
                node->op);
    check_versions(*node);
    std::vector<Tensor> gins;
    if (anomaly) {
      AnomalyBackwardScope scope(node->op);
      gins = node->backward(g);
    } else {
      gins = node->backward(g);
    }
    LINEA_CHECK(gins.size() == node->inputs.size(), "[backward] {} returned {} gradients for {} inputs", node->op,
                gins.size(), node->inputs.size());
    for (size_t i = 0; i < gins.size(); ++i) {
      const auto& meta = node->inputs[i];
      if (!meta || !gins[i].defined()) continue;
      check_grad(*node, i, gins[i]);
      if (anomaly) check_backward_finite(node->op, i, gins[i], g);
      if (meta->grad_fn) {
        auto [slot, fresh] = grads.try_emplace(meta->grad_fn.get(), gins[i]);
        if (!fresh) accumulate_pending(slot->second, gins[i]);
      } else if (meta->requires_grad) {
        Tensor gi = std::move(gins[i]);
        accumulate_leaf(*meta, std::move(gi));
      }
    }
    if (!retain_graph) node->backward = nullptr;  // frees the tensors the node saved
    release_leaf_edges(*node, leaf_edges);
  }
}

}  // namespace linea::autograd
