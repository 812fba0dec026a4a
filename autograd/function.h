// How ops join the graph.
//
// Built-in ops call autograd::record() right after computing their output, passing the backward
// lambda; that lambda sits beside the forward in the op's source file (flashlight style).
// Users and fused modules (MHLA) use linea::custom_function: a forward that may use any ops
// (it runs without recording) and a hand-written backward over the tensors it saved.
#pragma once
#include <string>
#include <tuple>
#include <vector>

#include "linea/autograd/graph.h"

#include "linea/tensor/error.h"

namespace linea::autograd {

// True when an op on these inputs must record a node (grad mode on, some input requires grad).
bool needs_grad(const std::vector<Tensor>& inputs);

// Attach `backward` to `out` when needs_grad(inputs); returns `out` either way. In anomaly mode
// (autograd/anomaly.h) `out` is checked first.
// The lambda must not capture `out` itself (that would be a reference cycle): capture
// out.detach() instead, which shares the data but not the graph.
// `saves` says what the backward reads besides the gradient; the engine refuses to run it once an
// in-place op has written one of those tensors (Node::versions). Every input is counted, as if
// read; the output only where the backward keeps it (exp's, sigmoid's, softmax's...).
enum class Saves { Inputs, InputsAndOutput };
Tensor record(std::string name, Tensor out, const std::vector<Tensor>& inputs, BackwardFn backward,
              Saves saves = Saves::Inputs);
// record() for views and same-dtype copies, which cannot make a non-finite value: anomaly mode
// leaves a bad value they pass on to the op that reads it (the matmul called, not its expand).
Tensor record_view(std::string name, Tensor out, const std::vector<Tensor>& inputs, BackwardFn backward);

// A backward keeps the tensors it reads detached (a node must not keep its own output, or a
// tensor an in-place op may later move onto a newer node, alive through its graph). Under
// create_graph these hand them back attached to the graph of the node being run, so the recorded
// backward reaches its inputs and output; otherwise they return the tensor as is (one branch).
// saved_input: `x` (a detached view of input i, same geometry) as that input; saved_output: `y`
// (the output, detached) as the output.
Tensor saved_input(const Tensor& x, size_t i);
Tensor saved_output(const Tensor& y);
// True while create_graph records a node's backward (the engine sets it around each call).
bool recording_backward();

// Reduce a broadcast gradient back to `shape` (sums the leading and the stretched size-1 dims).
// The one place every binary op's backward undoes broadcasting.
Tensor sum_to(const Tensor& grad, const Shape& shape);

}  // namespace linea::autograd

namespace linea {

struct Forward {
  Tensor output;
  std::vector<Tensor> saved;  // what backward needs; stored detached
};
using CustomForward = std::function<Forward(const std::vector<Tensor>& inputs)>;
using CustomBackward = std::function<std::vector<Tensor>(const std::vector<Tensor>& saved, const Tensor& grad_out)>;
// The same output as the forward, from the inputs, in recorded (differentiable) linea ops.
using CustomComposite = std::function<Tensor(const std::vector<Tensor>& inputs)>;

// A differentiable function with a hand-written gradient. `backward` returns one gradient per
// input (undefined for inputs without one); shapes and dtypes are checked against the inputs.
// Without `composite` it is differentiable once: create_graph through it is an error
// (autograd::once_differentiable). With one, the node also keeps its inputs (detached handles:
// no memory where the saved tensors already hold them), and under create_graph its backward is
// the recorded gradient of composite(inputs) instead of `backward`; without create_graph nothing
// else changes.
Tensor custom_function(std::string name, const std::vector<Tensor>& inputs, const CustomForward& forward,
                       CustomBackward backward, CustomComposite composite = nullptr);

// Saved tensors with names. A custom_function whose backward needs many tensors keeps them in a
// struct that lists its fields once, in tensors():
//   struct Saved { Tensor q, k, s; auto tensors() { return std::tie(q, k, s); } };
//   forward:  return Forward{out, pack_saved(Saved{.q = q, .k = k, .s = s})};
//   backward: const auto sv = unpack_saved<Saved>(saved);  ... sv.s ...
template <class S>
std::vector<Tensor> pack_saved(S s) {
  return std::apply([](auto&... t) { return std::vector<Tensor>{t...}; }, s.tensors());
}

template <class S>
S unpack_saved(const std::vector<Tensor>& saved) {
  S s;
  std::apply(
      [&](auto&... t) {
        LINEA_CHECK(saved.size() == sizeof...(t), "[unpack_saved] {} saved tensors for a struct of {}", saved.size(),
                    sizeof...(t));
        size_t i = 0;
        ((t = saved[i++]), ...);
      },
      s.tensors());
  return s;
}

}  // namespace linea
