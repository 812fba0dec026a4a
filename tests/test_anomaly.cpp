// Anomaly mode (autograd/anomaly.h): off by default; under a detect_anomaly guard the first op
// whose forward output or backward gradient is NaN or infinite throws, naming the op, forward or
// backward (and which input's gradient), the shapes and the first bad element.
#include <cmath>

#include "helpers.h"

using namespace linea;
using autograd::Anomaly;
using autograd::detect_anomaly;

TEST_CASE("anomaly mode is off by default: NaN flows through unchecked") {
  CHECK_FALSE(autograd::is_anomaly_enabled());
  CHECK(autograd::anomaly_mode() == Anomaly::Off);
  Tensor x = from_vector<double>({1, -1}).requires_grad_();
  Tensor y = log(x);
  CHECK(std::isnan(y.to_vector()[1]));
  sum(y).backward();  // d log / dx = 1/x: finite, no check
}

TEST_CASE("forward: the first op with a non-finite output throws, naming it, the shapes and the element") {
  Tensor x = from_vector<double>({1, 4, -1, 2}, {2, 2}).requires_grad_();
  {
    detect_anomaly anomaly;
    CHECK(autograd::is_anomaly_enabled());
    Tensor h = x * 2.0;  // finite: no throw
    CHECK_THROWS_WITH_AS(sqrt(h), doctest::Contains("[detect_anomaly] forward of sqrt: the output (2, 2) float64 "
                                                    "holds nan at [1, 0]; inputs (2, 2) float64; no input held such "
                                                    "values"),
                         Error);
    // Ops outside grad mode are checked too (an evaluation pass).
    NoGradGuard no_grad;
    CHECK_THROWS_WITH_AS(log(x.detach()), doctest::Contains("forward of log"), Error);
    CHECK_THROWS_WITH_AS(relu(x) / (x - 1.0), doctest::Contains("forward of div: the output (2, 2) float64 holds inf "
                                                                "at [0, 0]"),
                         Error);
  }
  CHECK_FALSE(autograd::is_anomaly_enabled());
  CHECK(std::isnan(sqrt(x).to_vector()[2]));  // the guard is gone: no check
}

TEST_CASE("forward: a NaN that comes from outside the graph is caught at the first op that reads it") {
  // A parameter that went NaN (say, loaded from a bad checkpoint).
  Tensor w = from_vector<float>({1, 2, 3, 4, NAN, 6}, {3, 2}).requires_grad_();
  detect_anomaly anomaly;
  CHECK_THROWS_WITH_AS(matmul(ones({4, 3}), w),
                       doctest::Contains("[detect_anomaly] forward of matmul: the output (4, 2) float32 holds nan at "
                                         "[0, 0]; inputs (4, 3) float32, (3, 2) float32; input 1 already held such "
                                         "values"),
                       Error);
  // The op the model called is named, not the views inside it (Linear reads its weight through t()).
  nn::Linear lin(3, 2);
  lin.weight = from_vector<float>({1, 2, 3, 4, NAN, 6}, {2, 3}).requires_grad_();
  CHECK_THROWS_WITH_AS(lin.forward(ones({4, 3})),
                       doctest::Contains("[detect_anomaly] forward of linear: the output (4, 2) float32 holds nan at "
                                         "[0, 1]; inputs (4, 3) float32, (2, 3) float32, (2,) float32; input 1 already "
                                         "held such values"),
                       Error);
}

TEST_CASE("backward: a non-finite gradient names the op's backward and the input it is for") {
  // A custom function whose backward hands input 1 a NaN gradient (made, not computed by an op).
  auto f = [](const Tensor& a, const Tensor& b) {
    return custom_function(
        "bad_backward", {a, b}, [](const std::vector<Tensor>& in) { return Forward{in[0] + in[1], {}}; },
        [](const std::vector<Tensor>&, const Tensor& g) {
          return std::vector<Tensor>{g, from_vector<double>({NAN, 0})};
        });
  };
  Tensor a = from_vector<double>({1, 2}).requires_grad_(), b = from_vector<double>({3, 4}).requires_grad_();
  {
    detect_anomaly anomaly;
    Tensor y = sum(f(a, b) * 3.0);
    CHECK_THROWS_WITH_AS(y.backward(), doctest::Contains("[detect_anomaly] backward of bad_backward: the gradient of "
                                                         "its input 1 (2,) float64 holds nan at [0]; the gradient of "
                                                         "its output (2,) held none"),
                         Error);
  }
  sum(f(a, b)).backward();  // off: the NaN lands in b.grad unchecked
  CHECK(std::isnan(b.grad().to_vector()[0]));
}

TEST_CASE("backward: an op inside a backward that overflows is reported as part of that backward") {
  Tensor x = from_vector<double>({0, 4}).requires_grad_();
  detect_anomaly anomaly;
  Tensor y = sum(sqrt(x));  // sqrt(0) = 0 is finite; its derivative 1 / (2 sqrt(0)) is not
  CHECK_THROWS_WITH_AS(y.backward(), doctest::Contains("[detect_anomaly] backward of sqrt: its step div: the output "
                                                       "(2,) float64 holds inf at [0]"),
                       Error);
}

TEST_CASE("Anomaly::NaN lets infinities pass (an additive -inf mask); guards nest and restore") {
  Tensor x = from_vector<double>({0, 1});
  detect_anomaly outer(Anomaly::NaN);
  CHECK(std::isinf(log(x).to_vector()[0]));  // -inf: allowed in this mode
  CHECK_THROWS_WITH_AS(log(x) * 0.0, doctest::Contains("forward of mul: the output (2,) float64 holds nan at [0]"),
                       Error);
  {
    detect_anomaly off(Anomaly::Off);
    CHECK_FALSE(autograd::is_anomaly_enabled());
    CHECK(std::isnan((log(x) * 0.0).to_vector()[0]));
    detect_anomaly inner;
    CHECK_THROWS_WITH_AS(log(x), doctest::Contains("forward of log: the output (2,) float64 holds -inf at [0]"), Error);
  }
  CHECK(autograd::anomaly_mode() == Anomaly::NaN);
}
