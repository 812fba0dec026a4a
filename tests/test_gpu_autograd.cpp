// Float64 gradchecks on the GPU: every differentiable case of tests/gpu_cases.h with its inputs
// made on Device::cuda(), so the analytic gradients come from the CUDA backward kernels and the
// numeric ones from CUDA forwards. Cases with more than kMaxElements input elements (the
// long-row reductions, meant to exercise multi-block kernels) are left to test_gpu_ops, which
// compares their float64 gradients with the CPU's to 1e-10; central differences over thousands of
// elements would take minutes. Runs only where a GPU is present (tests/gpu_main.cpp).
#include "gpu_cases.h"

using namespace linea;
using namespace linea::testing;

namespace {
constexpr int64_t kMaxElements = 2000;
}

TEST_CASE("gradcheck of every differentiable op in float64 on the GPU") {
  uint64_t seed = 100;
  int checked = 0;
  for (const OpCase& c : op_cases()) {
    ++seed;
    if (!c.differentiable) continue;
    int64_t n = 0;
    for (const Shape& s : c.shapes) n += numel(s);
    if (n > kMaxElements) continue;
    INFO(c.name);
    try {
      std::vector<Tensor> xs = case_inputs(c, DType::Float64, Device::cuda(), seed);
      for (Tensor& x : xs) x.requires_grad_();
      CHECK_GRADCHECK(c.f, xs);
      ++checked;
    } catch (const Error& e) {
      FAIL_CHECK(c.name << ": " << e.what());
    }
  }
  MESSAGE(checked << " ops gradchecked on the GPU");
  CHECK(checked > 80);
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
