// Your first model: a two-layer network learns y = |x|^2 with AdamW, then gradcheck confirms
// the hand-written backward of a custom op in float64.
#include <linea/linea.h>
using namespace linea;

struct Net : nn::Module {  // parameters: fc1.weight, fc1.bias, fc2.weight, fc2.bias
  std::shared_ptr<nn::Linear> fc1 = register_module("fc1", std::make_shared<nn::Linear>(2, 32));
  std::shared_ptr<nn::Linear> fc2 = register_module("fc2", std::make_shared<nn::Linear>(32, 1));
  Tensor forward(const Tensor& x) override { return fc2->forward(tanh(fc1->forward(x))); }
};

int main() {
  manual_seed(0);                                     // seeds Linear's initialisation
  Tensor x = rand({256, 2}) * 2.0 - 1.0;              // 256 points in [-1, 1)^2
  Tensor y = sum(x * x, {1}, /*keepdim=*/true);       // target [256, 1]
  Net model;
  nn::AdamW opt(model.named_parameters(), {.lr = 1e-2, .weight_decay = 0});
  for (int step = 0; step <= 300; ++step) {
    Tensor loss = nn::mse_loss(model(x), y);
    if (step % 100 == 0) fmt::print("step {:3d}  loss {:.6f}\n", step, loss.item());
    opt.zero_grad();
    loss.backward();
    opt.step();
  }

  auto cube = [](const std::vector<Tensor>& in) {    // y = x^3 with dy/dx = 3x^2 by hand
    return custom_function("cube", in,
        [](const std::vector<Tensor>& v) { return Forward{v[0] * v[0] * v[0], {v[0]}}; },
        [](const std::vector<Tensor>& saved, const Tensor& g) {
          return std::vector<Tensor>{g * 3.0 * saved[0] * saved[0]}; });
  };
  GradcheckResult r = gradcheck(cube, {randn({5}, float64).requires_grad_()});
  fmt::print("gradcheck cube: {} (max abs error {:.1e})\n", r.ok ? "ok" : r.message, r.max_abs_error);
  return r.ok ? 0 : 1;
}
