// Gradients of gradients: autograd::grad with create_graph, backward(create_graph), checked against
// closed forms and against finite differences of first gradients (float64), and the errors.
#include <cmath>

#include "helpers.h"

using namespace linea;
using linea::testing::allclose;
using linea::testing::randn64;

namespace {

// ‖a - b‖ / ‖b‖ over several tensors.
double rel_diff(const std::vector<Tensor>& a, const std::vector<Tensor>& b) {
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    const std::vector<double> x = a[i].to_vector(), y = b[i].to_vector();
    for (size_t e = 0; e < x.size(); ++e) num += (x[e] - y[e]) * (x[e] - y[e]), den += y[e] * y[e];
  }
  return std::sqrt(num / den);
}

// params += s * v, under NoGradGuard (they are leaves that require grad).
void shift(std::vector<Tensor>& params, const std::vector<Tensor>& v, double s) {
  NoGradGuard guard;
  for (size_t i = 0; i < params.size(); ++i) params[i] += v[i] * s;
}

using Loss = std::function<Tensor(const std::vector<Tensor>&)>;

// Pearlmutter's Hessian-vector product H v = d(∇L · v)/dθ against central differences of ∇L
// along v: (∇L(θ + εv) - ∇L(θ - εv)) / 2ε. Returns the relative difference.
double hvp_vs_differences(const Loss& loss, std::vector<Tensor> params, uint64_t seed) {
  std::vector<Tensor> v;
  for (size_t i = 0; i < params.size(); ++i) v.push_back(randn64(params[i].shape(), seed + i, false));
  const std::vector<Tensor> g = autograd::grad({loss(params)}, params, {}, std::nullopt, /*create_graph=*/true);
  Tensor gv = sum(g[0] * v[0]);
  for (size_t i = 1; i < g.size(); ++i) gv = gv + sum(g[i] * v[i]);
  const std::vector<Tensor> hv = autograd::grad({gv}, params);
  const double eps = 1e-5;
  shift(params, v, eps);
  const std::vector<Tensor> gp = autograd::grad({loss(params)}, params);
  shift(params, v, -2 * eps);
  const std::vector<Tensor> gm = autograd::grad({loss(params)}, params);
  shift(params, v, eps);
  std::vector<Tensor> fd;
  for (size_t i = 0; i < params.size(); ++i) fd.push_back((gp[i] - gm[i]) / (2 * eps));
  return rel_diff(hv, fd);
}

}  // namespace

TEST_CASE("d²/dx² of x³ is 6x, by autograd::grad and by backward(create_graph)") {
  Tensor x = from_vector<double>({0.5, -1.25, 2.0}).requires_grad_();
  for (const Tensor& y : {sum(pow(x, 3.0)), sum(x * x * x)}) {
    const Tensor dy = autograd::grad({y}, {x}, {}, std::nullopt, /*create_graph=*/true)[0];
    CHECK(allclose(dy, from_vector<double>({0.75, 4.6875, 12.0}), 1e-12, 0));
    CHECK(dy.requires_grad());
    const Tensor d2y = autograd::grad({sum(dy)}, {x})[0];
    CHECK(allclose(d2y, from_vector<double>({3.0, -7.5, 12.0}), 1e-12, 0));
    CHECK_FALSE(x.grad().defined());  // grad() returns gradients, it accumulates nothing
  }
  Tensor z = sum(x * x * x);
  z.backward(Tensor(), std::nullopt, /*create_graph=*/true);
  const Tensor gx = x.grad();
  REQUIRE(gx.requires_grad());
  CHECK(allclose(autograd::grad({sum(gx)}, {x})[0], from_vector<double>({3.0, -7.5, 12.0}), 1e-12, 0));
}

TEST_CASE("a gradient computed without create_graph is a constant") {
  Tensor x = from_vector<double>({1.0, 2.0}).requires_grad_();
  const Tensor g = autograd::grad({sum(exp(x))}, {x})[0];
  CHECK_FALSE(g.requires_grad());
  CHECK(allclose(g, exp(x.detach()), 1e-12, 0));
  sum(x * x).backward();
  CHECK_FALSE(x.grad().requires_grad());
}

TEST_CASE("autograd::grad: non-leaf inputs, several outputs, grad_outputs") {
  Tensor x = from_vector<double>({1.0, -2.0}).requires_grad_();
  Tensor h = x * 3.0;
  Tensor y1 = h * h, y2 = sin(h);
  const Tensor w1 = from_vector<double>({1.0, 0.5}), w2 = from_vector<double>({-1.0, 2.0});
  // d(w1·h² + w2·sin h)/dh = 2 w1 h + w2 cos h; to x: times 3.
  const std::vector<Tensor> g = autograd::grad({y1, y2}, {h, x}, {w1, w2}, true);
  const Tensor hd = h.detach();
  const Tensor dh = w1 * hd * 2.0 + w2 * cos(hd);
  CHECK(allclose(g[0], dh, 1e-12, 0));
  CHECK(allclose(g[1], dh * 3.0, 1e-12, 0));
}

