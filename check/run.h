// Running registry cases: float64 gradcheck on one device, and device-vs-CPU comparison of
// outputs and gradients. Each run gives one Result with the worst element found, whether or not
// the case passed, so a report shows how close every op is to its tolerance.
#pragma once
#include <string>
#include <vector>

#include "registry.h"
#include "linea/tensor/error.h"

namespace linea::check {

// The element closest to failing: |got - want| / (atol + rtol |want|) is largest there.
struct Worst {
  std::string what;            // "input 0" (gradcheck), "output" or "grad of input 1" (comparisons)
  std::vector<int64_t> index;  // multi-index in that tensor
  double got = 0, want = 0;    // gradcheck: analytic, numeric; comparisons: device (or form), reference
  double abs_error = 0, rel_error = 0;
  double ratio = 0;  // abs_error / tolerance: > 1 fails
};

// Error: the case threw (its message says why). Skipped: a second-order check of an op whose
// backward cannot be recorded yet (its message is autograd::grad's error naming the op).
enum class Status { Pass, Fail, Error, Skipped };

struct Result {
  std::string name;    // the op case, or the MHLA comparison
  std::string device;  // "cpu", "cuda:0"
  std::string dtype;   // "float64", "float32"
  Status status = Status::Pass;
  Worst worst;
  double seconds = 0;
  std::string message;  // on Fail / Error: what went wrong
  Result(std::string n, Device d, std::string dt) : name(std::move(n)), device(d.str()), dtype(std::move(dt)) {}
};

// Float64 central differences against the backward of c on `device` (c must be differentiable).
Result gradcheck_case(const OpCase& c, Device device, uint64_t seed);

// The same with gradgradcheck: finite differences of the first gradient against the double backward.
Result gradgradcheck_case(const OpCase& c, Device device, uint64_t seed);

// c's output and the gradients of sum(u * y) (fixed random u) on `device` against the CPU, from
// identical inputs in `dtype`, within c's comparison tolerance (gradients: Tol::Reduction's).
Result compare_case(const OpCase& c, Device device, DType dtype, uint64_t seed);

// NaN propagation, as in PyTorch: for each floating input not in c.nan_stops, a NaN put at its
// first, middle and last element must make NaN every output element that depends on it, i.e.
// that changes when that element is moved by +-10. Cases with integer or bool outputs have
// nothing to check. On a pass the worst element counts the NaN outputs (got) of those affected
// (want).
Result nan_case(const OpCase& c, Device device, DType dtype, uint64_t seed);

// The worst element of got vs want (same shape; got may live on any device), folded into `w`
// when it is worse than what `w` holds; false when some element is out of tolerance or the shapes
// differ (then `w` says so).
bool fold_worst(Worst& w, const std::string& what, const Tensor& got, const Tensor& want, double atol, double rtol);

}  // namespace linea::check
