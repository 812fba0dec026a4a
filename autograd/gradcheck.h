// Numerical gradient checking, usable from tests and from user programs.
//
// gradcheck(f, inputs): with y = f(inputs) and a fixed random weighting u of y's elements,
// L = sum(u * y). The analytic dL/dx comes from one backward; the numeric one from central
// differences (L(x + eps) - L(x - eps)) / (2 eps), element by element, for every input that
// requires grad. Checking a random projection of the Jacobian catches every wrong entry with
// probability 1 at the cost of one backward. Inputs must be float64 leaves (they may be
// non-contiguous views) on any one device; f must not keep state between calls.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "linea/tensor/tensor.h"

namespace linea {

struct GradcheckOptions {
  double eps = 1e-6;
  double atol = 1e-6;
  double rtol = 1e-4;
  uint64_t seed = 0;  // for the weighting u
};

// The element closest to failing (largest |analytic - numeric| / (atol + rtol |numeric|)), so
// a report shows where a backward is most wrong, or how much room a passing one has.
struct GradcheckWorst {
  int input = -1;              // which input; -1 when no input requires grad
  std::vector<int64_t> index;  // its multi-index in that input
  double analytic = 0, numeric = 0;
  double abs_error = 0;  // |analytic - numeric|
  double rel_error = 0;  // abs_error / |numeric| (inf when numeric is 0 and they differ)
  double ratio = 0;      // abs_error / (atol + rtol |numeric|): > 1 fails
};

struct GradcheckResult {
  bool ok = true;
  std::string message;  // on failure: input, element index, analytic and numeric values
  double max_abs_error = 0;
  GradcheckWorst worst;
  explicit operator bool() const { return ok; }
};

using GradcheckFn = std::function<Tensor(const std::vector<Tensor>&)>;

GradcheckResult gradcheck(const GradcheckFn& f, const std::vector<Tensor>& inputs, GradcheckOptions opts = {});

// The second-order check: gradcheck of the first gradient. With y = f(inputs) and a fixed random
// u, the gradients g_i = d sum(u * y) / d x_i are computed with create_graph and flattened into
// one vector G; gradcheck(G) then compares the double backward of sum(v * G) (random v) with
// central differences of G. Ops whose backward cannot be recorded throw autograd::grad's
// "create_graph through <op>: not supported yet" error. Same input rules as gradcheck.
GradcheckResult gradgradcheck(const GradcheckFn& f, const std::vector<Tensor>& inputs, GradcheckOptions opts = {});

}  // namespace linea
