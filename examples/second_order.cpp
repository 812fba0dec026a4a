// second_order: gradients of gradients (autograd::grad with create_graph), in float64.
//
// (a) A Hessian-vector product by Pearlmutter's trick, H v = ∂(∇L · v)/∂θ, on a small pre-norm
//     transformer block whose attention is mhla_composite (the fused mhla's backward is a kernel,
//     differentiable once), printed beside central differences of the gradient along v,
//     (∇L(θ + εv) − ∇L(θ − εv)) / 2ε. Exits 1 if they differ by more than 1e-6 (relative).
// (b) One WGAN-GP critic loss on a two-layer MLP critic D(x) = w2 · tanh(W1 x + b1) + b2:
//     L = mean D(fake) − mean D(real) + λ mean (‖∂D(x̂)/∂x̂‖₂ − 1)², x̂ = α real + (1 − α) fake,
//     whose gradients (to the weights and to fake) go through the penalty's own gradient.
//     --dump DIR writes its inputs, weights and linea's gradients as .npy for
//     bench/peer/second_order.py, which recomputes them with PyTorch.
//
// The parameters are plain float64 tensors (nn::Linear and nn::MHLA hold float32 weights, and
// nn::MHLA runs the fused mhla), used through the functional ops.
#include <omp.h>

#include <cmath>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <linea/linea.h>

#include "data/output_paths.h"
#include "flags.h"

using namespace linea;
namespace F = linea::nn::functional;