TEST_CASE("WGAN-GP gradient penalty on a two-layer critic matches finite differences of the loss") {
  // critic D(x) = w2 · tanh(W1 x + b1) + b2; loss = mean D(fake) - mean D(real) + λ mean (‖∇ₓD(x̂)‖ - 1)².
  std::vector<Tensor> params = {randn64({5, 3}, 1), randn64({5}, 2), randn64({1, 5}, 3), randn64({1}, 4)};
  const Tensor real = randn64({4, 3}, 5, false), fake = randn64({4, 3}, 6, false);
  const Tensor mixed = randn64({4, 3}, 7, false);  // x̂, fixed (the interpolation is not what is checked)
  const double lambda = 10;
  auto critic = [](const std::vector<Tensor>& p, const Tensor& x) {
    return linear(tanh(linear(x, p[0], p[1])), p[2], p[3]);
  };
  auto loss = [&](const std::vector<Tensor>& p) {
    Tensor xh = mixed.detach().requires_grad_();
    const Tensor dx = autograd::grad({sum(critic(p, xh))}, {xh}, {}, std::nullopt, /*create_graph=*/true)[0];
    const Tensor norm = sqrt(sum(dx * dx, {1}));
    const Tensor penalty = mean((norm - 1.0) * (norm - 1.0));
    return mean(critic(p, fake)) - mean(critic(p, real)) + penalty * lambda;
  };
  const std::vector<Tensor> analytic = autograd::grad({loss(params)}, params);
  // Central differences of the loss, element by element.
  const double eps = 1e-6;
  double worst = 0;
  for (size_t i = 0; i < params.size(); ++i) {
    std::vector<double> numeric;
    for (int64_t e = 0; e < params[i].numel(); ++e) {
      auto at = [&](double s) {
        std::vector<Tensor> v;
        for (size_t j = 0; j < params.size(); ++j) v.push_back(zeros(params[j].shape(), float64));
        {
          NoGradGuard guard;
          v[i].view({-1}).narrow(0, e, 1).fill_(1.0);
        }
        shift(params, v, s);
        const double l = loss(params).item();
        shift(params, v, -s);
        return l;
      };
      numeric.push_back((at(eps) - at(-eps)) / (2 * eps));
    }
    worst = std::max(worst, rel_diff({analytic[i]}, {from_vector<double>(numeric).view(params[i].shape())}));
  }
  CHECK(worst < 1e-7);
  // The penalty is what makes the first layer's gradient differ from the plain critic loss's.
  Tensor plain = mean(critic(params, fake)) - mean(critic(params, real));
  CHECK(rel_diff({autograd::grad({plain}, {params[0]})[0]}, {analytic[0]}) > 1e-3);
}

TEST_CASE("Hessian-vector product of an MLP matches finite differences of the gradient") {
  std::vector<Tensor> params = {randn64({6, 4}, 11), randn64({6}, 12), randn64({3, 6}, 13), randn64({3}, 14)};
  const Tensor x = randn64({5, 4}, 15, false), t = randn64({5, 3}, 16, false);
  auto loss = [&](const std::vector<Tensor>& p) {
    const Tensor h = sigmoid(linear(x, p[0], p[1]));
    const Tensor out = matmul(h, p[2].t()) + p[3];
    return mean((out - t) * (out - t)) + sum(log_softmax(out, -1)) * 0.1;
  };
  CHECK(hvp_vs_differences(loss, params, 17) < 1e-6);
}

TEST_CASE("Hessian-vector product of a transformer block with composite attention matches differences") {
  const int64_t B = 2, N = 3, D = 4, H = 2, e = D / H;
  std::vector<Tensor> params = {randn64({D}, 21),        randn64({D}, 22),   randn64({3 * D, D}, 23),
                                randn64({3 * D}, 24),    randn64({D, D}, 25), randn64({D}, 26),
                                randn64({2 * D, D}, 27), randn64({D, 2 * D}, 28), randn64({D}, 29)};
  const Tensor x = randn64({B, N, D}, 30, false);
  auto block = [&](const std::vector<Tensor>& p) {
    // pre-norm attention (softmax(q kᵀ / √e) v over H heads, causal) and a tanh MLP, each residual
    const Tensor qkv = linear(layer_norm(x, p[0], p[1]), p[2], p[3]).view({B, N, 3, H, e});
    auto head = [&](int64_t i) { return qkv.select(2, i).permute({0, 2, 1, 3}); };  // [B, H, N, e]
    const Tensor q = head(0), k = head(1), v = head(2);
    const Tensor mask = triu(full({N, N}, -1e9, float64), 1);
    const Tensor att = softmax(matmul(q, k.transpose(-1, -2)) / std::sqrt(double(e)) + mask, -1);
    const Tensor o = matmul(att, v).permute({0, 2, 1, 3}).reshape({B, N, D});
    const Tensor h = x + linear(o, p[4], p[5]);
    const Tensor y = h + matmul(tanh(matmul(rms_norm(h, Tensor()), p[6].t())), p[7].t()) + p[8];
    return mean(y * y);
  };
  CHECK(hvp_vs_differences(block, params, 31) < 1e-6);
}

