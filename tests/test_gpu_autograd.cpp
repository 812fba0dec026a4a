// Float64 gradchecks on the GPU: every differentiable case of the registry (check/registry.h)
// with its inputs made on Device::cuda(), so the analytic gradients come from the CUDA backward
// kernels and the numeric ones from CUDA forwards (check::gradcheck_case, what
// `linea-check gradcheck --device cuda` runs). Runs only where a GPU is present (tests/gpu_main.cpp).
#include "helpers.h"
#include "report.h"

using namespace linea;
using namespace linea::testing;

TEST_CASE("gradcheck of every differentiable op in float64 on the GPU") {
  const auto& cases = check::registry();
  int checked = 0;
  for (size_t i = 0; i < cases.size(); ++i) {
    if (!cases[i].differentiable) continue;
    const check::Result r = check::gradcheck_case(cases[i], Device::cuda(), check::case_seed(i));
    INFO(check::format_result(r, "analytic", "numeric"));
    CHECK(r.status == check::Status::Pass);
    ++checked;
  }
  MESSAGE(checked << " ops gradchecked on the GPU");
}

TEST_CASE("gradients accumulate on the GPU over two backwards and over two uses") {
  Generator gen(1);
  Tensor x = randn({4, 3}, gen, DType::Float64).to(Device::cuda()).requires_grad_();
  sum(x * x + x).backward();
  sum(exp(x)).backward();
  const Tensor xh = x.detach().to(Device::cpu());
  REQUIRE(x.grad().defined());
  CHECK(x.grad().device().is_cuda());
  CHECK(allclose(x.grad().to(Device::cpu()), 2.0 * xh + 1.0 + exp(xh), 1e-12, 1e-12));
  x.zero_grad();
  Tensor y = tanh(x);
  sum(y * 2.0).backward(Tensor(), true);  // retain_graph: backward through y again
  sum(y).backward();
  CHECK(allclose(x.grad().to(Device::cpu()), 3.0 * (1.0 - tanh(xh) * tanh(xh)), 1e-12, 1e-12));
}

TEST_CASE("gradcheck catches a wrong gradient on the GPU too") {
  Tensor x = randn64({3}, 4, false).to(Device::cuda()).requires_grad_();
  auto right = [](const std::vector<Tensor>& xs) { return xs[0] * xs[0]; };
  auto wrong = [](const std::vector<Tensor>& xs) { return xs[0] * xs[0].detach(); };  // the value of x², gradient x
  CHECK(gradcheck(right, {x}).ok);
  CHECK_FALSE(gradcheck(wrong, {x}).ok);
}
