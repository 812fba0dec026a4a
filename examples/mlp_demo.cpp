// mlp_demo: fit a tiny 2-layer MLP to a toy regression problem, end to end in one screen.
//
// Data: 256 points x ~ U[-2, 2]^2 with targets y = sin(x0) * cos(x1), drawn after manual_seed, so
// every run prints the same numbers. Model: y_hat = fc2(tanh(fc1(x))), an nn::Module of two
// Linear layers. Each step: forward, mean squared error, backward, one nn::SGD step.
#include <chrono>

#include <fmt/core.h>
#include <linea/linea.h>

using namespace linea;

namespace {

constexpr int64_t kSamples = 256, kHidden = 32, kSteps = 2000, kLogEvery = 200;

struct Mlp : nn::Module {
  std::shared_ptr<nn::Linear> fc1 = register_module("fc1", std::make_shared<nn::Linear>(2, kHidden));
  std::shared_ptr<nn::Linear> fc2 = register_module("fc2", std::make_shared<nn::Linear>(kHidden, 1));
  Tensor forward(const Tensor& x) override { return (*fc2)(tanh((*fc1)(x))); }
};

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1) {  // a fixed demo: an argument is a mistake, not something to ignore
    fmt::print(stderr, "[mlp_demo] takes no flags, got '{}'\n", argv[1]);
    return 1;
  }
  manual_seed(42);  // seeds the data below and Linear's initialisation

  // The toy data set: columns x0 and x1 of x, target [256, 1].
  Tensor x = rand({kSamples, 2}) * 4.0 - 2.0;
  Tensor y = sin(x.slice(1, 0, 1)) * cos(x.slice(1, 1, 2));

  Mlp model;
  nn::SGD opt(model.parameters(), {.lr = 0.1});

  auto start = std::chrono::steady_clock::now();
  double first_loss = 0, loss_value = 0;
  for (int64_t step = 0; step <= kSteps; ++step) {
    Tensor loss = nn::mse_loss(model(x), y);
    loss_value = loss.item();
    if (step == 0) first_loss = loss_value;
    if (step % kLogEvery == 0) fmt::print("step {:5d}  loss {:.6f}\n", step, loss_value);
    if (step == kSteps) break;
    opt.zero_grad();
    loss.backward();
    opt.step();
  }
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

  fmt::print("mlp_demo: loss {:.6f} -> {:.6f} ({:.1f}x lower) in {} steps, {:.2f} s\n", first_loss, loss_value,
             first_loss / loss_value, kSteps, seconds);
  // A demo that stopped learning should not look like a success.
  return loss_value < first_loss / 5 ? 0 : 1;
}
