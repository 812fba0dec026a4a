// Every op of the registry (check/registry.h) on the CPU and on CUDA from identical inputs:
// outputs and gradients (of sum(u * y) for a fixed random u) must agree, in float32 within the
// registry's tolerances and in float64 to 1e-10 (check::compare_case, what `linea-check compare`
// runs). Also: an op given operands on two devices throws an error that names the op and both
// devices. Runs only where a GPU is present (tests/gpu_main.cpp skips otherwise).
#include "helpers.h"
#include "report.h"

using namespace linea;
using namespace linea::testing;

namespace {

void compare_devices(DType dtype) {
  const auto& cases = check::registry();
  for (size_t i = 0; i < cases.size(); ++i) {
    const check::Result r = check::compare_case(cases[i], Device::cuda(), dtype, check::case_seed(i));
    INFO(check::format_result(r, "cuda", "cpu"));
    CHECK(r.status == check::Status::Pass);
  }
}

}  // namespace

TEST_CASE("every op: CUDA matches the CPU in float32 (outputs and gradients)") { compare_devices(DType::Float32); }

TEST_CASE("every op: CUDA matches the CPU in float64 to 1e-10 (outputs and gradients)") {
  compare_devices(DType::Float64);
}

TEST_CASE("to(Device) round trip is exact for every dtype, including non-contiguous views") {
  Generator gen(3);
  const Tensor f = randn({5, 7}, gen);
  for (const Tensor& x : {f, f.to(DType::Float64), (f * 10.0).to(DType::Int64), gt(f, 0.0 * f),
                          abs(f * 10.0).to(DType::UInt8), f.t(), f.slice(1, 1, 7, 3)}) {
    const Tensor g = x.to(Device::cuda());
    CHECK(g.device() == Device::cuda());
    CHECK(g.dtype() == x.dtype());
    CHECK(g.to(Device::cpu()).to_vector() == x.to_vector());
  }
}

TEST_CASE("creation on the GPU gives the numbers the CPU gives for the same seed") {
  Generator a(9), b(9);
  CHECK(randn({4, 5}, a, Device::cuda()).to_vector() == randn({4, 5}, b).to_vector());
  CHECK(zeros({3}, Device::cuda()).to_vector() == std::vector<double>(3, 0.0));
  CHECK(full({2, 2}, 2.5, {DType::Float64, Device::cuda()}).to_vector() == std::vector<double>(4, 2.5));
  CHECK(arange(5, {DType::Int64, Device::cuda()}).to_vector() == arange(5).to_vector());
  CHECK(tril_mask(3, 4, 0, Device::cuda()).to_vector() == tril_mask(3, 4).to_vector());
}

// Each op that takes several tensors refuses operands on two devices, naming itself and both.
TEST_CASE("mixed-device operands: the error names the op and both devices") {
  Generator gen(5);
  const Tensor c = randn({3, 4}, gen), g = randn({3, 4}, gen).to(Device::cuda());
  const Tensor w = randn({4}, gen).to(Device::cuda());
  const Tensor idx_c = from_vector<int64_t>({0, 2}, {2}), idx_g = idx_c.to(Device::cuda());
  auto expect = [](const std::string& op, auto&& f) {
    INFO(op);
    try {
      f();
      FAIL("no error for operands on cpu and cuda:0");
    } catch (const Error& e) {
      const std::string m = e.what();
      INFO(m);
      CHECK(m.find("[" + op + "]") != std::string::npos);
      CHECK(m.find("cpu") != std::string::npos);
      CHECK(m.find("cuda:0") != std::string::npos);
    }
  };
  expect("add", [&] { return add(c, g); });
  expect("mul", [&] { return g * c; });
  expect("maximum", [&] { return maximum(c, g); });
  expect("lt", [&] { return lt(g, c); });
  expect("where", [&] { return where(gt(c, 0.0 * c), g, g); });
  expect("where", [&] { return where(gt(g, 0.0 * g), c, g); });
  expect("matmul", [&] { return matmul(c, g.t()); });
  expect("cat", [&] { return cat({c, g}); });
  expect("stack", [&] { return stack({g, c}); });
  expect("index_select", [&] { return index_select(g, 0, idx_c); });
  expect("gather", [&] { return gather(c, 1, from_vector<int64_t>({0, 1, 2}, {3, 1}, Device::cuda())); });
  expect("scatter_add", [&] { return scatter_add(g, 0, idx_g.view({2, 1}), c.narrow(0, 0, 2).narrow(1, 0, 1)); });
  expect("embedding", [&] { return embedding(g, idx_c); });
  expect("layer_norm", [&] { return layer_norm(c, w); });
  expect("rms_norm", [&] { return rms_norm(c, w); });
  expect("softmax_attention", [&] {
    const Tensor q = c.view({1, 1, 3, 4}), k = g.view({1, 1, 3, 4});
    return nn::functional::softmax_attention(q, k, k);
  });
  expect("cross_entropy", [&] { return nn::cross_entropy(g, from_vector<int64_t>({0, 1, 2}, {3})); });
  expect("gelu", [&] {  // the kernel GELU's training forward runs (Backend::activation_with_grad)
    backend(Device::cuda()).activation_with_grad(UnaryOp::GeluErf, g, empty({3, 4}), empty({3, 4}));
    return g;
  });
}

TEST_CASE("activation_with_grad on the GPU (the backends' default) gives the CPU's values") {
  Generator gen(9);
  const Tensor x = randn({33, 17}, gen, DType::Float64) * 4.0;
  for (UnaryOp op : {UnaryOp::GeluErf, UnaryOp::GeluTanh, UnaryOp::Silu}) {
    CAPTURE(std::string(op_name(op)));
    Tensor y = empty({33, 17}, DType::Float64), d = empty({33, 17}, DType::Float64);
    Tensor yg = empty({33, 17}, DType::Float64, Device::cuda()), dg = empty({33, 17}, DType::Float64, Device::cuda());
    backend(Device::cpu()).activation_with_grad(op, x, y, d);
    backend(Device::cuda()).activation_with_grad(op, x.to(Device::cuda()).t().contiguous().t(), yg, dg);
    CHECK(allclose(yg.to(Device::cpu()), y, 1e-13, 1e-13));
    CHECK(allclose(dg.to(Device::cpu()), d, 1e-13, 1e-13));
  }
}

TEST_CASE("backward keeps gradients on the tensor's device, across a device boundary too") {
  Generator gen(11);
  Tensor xc = randn({3, 4}, gen).requires_grad_();
  Tensor xg = randn({3, 4}, gen).to(Device::cuda()).requires_grad_();
  // x_cpu -> GPU -> combined with a GPU leaf -> back to the CPU for the loss.
  sum((tanh(xc.to(Device::cuda())) * xg).to(Device::cpu())).backward();
  REQUIRE(xc.grad().defined());
  REQUIRE(xg.grad().defined());
  CHECK(xc.grad().device().is_cpu());
  CHECK(xg.grad().device().is_cuda());
  const Tensor xg_host = xg.detach().to(Device::cpu());
  CHECK(allclose(xc.grad(), (1.0 - tanh(xc.detach()) * tanh(xc.detach())) * xg_host, 1e-6, 1e-5));
}
