// mlp_demo: fit a tiny 2-layer MLP to a toy regression problem with autograd and plain SGD.
//
// Data: 256 points x ~ U[-2, 2]^2 with targets y = sin(x0) * cos(x1), made with a seeded
// Generator so every run prints the same numbers. Model: y_hat = tanh(x W1 + b1) W2 + b2.
// Each step: forward, mean squared error, backward, then w -= lr * grad for every parameter.
#include <chrono>
#include <cmath>
#include <vector>

#include <fmt/core.h>
#include <linea/linea.h>

using namespace linea;

namespace {

constexpr int64_t kSamples = 256, kHidden = 32, kSteps = 2000, kLogEvery = 200;
constexpr float kLr = 0.1f;

// A trainable weight: N(0, 1) scaled by 1/sqrt(fan_in), so tanh starts out of saturation.
Tensor init_weight(Shape shape, Generator& gen) {
  Tensor w = randn(shape, gen) * (1.0 / std::sqrt(static_cast<double>(shape[0])));
  return w.requires_grad_();
}

// Plain SGD. The update writes straight into the parameters' memory: it must not be recorded
// (NoGradGuard) and must keep the same tensors, so the next forward sees the new values.
void sgd_step(const std::vector<Tensor>& params, float lr) {
  NoGradGuard no_grad;
  for (Tensor p : params) {
    Tensor g = p.grad().contiguous();
    float* w = p.data<float>();
    const float* dw = g.data<float>();
    for (int64_t i = 0; i < p.numel(); ++i) w[i] -= lr * dw[i];
    p.zero_grad();
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1) {  // a fixed demo: an argument is a mistake, not something to ignore
    fmt::print(stderr, "[mlp_demo] takes no flags, got '{}'\n", argv[1]);
    return 1;
  }
  Generator gen(42);

  // The toy data set.
  Tensor x = rand({kSamples, 2}, gen) * 4.0 - 2.0;
  Tensor y = empty({kSamples, 1});
  const float* px = x.data<float>();
  float* py = y.data<float>();
  for (int64_t i = 0; i < kSamples; ++i) py[i] = std::sin(px[2 * i]) * std::cos(px[2 * i + 1]);

  // The model: 2 -> kHidden -> 1.
  Tensor w1 = init_weight({2, kHidden}, gen), b1 = zeros({kHidden}).requires_grad_();
  Tensor w2 = init_weight({kHidden, 1}, gen), b2 = zeros({1}).requires_grad_();
  const std::vector<Tensor> params = {w1, b1, w2, b2};

  auto start = std::chrono::steady_clock::now();
  double first_loss = 0, loss_value = 0;
  for (int64_t step = 0; step <= kSteps; ++step) {
    Tensor hidden = tanh(matmul(x, w1) + b1);
    Tensor pred = matmul(hidden, w2) + b2;
    Tensor diff = pred - y;
    Tensor loss = mean(diff * diff);
    loss_value = loss.item();
    if (step == 0) first_loss = loss_value;
    if (step % kLogEvery == 0) fmt::print("step {:5d}  loss {:.6f}\n", step, loss_value);
    if (step == kSteps) break;
    loss.backward();
    sgd_step(params, kLr);
  }
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

  fmt::print("mlp_demo: loss {:.6f} -> {:.6f} ({:.1f}x lower) in {} steps, {:.2f} s\n", first_loss, loss_value,
             first_loss / loss_value, kSteps, seconds);
  // A demo that stopped learning should not look like a success.
  return loss_value < first_loss / 5 ? 0 : 1;
}
