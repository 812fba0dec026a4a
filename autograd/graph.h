// The autograd graph. A tensor that takes part in autograd carries a Meta: leaves hold their
// accumulated .grad, op outputs hold the Node that made them. A Node holds its inputs' Metas and
// the backward function written beside the op's forward. Every node has exactly one output.
#pragma once
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "linea/tensor/tensor.h"

namespace linea::autograd {

// Maps the gradient of a node's output to the gradients of its inputs (one per input, in order;
// an undefined Tensor means "no gradient for this input"). Runs with grad mode off, except under
// create_graph, where grad mode is on and the ops it calls record the graph of the gradient; it
// reads the tensors it saved through saved_input / saved_output (function.h), which attach them to
// the graph then, so that graph reaches them.
using BackwardFn = std::function<std::vector<Tensor>(const Tensor& grad_out)>;

struct Node;

// Called by backward once a leaf's .grad is final for that backward: every node that feeds the
// leaf has run (for a leaf reached along several paths, after the last one). What data-parallel
// training hooks to start reducing a gradient while backward is still computing the others.
using GradReadyHook = std::function<void(const Tensor& grad)>;

struct Meta {
  bool requires_grad = false;       // set on leaves by requires_grad_()
  Tensor grad;                      // leaves: the accumulated gradient
  std::shared_ptr<Node> grad_fn;    // op outputs: the node that produced this tensor
  GradReadyHook grad_ready;         // leaves: see set_grad_ready_hook
};

// A storage's version when a node was recorded (Storage::version). Weak: a node never keeps
// memory alive for the check, and a storage nobody holds cannot have been written.
struct SavedVersion {
  std::weak_ptr<Storage> storage;
  uint64_t version;
};

struct Node {
  std::string op;                               // linea's name of the op ("add"), for error messages
  std::vector<std::shared_ptr<Meta>> inputs;    // null where the input needs no gradient
  std::vector<Shape> input_shapes;              // to check what backward returns
  std::vector<DType> input_dtypes;
  // The inputs' storages (and the output's, where the backward keeps it) as they were when the op
  // ran: backward refuses to run once an in-place op has written one of them since (its saved
  // values would be stale). Empty for views and copies, whose backwards read no values.
  std::vector<SavedVersion> versions;
  bool is_view = false;                         // the output shares its input's storage
  std::weak_ptr<Meta> output;                   // the output's Meta (weak: it owns this node)
  BackwardFn backward;                          // released after use unless retain_graph
  // Null when `backward` is made of recorded ops over live tensors, so create_graph can record
  // it. Otherwise (hand-written backwards: custom functions, fused kernels) what to use instead,
  // and create_graph through this node is an error saying so: never a silently constant gradient.
  const char* once_differentiable = nullptr;
  // PyTorch's name of this node ("AddBackward0", "MmBackward0"): what grad_fn()->name() reads
  // in libtorch. Ops without a PyTorch counterpart (custom functions) keep their own name.
  std::string name() const;
};

// Grad mode: while off (NoGradGuard), ops record nothing. Thread-local, like PyTorch's.
bool grad_enabled();
void set_grad_enabled(bool on);

// The engine behind Tensor::backward (autograd/engine.cpp): accumulates into the leaves' .grad.
void run_backward(const Tensor& root, Tensor grad, bool retain_graph, bool create_graph = false);

// The gradients of `outputs` (weighted by grad_outputs: one per output, or none for scalar outputs)
// with respect to `inputs`, returned, not accumulated into any .grad (PyTorch's torch.autograd.grad).
// Inputs may be leaves or op outputs and must require grad. retain_graph defaults to create_graph.
// With create_graph the results carry a graph of their own and can be differentiated again.
// An input the outputs do not depend on is an error naming it, unless allow_unused (then its
// gradient is an undefined Tensor).
std::vector<Tensor> grad(const std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs,
                         const std::vector<Tensor>& grad_outputs = {}, std::optional<bool> retain_graph = std::nullopt,
                         bool create_graph = false, bool allow_unused = false);

// Marks the node that made `out` as differentiable once only (Node::once_differentiable): its
// backward is a kernel or keeps values detached. `instead` says what a user needing create_graph
// should call ("use mhla_composite"), a string literal (nodes are made on every forward: no copy).
// No-op when `out` has no node.
void once_differentiable(const Tensor& out, const char* instead);

// Whether nothing but the caller holds g's tensor and storage, contiguous: a gradient the engine
// hands a backward this way may be overwritten in place (it drops its own copy after the call).
bool exclusive(const Tensor& g);

// Sets (or, with an empty hook, removes) the hook a leaf that requires grad calls when its
// gradient is final in a backward. One hook per leaf; it runs with grad mode off and must not
// change the gradient's shape or dtype.
void set_grad_ready_hook(const Tensor& leaf, GradReadyHook hook);

}  // namespace linea::autograd

namespace linea {

// RAII: no graph is recorded while a NoGradGuard is alive (inference, optimizer updates).
class NoGradGuard {
 public:
  NoGradGuard() : prev_(autograd::grad_enabled()) { autograd::set_grad_enabled(false); }
  ~NoGradGuard() { autograd::set_grad_enabled(prev_); }
  NoGradGuard(const NoGradGuard&) = delete;
  NoGradGuard& operator=(const NoGradGuard&) = delete;

 private:
  bool prev_;
};

}  // namespace linea
