// softmax_attention's fused CUDA kernels (cuda/attention.cu) against the CPU kernels
// (tensor/cpu/cpu_attention.cpp): outputs and all three gradients from identical inputs, for
// head dims 32 / 64 / 128, N off the 32-row tile, causal or not, float32 and float64; a float64
// gradcheck on the GPU; and the head-dim limit's error. Runs only where a GPU is present.
#include <cmath>

#include "helpers.h"

using namespace linea;
using namespace linea::testing;
namespace F = linea::nn::functional;

namespace {

struct Result {
  Tensor o, dq, dk, dv;  // on the CPU
};

// o = softmax_attention(q, k, v) and the gradients of sum(o · g), computed on `device` from the
// given CPU tensors.
Result run(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& g, F::SoftmaxAttentionOptions opts,
           Device device) {
  Tensor qd = q.to(device).detach().requires_grad_(), kd = k.to(device).detach().requires_grad_();
  Tensor vd = v.to(device).detach().requires_grad_();
  Tensor o = F::softmax_attention(qd, kd, vd, opts);
  o.backward(g.to(device));
  const Device cpu = Device::cpu();
  return {o.to(cpu), qd.grad().to(cpu), kd.grad().to(cpu), vd.grad().to(cpu)};
}

// Float32 sums run in another order on the GPU (32-key tiles, warp shuffles) than on the CPU
// (BLAS on 64×128 tiles): a few ulps per product, growing with N and d.
void check_matches_cpu(int64_t B, int64_t H, int64_t N, int64_t d, int64_t dv, DType dtype, bool causal,
                       uint64_t seed) {
  CAPTURE(N);
  CAPTURE(d);
  CAPTURE(dv);
  CAPTURE(causal);
  const bool f64 = dtype == DType::Float64;
  CAPTURE(f64);
  Generator gen(seed);
  Tensor q = randn({B, H, N, d}, gen, dtype), k = randn({B, H, N, d}, gen, dtype);
  Tensor v = randn({B, H, N, dv}, gen, dtype), g = randn({B, H, N, dv}, gen, dtype);
  const Result cpu = run(q, k, v, g, {causal}, Device::cpu());
  const Result gpu = run(q, k, v, g, {causal}, Device::cuda());
  const double atol = f64 ? 1e-11 : 2e-5, rtol = f64 ? 1e-10 : 1e-4;
  CHECK(allclose(gpu.o, cpu.o, atol, rtol));
  CHECK(allclose(gpu.dq, cpu.dq, atol, rtol));
  CHECK(allclose(gpu.dk, cpu.dk, atol, rtol));
  CHECK(allclose(gpu.dv, cpu.dv, atol, rtol));
}

}  // namespace

TEST_CASE("GPU softmax_attention matches the CPU: d = 32 / 64 / 128, N off the tile, causal or not") {
  for (DType dtype : {DType::Float32, DType::Float64})
    for (int64_t d : {32, 64, 128})
      for (bool causal : {false, true}) check_matches_cpu(2, 3, 100, d, d, dtype, causal, 1 + d);
}

TEST_CASE("GPU softmax_attention matches the CPU: one token, one partial tile, many tiles, dv != d") {
  for (DType dtype : {DType::Float32, DType::Float64})
    for (bool causal : {false, true}) {
      check_matches_cpu(1, 2, 1, 16, 16, dtype, causal, 11);
      check_matches_cpu(2, 1, 7, 8, 5, dtype, causal, 12);
      check_matches_cpu(1, 2, 300, 40, 72, dtype, causal, 13);  // 10 tiles, the last one 12 rows
      check_matches_cpu(1, 1, 64, 128, 3, dtype, causal, 14);   // exactly two tiles
    }
}