TEST_CASE("Hessian-vector product of an MHLA block (mhla_composite, plain and causal) matches differences") {
  namespace F = nn::functional;
  const int64_t B = 1, N = 6, D = 4, H = 2, e = D / H, L = 3, M = N / L;
  for (bool causal : {false, true}) {
    CAPTURE(causal);
    std::vector<Tensor> params = {randn64({3 * D, D}, 51), randn64({M, M}, 52), randn64({D, D}, 53),
                                  randn64({D}, 54)};
    const Tensor x = randn64({B, N, D}, 55, false);
    auto block = [&](const std::vector<Tensor>& p) {
      const Tensor qkv = matmul(x, p[0].t()).view({B, N, 3, H, e});
      auto head = [&](int64_t i) { return qkv.select(2, i).permute({0, 2, 1, 3}); };  // [B, H, N, e]
      const F::MHLAOptions o{.causal = causal, .block_len = L, .feature_map = F::FeatureMap::Elu1};
      const Tensor mix = causal ? p[1] : sigmoid(p[1]);
      const Tensor a = F::mhla_composite(head(0), head(1), head(2), mix, o);
      const Tensor y = x + linear(a.permute({0, 2, 1, 3}).reshape({B, N, D}), p[2], p[3]);
      return mean(y * y);
    };
    CHECK(hvp_vs_differences(block, params, 56) < 1e-6);
  }
}

namespace {

// H v of `loss` at `params` (Pearlmutter's trick).
std::vector<Tensor> hvp(const Loss& loss, const std::vector<Tensor>& params, const std::vector<Tensor>& v) {
  const std::vector<Tensor> g = autograd::grad({loss(params)}, params, {}, std::nullopt, /*create_graph=*/true);
  Tensor gv = sum(g[0] * v[0]);
  for (size_t i = 1; i < g.size(); ++i) gv = gv + sum(g[i] * v[i]);
  return autograd::grad({gv}, params);
}

}  // namespace

TEST_CASE("create_graph through the fused mhla and mhla_qkv (plain and causal) takes mhla_composite") {
  namespace F = nn::functional;
  const int64_t B = 1, N = 6, D = 4, H = 2, e = D / H, L = 3, M = N / L;
  for (bool causal : {false, true}) {
    CAPTURE(causal);
    const std::vector<Tensor> params = {randn64({B, N, 3 * D}, 61), randn64({M, M}, 62)};
    std::vector<Tensor> v;
    for (size_t i = 0; i < params.size(); ++i) v.push_back(randn64(params[i].shape(), 63 + i, false));
    const F::MHLAOptions o{.causal = causal, .block_len = L, .feature_map = F::FeatureMap::Elu1};
    auto heads = [&](const Tensor& qkv, int64_t i) {
      return qkv.narrow(2, i * D, D).view({B, N, H, e}).transpose(1, 2);
    };
    auto loss = [&](const std::vector<Tensor>& p, int form) {
      const Tensor mix = causal ? p[1] : sigmoid(p[1]);
      const Tensor q = heads(p[0], 0), k = heads(p[0], 1), w = heads(p[0], 2);
      const Tensor a = form == 0   ? F::mhla_composite(q, k, w, mix, o)
                       : form == 1 ? F::mhla(q, k, w, mix, o)
                                   : F::mhla_qkv(p[0], H, mix, o);
      return sum(a * a * a);
    };
    const std::vector<Tensor> ref = hvp([&](const auto& p) { return loss(p, 0); }, params, v);
    CHECK(rel_diff(hvp([&](const auto& p) { return loss(p, 1); }, params, v), ref) < 1e-10);
    CHECK(rel_diff(hvp([&](const auto& p) { return loss(p, 2); }, params, v), ref) < 1e-10);
  }
}

TEST_CASE("Hessian-vector product through cross_entropy matches finite differences of the gradient") {
  const Tensor x = randn64({5, 4}, 71, false), t = from_vector<int64_t>({0, 2, 1, -100, 2});
  const std::vector<Tensor> params = {randn64({3, 4}, 72), randn64({3}, 73)};
  for (double smoothing : {0.0, 0.2}) {
    CAPTURE(smoothing);
    auto loss = [&](const std::vector<Tensor>& p) {
      return nn::cross_entropy(tanh(linear(x, p[0], p[1])), t, {.label_smoothing = smoothing});
    };
    CHECK(hvp_vs_differences(loss, params, 74) < 1e-6);
  }
}

