// The autograd graph. A tensor that takes part in autograd carries a Meta: leaves hold their
// accumulated .grad, op outputs hold the Node that made them. A Node holds its inputs' Metas and
// the backward function written beside the op's forward. Every node has exactly one output.
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "linea/tensor/tensor.h"

namespace linea::autograd {

// Maps the gradient of a node's output to the gradients of its inputs (one per input, in order;
// an undefined Tensor means "no gradient for this input"). Runs with grad mode off.
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
  BackwardFn backward;                          // released after use unless retain_graph
  // PyTorch's name of this node ("AddBackward0", "MmBackward0"): what grad_fn()->name() reads
  // in libtorch. Ops without a PyTorch counterpart (custom functions) keep their own name.
  std::string name() const;
};

// Grad mode: while off (NoGradGuard), ops record nothing. Thread-local, like PyTorch's.
bool grad_enabled();
void set_grad_enabled(bool on);

// The engine behind Tensor::backward (autograd/engine.cpp).
void run_backward(const Tensor& root, Tensor grad, bool retain_graph);

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
