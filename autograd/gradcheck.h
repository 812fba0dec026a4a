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

struct GradcheckResult {
  bool ok = true;
  std::string message;  // on failure: input, element index, analytic and numeric values
  double max_abs_error = 0;
  explicit operator bool() const { return ok; }
};

using GradcheckFn = std::function<Tensor(const std::vector<Tensor>&)>;

GradcheckResult gradcheck(const GradcheckFn& f, const std::vector<Tensor>& inputs, GradcheckOptions opts = {});

}  // namespace linea