TEST_CASE("a custom_function with a composite differentiates twice, an input passed twice counted once per use") {
  auto mul = [](const Tensor& a, const Tensor& b) {
    return custom_function(
        "mul", {a, b}, [](const std::vector<Tensor>& i) { return Forward{i[0] * i[1], {i[0], i[1]}}; },
        [](const std::vector<Tensor>& s, const Tensor& g) -> std::vector<Tensor> { return {g * s[1], g * s[0]}; },
        [](const std::vector<Tensor>& i) { return i[0] * i[1]; });
  };
  Tensor x = from_vector<double>({0.5, -2.0}).requires_grad_();
  const Tensor g = autograd::grad({sum(mul(x, x) * x)}, {x}, {}, std::nullopt, true)[0];  // 3x²
  CHECK(allclose(g, x.detach() * x.detach() * 3.0, 1e-12, 0));
  CHECK(allclose(autograd::grad({sum(g)}, {x})[0], x.detach() * 6.0, 1e-12, 0));
}

TEST_CASE("an input the outputs do not use is an error naming it, unless allow_unused") {
  Tensor x = from_vector<double>({1.0, 2.0}).requires_grad_(), z = from_vector<double>({3.0}).requires_grad_();
  Tensor y = sum(x * 2.0);
  CHECK_THROWS_WITH_AS(autograd::grad({y}, {x, z}, {}, true),
                       doctest::Contains("input 1 (shape ()) was not used to compute the 1 output(s)"), Error);
  const std::vector<Tensor> g = autograd::grad({y}, {x, z}, {}, true, false, /*allow_unused=*/true);
  CHECK(allclose(g[0], from_vector<double>({2.0, 2.0}), 0, 0));
  CHECK_FALSE(g[1].defined());
  Tensor c = from_vector<double>({1.0});
  CHECK_THROWS_WITH_AS(autograd::grad({y}, {c}), doctest::Contains("input 0 (shape ()) does not require grad"),
                       Error);
}

TEST_CASE("create_graph through an op whose backward is not recorded is a one-line error naming the op") {
  Tensor x = from_vector<double>({0.3, -0.7}).requires_grad_();
  CHECK_THROWS_WITH_AS(autograd::grad({sum(gelu(x))}, {x}, {}, std::nullopt, true),
                       doctest::Contains("create_graph through gelu: not supported yet"), Error);
  CHECK_THROWS_WITH_AS(autograd::grad({sum(silu(x))}, {x}, {}, std::nullopt, true),
                       doctest::Contains("use x * sigmoid(x)"), Error);
  auto cube = [](const std::vector<Tensor>& in) {
    return custom_function(
        "cube", in, [](const std::vector<Tensor>& i) { return Forward{i[0] * i[0] * i[0], {i[0]}}; },
        [](const std::vector<Tensor>& s, const Tensor& g) -> std::vector<Tensor> { return {g * s[0] * s[0] * 3.0}; });
  };
  CHECK_THROWS_WITH_AS(sum(cube({x})).backward(Tensor(), std::nullopt, true),
                       doctest::Contains("create_graph through cube: not supported yet"), Error);
  // Without create_graph the same ops differentiate once as before.
  CHECK(allclose(autograd::grad({sum(cube({x}))}, {x})[0], x.detach() * x.detach() * 3.0, 1e-12, 0));
}

TEST_CASE("backward twice through a graph without retain_graph is still an error") {
  Tensor x = from_vector<double>({1.0}).requires_grad_();
  Tensor y = sum(exp(x));
  autograd::grad({y}, {x});
  CHECK_THROWS_WITH_AS(autograd::grad({y}, {x}), doctest::Contains("retain_graph"), Error);
  Tensor w = sum(exp(x));
  autograd::grad({w}, {x}, {}, std::nullopt, true);  // create_graph keeps the graph by default
  CHECK(allclose(autograd::grad({w}, {x})[0], exp(x.detach()), 1e-12, 0));
}

TEST_CASE("gradgradcheck passes a correct double backward and the recorded first gradient") {
  Tensor a = randn64({3, 4}, 41), b = randn64({4, 2}, 42);
  CHECK(gradgradcheck([](const std::vector<Tensor>& in) { return tanh(matmul(in[0], in[1])); }, {a, b}));
  Tensor x = randn64({2, 5}, 43);
  CHECK(gradgradcheck([](const std::vector<Tensor>& in) { return layer_norm(in[0]) * softmax(in[0], 0); }, {x}));
  CHECK_THROWS_WITH_AS(gradgradcheck([](const std::vector<Tensor>& in) { return gelu(in[0]); }, {x}),
                       doctest::Contains("create_graph through gelu"), Error);
}
