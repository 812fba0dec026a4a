// Anomaly mode, PyTorch's torch.autograd.detect_anomaly: while a detect_anomaly guard is alive,
// every op's output and every gradient a backward computes is checked, and the first NaN or
// infinity found throws a linea::Error naming the op, forward or backward (and which input's
// gradient), the shapes and the first bad element:
//
//   {
//     linea::autograd::detect_anomaly anomaly;
//     Tensor loss = model.forward(x);   // throws at the first op whose output is not finite
//     loss.backward();                  // throws at the first backward giving a non-finite gradient
//   }
//
// Off by default; while off it costs one branch per op and per backward node. While on, every
// checked tensor is copied to the host and scanned: it is for finding a fault, not for training.
// Checked: every op that records into the graph (autograd::record, custom_function; views too)
// with a float output, whether or not grad mode is on, and inside a backward too (reported as part
// of that backward); tensor creation is not an op. An additive -inf mask is an infinity:
// Anomaly::NaN checks for NaN only. Thread-local, like grad mode. The message says which inputs
// were already non-finite: a NaN from outside the graph (the data, a parameter) is caught at the
// first op or view that reads it.
#pragma once
#include <string>
#include <vector>

#include "linea/tensor/tensor.h"

namespace linea::autograd {

enum class Anomaly {
  Off,
  NaN,        // NaN only
  NonFinite,  // NaN, +inf and -inf
};

// What anomaly mode checks for in this thread (Off unless a detect_anomaly guard is alive).
Anomaly anomaly_mode();
inline bool is_anomaly_enabled() { return anomaly_mode() != Anomaly::Off; }

// RAII: anomaly mode set to `what` until the guard ends (Anomaly::Off turns it off inside an
// outer guard); guards nest.
class detect_anomaly {
 public:
  explicit detect_anomaly(Anomaly what = Anomaly::NonFinite);
  ~detect_anomaly();
  detect_anomaly(const detect_anomaly&) = delete;
  detect_anomaly& operator=(const detect_anomaly&) = delete;

 private:
  Anomaly prev_;
};

// The checks (called by record() and the backward engine while the mode is on): throw when `out`,
// op's forward output from `inputs`, or `grad`, the gradient op's backward gave its input `input`
// from the output's gradient `grad_out`, holds what the mode looks for.
void check_forward_finite(const std::string& op, const Tensor& out, const std::vector<Tensor>& inputs);
void check_backward_finite(const std::string& op, size_t input, const Tensor& grad, const Tensor& grad_out);

// Held by the engine while a node's backward runs, so that an op inside it that gives a bad value
// is reported as part of that node's backward.
class AnomalyBackwardScope {
 public:
  explicit AnomalyBackwardScope(const std::string& node);
  ~AnomalyBackwardScope();
  AnomalyBackwardScope(const AnomalyBackwardScope&) = delete;
  AnomalyBackwardScope& operator=(const AnomalyBackwardScope&) = delete;

 private:
  const std::string* prev_;
};

}  // namespace linea::autograd
