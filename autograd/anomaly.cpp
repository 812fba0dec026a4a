#include "linea/autograd/anomaly.h"

#include <cmath>

#include "linea/tensor/error.h"

namespace linea::autograd {

namespace {
thread_local Anomaly g_mode = Anomaly::Off;
thread_local const std::string* g_backward_node = nullptr;  // whose backward is running

bool bad(double v) { return g_mode == Anomaly::NaN ? std::isnan(v) : !std::isfinite(v); }

// The first bad element of t (row-major): its index, or -1; its value in `value`.
int64_t first_bad(const Tensor& t, double& value) {
  if (!t.defined() || !is_floating(t.dtype())) return -1;
  const std::vector<double> v = t.to_vector();
  for (size_t e = 0; e < v.size(); ++e)
    if (bad(v[e])) return value = v[e], static_cast<int64_t>(e);
  return -1;
}

bool clean(const Tensor& t) {
  double unused;
  return first_bad(t, unused) < 0;
}

std::string bad_element(const Tensor& t, int64_t e, double value) {
  const std::string v = std::isnan(value) ? "nan" : fmt::format("{}", value);  // not "-nan"
  return fmt::format("{} {} holds {} at [{}]", shape_str(t.shape()), t.dtype(), v,
                     fmt::join(multi_index(e, t.shape()), ", "));
}
}  // namespace

Anomaly anomaly_mode() { return g_mode; }

detect_anomaly::detect_anomaly(Anomaly what) : prev_(g_mode) { g_mode = what; }
detect_anomaly::~detect_anomaly() { g_mode = prev_; }

AnomalyBackwardScope::AnomalyBackwardScope(const std::string& node) : prev_(g_backward_node) {
  g_backward_node = &node;
}
AnomalyBackwardScope::~AnomalyBackwardScope() { g_backward_node = prev_; }

void check_forward_finite(const std::string& op, const Tensor& out, const std::vector<Tensor>& inputs) {
  double value = 0;
  const int64_t e = first_bad(out, value);
  if (e < 0) return;
  std::vector<std::string> ins;
  std::vector<size_t> dirty;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Tensor& x = inputs[i];
    if (x.defined()) ins.push_back(fmt::format("{} {}", shape_str(x.shape()), x.dtype()));  // (optional ones left out)
    if (!clean(x)) dirty.push_back(i);
  }
  const std::string where =
      g_backward_node ? fmt::format("backward of {}: its step {}", *g_backward_node, op) : "forward of " + op;
  throw Error(fmt::format("[detect_anomaly] {}: the output {}; inputs {}; {}", where, bad_element(out, e, value),
                          fmt::join(ins, ", "),
                          dirty.empty() ? std::string("no input held such values")
                                        : fmt::format("input {} already held such values", fmt::join(dirty, ", "))));
}

void check_backward_finite(const std::string& op, size_t input, const Tensor& grad, const Tensor& grad_out) {
  double value = 0;
  const int64_t e = first_bad(grad, value);
  if (e < 0) return;
  throw Error(fmt::format("[detect_anomaly] backward of {}: the gradient of its input {} {}; the gradient of its "
                          "output {} {}",
                          op, input, bad_element(grad, e, value), shape_str(grad_out.shape()),
                          clean(grad_out) ? "held none" : "already held such values"));
}

}  // namespace linea::autograd