TEST_CASE("GPU softmax_attention takes non-contiguous inputs and an explicit scale") {
  Generator gen(21);
  // The head split of a [B, N, H, d] projection: a permuted view.
  auto heads = [&](int64_t dd) { return randn({2, 45, 3, dd}, gen, DType::Float64).permute({0, 2, 1, 3}); };
  Tensor q = heads(16), k = heads(16), v = heads(24), g = randn({2, 3, 45, 24}, gen, DType::Float64);
  for (bool causal : {false, true}) {
    CAPTURE(causal);
    const Result cpu = run(q, k, v, g, {causal, 0.3}, Device::cpu());
    const Result gpu = run(q, k, v, g, {causal, 0.3}, Device::cuda());
    CHECK(allclose(gpu.o, cpu.o, 1e-11, 1e-10));
    CHECK(allclose(gpu.dq, cpu.dq, 1e-11, 1e-10));
    CHECK(allclose(gpu.dk, cpu.dk, 1e-11, 1e-10));
    CHECK(allclose(gpu.dv, cpu.dv, 1e-11, 1e-10));
  }
}

TEST_CASE("GPU softmax_attention gradcheck (float64, two key tiles)") {
  for (bool causal : {false, true}) {
    CAPTURE(causal);
    auto leaf = [](Shape s, uint64_t seed) {
      return randn64(std::move(s), seed, false).to(Device::cuda()).detach().requires_grad_();
    };
    Tensor q = leaf({1, 2, 37, 4}, 31), k = leaf({1, 2, 37, 4}, 32), v = leaf({1, 2, 37, 3}, 33);
    CHECK_GRADCHECK([causal](const std::vector<Tensor>& x) { return F::softmax_attention(x[0], x[1], x[2], {causal}); },
                    {q, k, v});
  }
}

TEST_CASE("GPU softmax_attention is stable for logits ~1e6: finite, float32 close to float64") {
  // The CPU test's inputs (test_attention.cpp): one key dominates each row by far more than the
  // float32 rounding of its logit, so float32 agrees with float64 to 1e-3.
  Generator gen(11);
  Tensor q = randn({1, 2, 200, 4}, gen, DType::Float64) * 1e3, k = randn({1, 2, 200, 4}, gen, DType::Float64) * 1e3;
  Tensor v = randn({1, 2, 200, 3}, gen, DType::Float64);
  const Device gpu = Device::cuda(), cpu = Device::cpu();
  for (bool causal : {false, true}) {
    CAPTURE(causal);
    Tensor ref = F::softmax_attention(q, k, v, {causal, 0.5});
    Tensor o64 = F::softmax_attention(q.to(gpu), k.to(gpu), v.to(gpu), {causal, 0.5}).to(cpu);
    CHECK(allclose(o64, ref, 1e-9, 1e-9));
    Tensor o32 = F::softmax_attention(q.to(DType::Float32).to(gpu), k.to(DType::Float32).to(gpu),
                                      v.to(DType::Float32).to(gpu), {causal, 0.5}).to(cpu);
    for (double x : o32.to_vector()) REQUIRE(std::isfinite(x));
    CHECK(allclose(o32.to(DType::Float64), ref, 1e-3, 1e-3));
  }
}

TEST_CASE("GPU softmax_attention: head dims above 128 are an error naming the limit") {
  Tensor q = zeros({1, 1, 4, 129}, Device::cuda()), v = zeros({1, 1, 4, 8}, Device::cuda());
  CHECK_THROWS_WITH_AS(F::softmax_attention(q, q, v), doctest::Contains("head dims up to 128"), Error);
  Tensor q8 = zeros({1, 1, 4, 8}, Device::cuda()), v200 = zeros({1, 1, 4, 200}, Device::cuda());
  CHECK_THROWS_WITH_AS(F::softmax_attention(q8, q8, v200), doctest::Contains("head dims up to 128"), Error);
}

TEST_CASE("gpu softmax_attention_qkv = on the CPU: output and the packed gradient") {
  const int64_t B = 2, N = 40, H = 2, d = 8;
  const Tensor qkv = randn64({B, N, 3 * H * d}, 71, false), g = randn64({B, H, N, d}, 72, false);
  auto run_on = [&](Device dev) {
    const Tensor x = qkv.to(dev).requires_grad_();
    const Tensor out = F::softmax_attention_qkv(x, H, {true});
    sum(out * g.to(dev)).backward();
    return std::vector<Tensor>{out.to(Device::cpu()), x.grad().to(Device::cpu())};
  };
  const auto cpu = run_on(Device::cpu()), gpu = run_on(Device::cuda());
  CHECK(allclose(gpu[0], cpu[0], 1e-10, 1e-10));
  CHECK(allclose(gpu[1], cpu[1], 1e-10, 1e-10));
}
