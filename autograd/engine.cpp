// The backward engine (Tensor::backward lands here through autograd/tensor_methods.cpp).
//
// backward(): sort the nodes reachable from the root topologically (an explicit stack, so long
// graphs cannot overflow the call stack), then visit them once each in reverse order, calling
// each node's backward and summing the gradients that arrive at the same node or leaf.
// autograd::grad() runs the same loop from several roots, over the nodes that lead to its
// inputs, and returns their gradients instead of accumulating them. Under create_graph grad mode
// stays on, so every backward (and every sum of two gradients) is recorded like a forward op.
#include <span>
#include <unordered_map>
#include <unordered_set>

#include "linea/autograd/anomaly.h"
#include "linea/autograd/function.h"
#include "linea/autograd/graph.h"
#include "linea/autograd/ops_elementwise.h"
#include "linea/tensor/creation.h"
#include "linea/tensor/backend.h"
#include "linea/tensor/error.h"

namespace linea::autograd {

namespace {
thread_local bool g_grad_enabled = true;
thread_local const Node* g_recording = nullptr;  // the node whose backward create_graph is recording

// Attaches `meta` to a new handle on t's data: ops on it record with that tensor's graph.
Tensor attached(const Tensor& t, std::shared_ptr<Meta> meta) {
  if (!meta) return t;
  Tensor a = t.detach();
  a.impl().autograd = std::move(meta);
  return a;
}

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

// Post-order from each root (an explicit stack: long graphs cannot overflow the call stack), reversed.
std::vector<Node*> topo_order(std::span<Node* const> roots) {
  std::vector<Node*> order;  // post-order: inputs before the nodes that use them
  std::unordered_set<Node*> seen;
  std::vector<std::pair<Node*, size_t>> stack;
  for (Node* root : roots) {
    if (!seen.insert(root).second) continue;
    stack.push_back({root, 0});
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

void accumulate_leaf(Meta& leaf, Tensor g, bool create_graph) {
  // Under create_graph .grad keeps the gradient's graph: the sum is recorded, nothing is copied.
  if (create_graph) {
    leaf.grad = leaf.grad.defined() ? leaf.grad + g : std::move(g);
    return;
  }
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

Tensor saved_input(const Tensor& x, size_t i) {
  if (!g_recording) return x;
  LINEA_CHECK(i < g_recording->inputs.size(), "[{}] internal: saved_input({}) of a node with {} inputs",
              g_recording->op, i, g_recording->inputs.size());
  return attached(x, g_recording->inputs[i]);
}

Tensor saved_output(const Tensor& y) { return g_recording ? attached(y, g_recording->output.lock()) : y; }

bool recording_backward() { return g_recording != nullptr; }

bool exclusive(const Tensor& g) {
  return g.impl_ptr().use_count() == 1 && g.storage().use_count() == 1 && g.is_contiguous();
}

void set_grad_ready_hook(const Tensor& leaf, GradReadyHook hook) {
  LINEA_CHECK(leaf.defined() && leaf.is_leaf() && leaf.requires_grad(),
              "[set_grad_ready_hook] needs a leaf tensor that requires grad (a parameter), got {}",
              !leaf.defined() ? "an undefined tensor" : leaf.is_leaf() ? "one without requires_grad" : "an op output");
  leaf.impl().autograd->grad_ready = std::move(hook);
}

namespace {

// What autograd::grad asks of a backward: the gradients reaching some tensors, returned instead
// of accumulated into any .grad, and only the nodes on a path to those tensors run.
struct Capture {
  std::unordered_map<const Meta*, size_t> leaf_slot;  // a leaf input's Meta -> its result
  std::unordered_map<const Node*, size_t> node_slot;  // an op-output input's node -> its result
  std::vector<Tensor> grads;                          // one per distinct input
  std::unordered_set<const Node*> needed;             // nodes with a path to an input
};

void add_into(Tensor& slot, const Tensor& g, bool create_graph) {
  if (!slot.defined()) slot = g;
  else slot = create_graph ? slot + g : accumulate(slot, g);
}

// The engine's loop over `order`, visiting each node once, with the root gradients in `grads`.
// Grad mode is on exactly under create_graph, so each backward records its ops only then.
void execute(const std::vector<Node*>& order, std::unordered_map<Node*, Tensor> grads, bool retain_graph,
             bool create_graph, Capture* cap) {
  struct Restore {  // grad mode and the recorded node as they were, however the loop ends
    bool mode;
    const Node* recording;
    ~Restore() { set_grad_enabled(mode), g_recording = recording; }
  } restore{grad_enabled(), g_recording};
  set_grad_enabled(create_graph);
  const bool anomaly = is_anomaly_enabled();
  std::unordered_map<Meta*, int> leaf_edges;
  if (!cap) leaf_edges = hooked_leaf_edges(order);
  for (Node* node : order) {
    auto it = grads.find(node);
    if (cap) {
      if (auto s = cap->node_slot.find(node); s != cap->node_slot.end() && it != grads.end())
        cap->grads[s->second] = it->second;
      if (!cap->needed.contains(node)) continue;
    }
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
    LINEA_CHECK(!create_graph || !node->once_differentiable,
                "[autograd::grad] create_graph through {}: not supported yet (its backward cannot be recorded); {}",
                node->op, node->once_differentiable);
    check_versions(*node);
    std::vector<Tensor> gins;
    if (create_graph) g_recording = node;
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
      // A gradient is linear in g: one that does not depend on a recorded g was made by a kernel
      // the graph cannot see, and differentiating it again would give silently wrong numbers.
      LINEA_CHECK(!create_graph || !g.requires_grad() || gins[i].requires_grad(),
                  "[autograd::grad] create_graph through {}: not supported yet (its backward calls a kernel that "
                  "is not recorded)", node->op);
      if (anomaly) check_backward_finite(node->op, i, gins[i], g);
      if (meta->grad_fn) {
        auto [slot, fresh] = grads.try_emplace(meta->grad_fn.get(), gins[i]);
        if (!fresh) {
          if (create_graph) slot->second = slot->second + gins[i];
          else accumulate_pending(slot->second, gins[i]);
        }
      } else if (cap) {
        if (auto s = cap->leaf_slot.find(meta.get()); s != cap->leaf_slot.end())
          add_into(cap->grads[s->second], gins[i], create_graph);
      } else if (meta->requires_grad) {
        Tensor gi = std::move(gins[i]);
        accumulate_leaf(*meta, std::move(gi), create_graph);
      }
    }
    if (!retain_graph) node->backward = nullptr;  // frees the tensors the node saved
    release_leaf_edges(*node, leaf_edges);
  }
}

}  // namespace

void run_backward(const Tensor& root, Tensor grad, bool retain_graph, bool create_graph) {
  Meta& rm = *root.impl().autograd;
  if (!rm.grad_fn) {  // backward on a leaf: its gradient is the seed itself
    accumulate_leaf(rm, std::move(grad), create_graph);
    if (rm.grad_ready) rm.grad_ready(rm.grad);
    return;
  }
  Node* const root_node = rm.grad_fn.get();
  // Built in its own statement: the initializer list's copy of the seed is gone before the loop,
  // so a backward may still find the seed exclusive and write into it.
  std::unordered_map<Node*, Tensor> grads{{root_node, std::move(grad)}};
  execute(topo_order(std::span(&root_node, 1)), std::move(grads), retain_graph, create_graph, nullptr);
}

std::vector<Tensor> grad(const std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs,
                         const std::vector<Tensor>& grad_outputs, std::optional<bool> retain_graph, bool create_graph,
                         bool allow_unused) {
  LINEA_CHECK(!outputs.empty() && !inputs.empty(), "[autograd::grad] needs at least one output and one input, got "
              "{} and {}", outputs.size(), inputs.size());
  LINEA_CHECK(grad_outputs.empty() || grad_outputs.size() == outputs.size(),
              "[autograd::grad] {} grad_outputs for {} outputs: pass one per output, or none for scalar outputs",
              grad_outputs.size(), outputs.size());
  Capture cap;
  std::vector<size_t> slot_of(inputs.size());  // an input passed twice shares one result
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Tensor& x = inputs[i];
    LINEA_CHECK(x.defined() && x.requires_grad(), "[autograd::grad] input {} ({}) does not require grad: only a "
                "leaf with requires_grad_() or an op output made from one has a gradient", i,
                x.defined() ? "shape " + shape_str(x.shape()) : std::string("undefined"));
    const Meta* m = x.impl().autograd.get();
    const size_t next = cap.grads.size();
    slot_of[i] = m->grad_fn ? cap.node_slot.try_emplace(m->grad_fn.get(), next).first->second
                            : cap.leaf_slot.try_emplace(m, next).first->second;
    if (slot_of[i] == next) cap.grads.emplace_back();
  }
  std::vector<Node*> roots;
  std::unordered_map<Node*, Tensor> seeds;
  for (size_t j = 0; j < outputs.size(); ++j) {
    const Tensor& y = outputs[j];
    LINEA_CHECK(y.defined() && y.requires_grad(), "[autograd::grad] output {} does not require grad: it does not "
                "depend on any input that requires grad", j);
    Tensor g = grad_outputs.empty() ? Tensor() : grad_outputs[j];
    if (!g.defined()) {
      LINEA_CHECK(y.numel() == 1, "[autograd::grad] output {} has shape {}: a non-scalar output needs its "
                  "grad_output", j, shape_str(y.shape()));
      g = ones(y.shape(), {y.dtype(), y.device()});
    }
    LINEA_CHECK(g.shape() == y.shape() && g.dtype() == y.dtype() && g.device() == y.device(),
                "[autograd::grad] grad_output {} is {} {} on {}; output {} is {} {} on {}", j, shape_str(g.shape()),
                g.dtype(), g.device(), j, shape_str(y.shape()), y.dtype(), y.device());
    const Meta* m = y.impl().autograd.get();
    if (!m->grad_fn) {  // a leaf output: its gradient with respect to itself is the seed
      if (auto s = cap.leaf_slot.find(m); s != cap.leaf_slot.end()) add_into(cap.grads[s->second], g, create_graph);
      continue;
    }
    auto [slot, fresh] = seeds.try_emplace(m->grad_fn.get(), g);
    if (fresh) roots.push_back(m->grad_fn.get());
    else add_into(slot->second, g, create_graph);
  }
  const std::vector<Node*> order = topo_order(roots);
  // Children come after their users in `order`: walking it backwards sees every child first.
  for (auto n = order.rbegin(); n != order.rend(); ++n)
    for (const auto& m : (*n)->inputs)
      if (m && (cap.leaf_slot.contains(m.get()) || cap.node_slot.contains(m->grad_fn.get()) ||
                cap.needed.contains(m->grad_fn.get()))) {
        cap.needed.insert(*n);
        break;
      }
  execute(order, std::move(seeds), retain_graph.value_or(create_graph), create_graph, &cap);
  std::vector<Tensor> out;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Tensor& g = cap.grads[slot_of[i]];
    LINEA_CHECK(g.defined() || allow_unused, "[autograd::grad] input {} (shape {}) was not used to compute the "
                "{} output(s): no path of the graph leads from them to it; pass allow_unused=true to get an "
                "undefined gradient for it", i, shape_str(inputs[i].shape()), outputs.size());
    out.push_back(g);
  }
  return out;
}

void once_differentiable(const Tensor& out, const char* instead) {
  if (out.defined() && out.impl().autograd && out.impl().autograd->grad_fn)
    out.impl().autograd->grad_fn->once_differentiable = instead;
}

}  // namespace linea::autograd