namespace {

struct Config {
  uint64_t seed = 1;
  int64_t threads = 0;
  std::string dump;
};

const std::vector<flags::Flag<Config>>& flag_table() {
  using flags::flag;
  static const std::vector<flags::Flag<Config>> t = {
      flag("seed", &Config::seed, false, "seeds the weights, the inputs and the direction v"),
      flag("threads", &Config::threads, false, "OpenMP threads (default: all cores)", flags::at_least(0, 1024)),
      flag("dump", &Config::dump, false, "folder for the gradient-penalty step's .npy files (none: no files)"),
  };
  return t;
}

constexpr double kMaxHvpError = 1e-6;

Tensor param(Shape shape, Generator& gen, double scale) { return (randn(shape, gen, float64) * scale).requires_grad_(); }

double norm(const Tensor& t) { return std::sqrt(sum(t * t).item()); }

// ---- (a) Hessian-vector product ----

// One pre-norm block: x + proj(MHLA(ln1(x))), then h + W2 tanh(W1 ln2(h) + b1) + b2. The mixing
// matrix is lower-triangular, as nn::MHLA keeps its causal one: a block mixes only earlier blocks.
constexpr int64_t B = 2, N = 8, D = 8, H = 2, E = D / H, L = 4, M = N / L;
const std::vector<std::string> kBlockNames = {"ln1.w", "ln1.b", "qkv.w", "qkv.b", "mix",  "proj.w", "proj.b",
                                              "ln2.w", "ln2.b", "fc1.w", "fc1.b", "fc2.w", "fc2.b"};

Tensor block_loss(const std::vector<Tensor>& p, const Tensor& x, const Tensor& target) {
  const Tensor qkv = linear(layer_norm(x, p[0], p[1]), p[2], p[3]).view({B, N, 3, H, E});
  auto head = [&](int64_t i) { return qkv.select(2, i).permute({0, 2, 1, 3}); };  // [B, H, N, E]
  const F::MHLAOptions o{.causal = true, .block_len = L, .feature_map = F::FeatureMap::Elu1};
  const Tensor a = F::mhla_composite(head(0), head(1), head(2), tril(p[4]), o);
  const Tensor h = x + linear(a.permute({0, 2, 1, 3}).reshape({B, N, D}), p[5], p[6]);
  const Tensor y = h + linear(tanh(linear(layer_norm(h, p[7], p[8]), p[9], p[10])), p[11], p[12]);
  return mean((y - target) * (y - target));
}

// params += s * v without recording it (they are leaves that require grad).
void shift(std::vector<Tensor>& params, const std::vector<Tensor>& v, double s) {
  NoGradGuard guard;
  for (size_t i = 0; i < params.size(); ++i) params[i] += v[i] * s;
}

// Returns the relative difference ‖Hv − differences‖ / ‖differences‖ over all parameters.
double hessian_vector_product(Generator& gen) {
  std::vector<Tensor> p = {ones({D}, float64).requires_grad_(), param({D}, gen, 0.1), param({3 * D, D}, gen, 0.4),
                           param({3 * D}, gen, 0.1),   param({M, M}, gen, 0.5), param({D, D}, gen, 0.4),
                           param({D}, gen, 0.1),       ones({D}, float64).requires_grad_(), param({D}, gen, 0.1),
                           param({2 * D, D}, gen, 0.4), param({2 * D}, gen, 0.1), param({D, 2 * D}, gen, 0.3),
                           param({D}, gen, 0.1)};
  const Tensor x = randn({B, N, D}, gen, float64), target = randn({B, N, D}, gen, float64);
  std::vector<Tensor> v;
  for (const Tensor& t : p) v.push_back(randn(t.shape(), gen, float64));

  // Pearlmutter: the gradient with a graph of its own, dotted with v, differentiated again.
  const std::vector<Tensor> g = autograd::grad({block_loss(p, x, target)}, p, {}, std::nullopt, /*create_graph=*/true);
  Tensor gv = sum(g[0] * v[0]);
  for (size_t i = 1; i < g.size(); ++i) gv = gv + sum(g[i] * v[i]);
  const std::vector<Tensor> hv = autograd::grad({gv}, p);

  const double eps = 1e-5;  // central differences: O(ε²) truncation, O(1e-16 / ε) rounding
  shift(p, v, eps);
  const std::vector<Tensor> g_plus = autograd::grad({block_loss(p, x, target)}, p);
  shift(p, v, -2 * eps);
  const std::vector<Tensor> g_minus = autograd::grad({block_loss(p, x, target)}, p);
  shift(p, v, eps);

  int64_t count = 0;
  for (const Tensor& t : p) count += t.numel();
  fmt::print("(a) Hessian-vector product of a transformer block (causal mhla_composite, {} parameters), float64\n",
             count);
  fmt::print("    {:<8} {:>14} {:>14} {:>10}\n", "param", "|Hv|", "|diff. Hv|", "rel. err");
  double num = 0, den = 0;
  for (size_t i = 0; i < p.size(); ++i) {
    const Tensor fd = (g_plus[i] - g_minus[i]) / (2 * eps), err = hv[i] - fd;
    const double e = norm(err), f = norm(fd);
    num += e * e, den += f * f;
    fmt::print("    {:<8} {:>14.8e} {:>14.8e} {:>10.2e}\n", kBlockNames[i], norm(hv[i]), f, e / f);
  }
  return std::sqrt(num / den);
}

// ---- (b) WGAN-GP gradient penalty ----

constexpr int64_t kBatch = 8, kIn = 4, kHidden = 16;
constexpr double kLambda = 10;

Tensor critic(const std::vector<Tensor>& w, const Tensor& x) { return linear(tanh(linear(x, w[0], w[1])), w[2], w[3]); }

void gradient_penalty(Generator& gen, const std::string& dump) {
  std::vector<Tensor> w = {param({kHidden, kIn}, gen, 0.5), param({kHidden}, gen, 0.1), param({1, kHidden}, gen, 0.5),
                           param({1}, gen, 0.1)};
  const Tensor real = randn({kBatch, kIn}, gen, float64) + 1.0;
  const Tensor fake = randn({kBatch, kIn}, gen, float64).requires_grad_();  // a generator's output
  const Tensor alpha = rand({kBatch, 1}, gen, float64);

  const Tensor mixed = alpha * real + (1.0 - alpha) * fake;  // x̂, depends on fake
  const Tensor dmixed = autograd::grad({sum(critic(w, mixed))}, {mixed}, {}, std::nullopt, /*create_graph=*/true)[0];
  const Tensor grad_norm = sqrt(sum(dmixed * dmixed, {1}));
  const Tensor penalty = mean((grad_norm - 1.0) * (grad_norm - 1.0));
  const Tensor wasserstein = mean(critic(w, fake)) - mean(critic(w, real));
  const Tensor loss = wasserstein + penalty * kLambda;

  std::vector<Tensor> inputs = w;
  inputs.push_back(fake);
  const std::vector<Tensor> grads = autograd::grad({loss}, inputs);

  fmt::print("\n(b) WGAN-GP step, critic {}-{}-1 (tanh), batch {}, lambda {}, float64\n", kIn, kHidden, kBatch,
             kLambda);
  fmt::print("    loss {:.12f} = critic gap {:.12f} + lambda x penalty {:.12f}\n", loss.item(), wasserstein.item(),
             penalty.item());
  fmt::print("    |dD(x^)/dx^| per row: mean {:.6f}, min {:.6f}, max {:.6f}\n", mean(grad_norm).item(),
             min(grad_norm).item(), max(grad_norm).item());
  const std::vector<std::string> names = {"w1", "b1", "w2", "b2", "fake"};
  for (size_t i = 0; i < grads.size(); ++i) fmt::print("    |dL/d{}| {:.12e}\n", names[i], norm(grads[i]));

  if (dump.empty()) return;
  auto save = [&](const std::string& name, const Tensor& t) { save_npy(dump + "/" + name + ".npy", t.detach()); };
  save("real", real), save("fake", fake), save("alpha", alpha), save("lambda", full({}, kLambda, float64));
  save("loss", loss);
  for (size_t i = 0; i < names.size(); ++i) {
    if (i < w.size()) save(names[i], w[i]);
    save("grad_" + names[i], grads[i]);
  }
  fmt::print("    wrote the inputs, weights and gradients to {}/ (check: python3 bench/peer/second_order.py {})\n", dump,
             dump);
}

}  // namespace

int main(int argc, char** argv) {
  return flags::guarded_main("second_order", [&] {
    const std::vector<std::string> args(argv + 1, argv + argc);
    if (flags::help_requested("second_order", flag_table(), args)) return 0;
    const Config o = flags::parse_flags("second_order", flag_table(), args);
    if (!o.dump.empty()) data::make_output_dir("second_order", "--dump", o.dump);  // before any output
    if (o.threads > 0) omp_set_num_threads(static_cast<int>(o.threads));
    Generator gen(o.seed);
    const double hvp_error = hessian_vector_product(gen);
    fmt::print("    all parameters: relative error {:.2e} (limit {:g})\n", hvp_error, kMaxHvpError);
    gradient_penalty(gen, o.dump);
    if (!(hvp_error <= kMaxHvpError)) {
      fmt::print(stderr, "[second_order] the Hessian-vector product differs from finite differences by {:.2e} > {:g}\n",
                 hvp_error, kMaxHvpError);
      return 1;
    }
    return 0;
  });
}
