// libtorch's spellings beside linea's: programs written as PyTorch's C++ tutorials write them
// (the autograd tour, an MLP regression) compile and give the values of the free functions and of
// hand computation; in-place ops follow libtorch's autograd rules; grad_fn() has PyTorch's names;
// the losses, Adam and the chainable options match hand-computed values.
#include <cmath>
#include <limits>
#include <vector>

#include "helpers.h"

using namespace linea;
using linea::testing::allclose;
using linea::testing::randn64;

namespace {
Tensor vec(std::vector<double> v, Shape shape = {}) {
  if (shape.empty()) shape = {int64_t(v.size())};
  return from_vector(v, shape);
}
}  // namespace

TEST_CASE("the autograd tour, as libtorch's C++ tutorial writes it") {
  auto x = ones({2, 2}, DType::Float64).requires_grad_();
  auto y = x + 2;
  CHECK(y.grad_fn()->name() == "AddBackward0");
  auto z = y * y * 3;
  auto out = z.mean();
  CHECK(out.item<double>() == 27);
  CHECK(out.grad_fn()->name() == "DivBackward0");  // mean is sum / n here (PyTorch: MeanBackward0)
  out.backward();
  CHECK(allclose(x.grad(), full({2, 2}, 4.5, DType::Float64)));  // d/dx mean(3 (x + 2)^2) = 6 (x + 2) / 4

  auto a = randn64({3}, 1);
  auto b = a * 2;
  int doublings = 1;
  while (b.norm().item<double>() < 1000) b = b * 2, ++doublings;
  auto v = vec({0.1, 1.0, 0.0001});
  b.backward(v);
  CHECK(allclose(a.grad(), v * std::pow(2.0, doublings)));

  CHECK(a.requires_grad());
  CHECK(a.pow(2).requires_grad());
  {
    NoGradGuard no_grad;
    CHECK_FALSE(a.pow(2).requires_grad());
  }
  auto d = a.detach();
  CHECK_FALSE(d.requires_grad());
  CHECK(a.eq(d).all().item<bool>());
}

TEST_CASE("Tensor methods are the free functions") {
  const Tensor x = randn64({3, 4}, 2, false), w = randn64({4, 5}, 3, false);
  CHECK(allclose(x.sum(), sum(x)));
  CHECK(allclose(x.sum(1), sum(x, {1})));
  CHECK(allclose(x.sum(-1, true), sum(x, {-1}, true)));
  CHECK(allclose(x.sum({0, 1}), sum(x)));
  CHECK(allclose(x.sum({}), sum(x)));  // an empty list is every dim, as the free function's
  CHECK(allclose(x.mean(0), mean(x, {0})));
  CHECK(allclose(x.mean(), mean(x)));
  CHECK(allclose(x.var(), var(x)));
  CHECK(allclose(x.pow(2), x * x));
  CHECK(allclose(x.mm(w), matmul(x, w)));
  CHECK(allclose(x.matmul(w), matmul(x, w)));
  CHECK_THROWS_WITH_AS(x.mm(w.sum(1)), doctest::Contains("[mm] expects two 2-d tensors"), Error);
  CHECK(allclose(x.softmax(1), softmax(x, 1)));
  CHECK(allclose(x.log_softmax(-1), log_softmax(x, -1)));
  CHECK(allclose(x.abs().sqrt().log().exp(), sqrt(abs(x))));
  CHECK(allclose(x.max(x.neg()), abs(x)));

  // norms, by hand
  const std::vector<double> v = x.to_vector();
  double sq = 0, l1 = 0, linf = 0, l3 = 0;
  for (double e : v) sq += e * e, l1 += std::abs(e), linf = std::max(linf, std::abs(e)), l3 += std::pow(std::abs(e), 3);
  CHECK(x.norm().item() == doctest::Approx(std::sqrt(sq)).epsilon(1e-12));
  CHECK(x.norm(1).item() == doctest::Approx(l1).epsilon(1e-12));
  CHECK(x.norm(3).item() == doctest::Approx(std::cbrt(l3)).epsilon(1e-12));
  CHECK(x.norm(std::numeric_limits<double>::infinity()).item() == linf);

  // argmax / max / min with indices, ties resolved to the first index
  const Tensor m = vec({3, 1, 1, 0, 5, 0}, {2, 3});
  CHECK(m.argmax().item<int64_t>() == 4);
  CHECK(m.argmax(1).to_vector() == std::vector<double>{0, 1});
  auto [mx, imx] = m.max(1);
  CHECK(mx.to_vector() == std::vector<double>{3, 5});
  CHECK(imx.to_vector() == std::vector<double>{0, 1});
  auto [mn, imn] = m.min(1, true);
  CHECK(mn.shape() == Shape{2, 1});
  CHECK(mn.to_vector() == std::vector<double>{1, 0});
  CHECK(imn.to_vector() == std::vector<double>{1, 0});
  CHECK(m.max().item() == 5);
  CHECK(m.min().item() == 0);

  // comparisons, all / any
  CHECK(m.eq(0).to_vector() == std::vector<double>{0, 0, 0, 1, 0, 1});
  CHECK(m.gt(1.0).any().item<bool>());
  CHECK_FALSE(m.gt(1.0).all().item<bool>());
  CHECK(m.ge(0.0).all().item<bool>());
  CHECK_FALSE(zeros({3}).any().item<bool>());
  CHECK(m.eq(m).all().item<bool>());

  // shape
  CHECK(x.sizes() == Shape{3, 4});
  CHECK(x.size(-1) == 4);
  CHECK(x.t().sizes() == Shape{4, 3});
  CHECK(x.view({-1}).sizes() == Shape{12});
  CHECK(x.t().reshape({2, 6}).sizes() == Shape{2, 6});
  CHECK(vec({1, 2}).unsqueeze(1).expand_as(m.narrow(1, 0, 2)).to_vector() == std::vector<double>{1, 1, 2, 2});

  // indexing: x[i] is select(0, i), x[idx] index_select(0, idx)
  CHECK(allclose(x[1], x.select(0, 1)));
  CHECK(x[-1][2].item() == x.at({2, 2}));
  const Tensor idx = from_vector<int64_t>({2, 0}, {2});
  CHECK(allclose(x[idx], index_select(x, 0, idx)));
  CHECK_THROWS_WITH_AS(x[x.gt(0.0)], doctest::Contains("[operator[]] indexes dim 0 with an int64 tensor"), Error);

  // item<T>
  CHECK(scalar(2.5).item<float>() == 2.5f);
  CHECK(scalar(7, DType::Int64).item<int64_t>() == 7);
  CHECK(scalar(7, DType::Int64).item<int>() == 7);
}

TEST_CASE("a method's gradient is its free function's") {
  const Tensor a = randn64({3, 2}, 4), b = randn64({3, 2}, 4);
  a.norm().backward();
  sqrt(sum(b * b)).backward();
  CHECK(allclose(a.grad(), b.grad(), 1e-12));
  CHECK(allclose(a.grad(), a.detach() / a.detach().norm(), 1e-12));
}

TEST_CASE("grad_fn(): PyTorch's names") {
  const Tensor x = randn64({2, 3}, 5), w = randn64({3, 4}, 6), v = randn64({3}, 7);
  CHECK(x.grad_fn() == nullptr);  // a leaf
  CHECK((x * x).grad_fn()->name() == "MulBackward0");
  CHECK((x - x).grad_fn()->name() == "SubBackward0");
  CHECK(x.mm(w).grad_fn()->name() == "MmBackward0");
  CHECK(x.matmul(v).grad_fn()->name() == "MvBackward0");
  CHECK(v.matmul(v).grad_fn()->name() == "DotBackward0");
  CHECK(x.pow(2).grad_fn()->name() == "PowBackward0");
  CHECK(x.pow(x).grad_fn()->name() == "PowBackward1");
  CHECK(x.sum().grad_fn()->name() == "SumBackward0");
  CHECK(x.view({-1}).grad_fn()->name() == "ViewBackward0");
  CHECK(x.relu().grad_fn()->name() == "ReluBackward0");
  CHECK(x.to(DType::Float32).grad_fn()->name() == "ToCopyBackward0");
  CHECK(nn::cross_entropy(x, from_vector<int64_t>({0, 2}, {2})).grad_fn()->name() == "NllLossBackward0");
  auto cube = [](const std::vector<Tensor>& in) { return Forward{in[0] * in[0] * in[0], {in[0]}}; };
  auto cube_grad = [](const std::vector<Tensor>& s, const Tensor& g) -> std::vector<Tensor> {
    return {g * s[0] * s[0] * 3.0};
  };
  const Tensor c = custom_function("cube", {v}, cube, cube_grad);
  CHECK(c.grad_fn()->name() == "cube");  // a custom function keeps its own name
  CHECK_FALSE((x.detach() * 2).grad_fn());
}

TEST_CASE("in place on tensors outside autograd: every handle and view sees the write") {
  Tensor a = ones({3}, DType::Float64);
  const Tensor alias = a, tail = a.slice(0, 1, 3);
  a += 1;
  a *= 3.0;
  a -= vec({1, 2, 3});
  a /= vec({1, 2, 5});
  CHECK(a.to_vector() == std::vector<double>{5, 2, 0.6});
  CHECK(alias.to_vector() == a.to_vector());
  CHECK(tail.to_vector() == std::vector<double>{2, 0.6});
  a.fill_(2);
  CHECK(tail.to_vector() == std::vector<double>{2, 2});
  a.zero_();
  CHECK(alias.sum().item() == 0);

  CHECK_THROWS_WITH_AS(a += ones({2, 3}, DType::Float64), doctest::Contains("[operator+=] the result has shape (2, 3)"),
                       Error);
  Tensor i = ones({3}, DType::Int64);
  CHECK_THROWS_WITH_AS(i += ones({3}), doctest::Contains("dtype float32 cannot be written into this int64"), Error);
  Tensor e = ones({1}).expand({3});
  CHECK_THROWS_WITH_AS(e += 1, doctest::Contains("elements share memory"), Error);
}

TEST_CASE("in place under autograd: libtorch's rules") {
  Tensor w = randn64({3}, 8);
  // A leaf that requires grad: refused while recording, allowed under NoGradGuard (a manual SGD step).
  CHECK_THROWS_WITH_AS(w += 1, doctest::Contains("a leaf tensor that requires grad (shape (3,)) is being used in an "
                                                 "in-place operation"), Error);
  (w * w).sum().backward();
  const Tensor before = w.detach().clone(), g = w.grad();
  {
    NoGradGuard no_grad;
    w -= 0.1 * w.grad();
    w.grad().zero_();
  }
  CHECK(w.is_leaf());
  CHECK(w.requires_grad());
  CHECK(allclose(w.detach(), before * 0.8, 1e-12));  // w - 0.1 * 2w
  CHECK(g.sum().item() == 0);                        // zero_ wrote the gradient's storage

  // A non-leaf joins the graph of the op; an accumulator that does not require grad starts one.
  const Tensor x = randn64({3}, 9);
  Tensor y = x * 2.0;
  y += x;
  CHECK(y.grad_fn()->name() == "AddBackward0");
  Tensor total = zeros({}, DType::Float64);
  total += (x * x).sum();
  total += y.sum();
  CHECK(total.requires_grad());
  total.backward();
  CHECK(allclose(x.grad(), x.detach() * 2.0 + 3.0, 1e-12));

  // Multiplying in place: the node reads a copy of the old value, so the gradient is right.
  const Tensor p = randn64({3}, 10), q = randn64({3}, 11);
  Tensor r = p * 1.0;
  r *= q;
  r.sum().backward();
  CHECK(allclose(p.grad(), q.detach(), 1e-12));
  CHECK(allclose(q.grad(), p.detach(), 1e-12));
}

TEST_CASE("a backward that needs a value written over since its forward throws") {
  const Tensor x = randn64({3}, 12);
  Tensor e = exp(x);  // exp's backward reads its output
  e += 1;
  CHECK_THROWS_WITH_AS(e.sum().backward(), doctest::Contains("has been modified by an in-place operation: an input or "
                                                             "the output of ExpBackward0 is at version 1; expected "
                                                             "version 0"), Error);
  Tensor h = x * 2.0;  // mul's backward reads its inputs only: writing its output is fine
  h += 1;
  h.sum().backward();
  CHECK(allclose(x.grad(), full({3}, 2.0, DType::Float64)));
  Tensor c = ones({3}, DType::Float64);
  const Tensor l2 = (x * c).sum();  // mul's backward reads c
  c += 1;
  CHECK_THROWS_WITH_AS(l2.backward(), doctest::Contains("MulBackward0 is at version 1"), Error);

  Tensor y = x * 1.0;
  y *= y;  // mul saved y itself, which the write then changes (PyTorch refuses this too)
  CHECK_THROWS_WITH_AS(y.sum().backward(), doctest::Contains("modified by an in-place operation"), Error);

  Tensor base = x * 1.0;
  Tensor part = base.slice(0, 0, 2);
  CHECK_THROWS_WITH_AS(part += 1, doctest::Contains("is a view (made by slice) that is part of a graph"), Error);
}

TEST_CASE("losses against hand-computed values") {
  using nn::Reduction;
  // smooth L1, beta 1: d = {-0.5, 2, -0.5} -> {0.125, 1.5, 0.125}
  const Tensor pred = vec({0, 2, -0.5}), target = vec({0.5, 0, 0});
  CHECK(nn::smooth_l1_loss(pred, target, Reduction::None).to_vector() == std::vector<double>{0.125, 1.5, 0.125});
  CHECK(nn::smooth_l1_loss(pred, target).item() == doctest::Approx(1.75 / 3));
  CHECK(nn::smooth_l1_loss(pred, target, Reduction::Sum, 0.0).item() == 3.0);  // beta 0: L1
  CHECK_THROWS_WITH_AS(nn::smooth_l1_loss(pred, target, Reduction::Mean, -1), doctest::Contains("beta must be >= 0"),
                       Error);

  // BCE at p = 0 and 1: the logs are clamped to -100, the gradient stays finite.
  const Tensor p = vec({0.8, 0, 1}).requires_grad_(), t = vec({1, 0, 0});
  const Tensor bce = nn::binary_cross_entropy(p, t, Reduction::None);
  CHECK(bce.at({0}) == doctest::Approx(-std::log(0.8)));
  CHECK(bce.at({1}) == 0);
  CHECK(bce.at({2}) == 100);
  bce.sum().backward();
  CHECK(p.grad().at({0}) == doctest::Approx(-1 / 0.8));
  CHECK(p.grad().at({2}) == doctest::Approx(1e12));  // (p - t) / max(p (1 - p), 1e-12)
  CHECK_THROWS_WITH_AS(nn::binary_cross_entropy(vec({0.5, 1.5}), vec({1, 0})),
                       doctest::Contains("every probability must be in [0, 1]; 1 of 2 are not"), Error);

  // with logits: the same as BCE of the sigmoid where that is representable, and finite where not
  const Tensor z = vec({-2, 0.5, 3}), tz = vec({1, 0, 0.3});
  CHECK(allclose(nn::binary_cross_entropy_with_logits(z, tz), nn::binary_cross_entropy(sigmoid(z), tz), 1e-12));
  CHECK(nn::binary_cross_entropy_with_logits(vec({-200}), vec({1})).item() == 200);

  // NLL of log-probabilities: -log p at the target, ignored rows left out of the mean
  const Tensor lp = log(vec({0.5, 0.25, 0.25, 0.1, 0.6, 0.3}, {2, 3}));
  CHECK(nn::nll_loss(lp, from_vector<int64_t>({1, -100}, {2})).item() == doctest::Approx(-std::log(0.25)));
  CHECK(nn::nll_loss(lp, from_vector<int64_t>({0, 2}, {2}), Reduction::Sum).item() ==
        doctest::Approx(-std::log(0.5) - std::log(0.3)));
  const Tensor logits = randn64({4, 5}, 13, false);
  const Tensor tg = from_vector<int64_t>({4, -100, 0, 2}, {4});
  CHECK(allclose(nn::nll_loss(logits.log_softmax(1), tg), nn::cross_entropy(logits, tg), 1e-12));
  CHECK_THROWS_WITH_AS(nn::nll_loss(lp, from_vector<int64_t>({3, 0}, {2})),
                       doctest::Contains("[nll_loss] target 3 at index 0 is out of range for C = 3"), Error);
}

TEST_CASE("Adam: AdamW without decay, or with L2 decay in the gradient") {
  auto run = [](auto make, int steps) {
    Tensor w = randn64({4}, 14);
    auto opt = make(std::vector<Tensor>{w});
    for (int s = 0; s < steps; ++s) {
      opt.zero_grad();
      (w * w * w).sum().backward();
      opt.step();
    }
    return w.detach();
  };
  const Tensor adam = run([](auto ps) { return nn::Adam(ps, 0.01); }, 3);
  const Tensor adamw = run([](auto ps) { return nn::AdamW(ps, {.lr = 0.01, .weight_decay = 0}); }, 3);
  CHECK(adam.to_vector() == adamw.to_vector());

  // Two steps with weight decay 0.1, against a plain loop: g = 3 w^2 + wd w.
  const double lr = 0.01, b1 = 0.9, b2 = 0.999, eps = 1e-8, wd = 0.1;
  std::vector<double> w = randn64({4}, 14).to_vector(), m(4, 0), v(4, 0);
  for (int t = 1; t <= 2; ++t)
    for (size_t i = 0; i < 4; ++i) {
      const double g = 3 * w[i] * w[i] + wd * w[i];
      m[i] = b1 * m[i] + (1 - b1) * g;
      v[i] = b2 * v[i] + (1 - b2) * g * g;
      w[i] -= lr / (1 - std::pow(b1, t)) * m[i] / (std::sqrt(v[i]) / std::sqrt(1 - std::pow(b2, t)) + eps);
    }
  const Tensor decayed =
      run([&](auto ps) { return nn::Adam(ps, optim::AdamOptions(lr).betas({b1, b2}).eps(eps).weight_decay(wd)); }, 2);
  CHECK(allclose(decayed, vec(w), 1e-12, 1e-12));
}

TEST_CASE("libtorch's chainable options fill nn's options") {
  const nn::SGDOptions s = optim::SGDOptions(0.1).momentum(0.9).nesterov(true).weight_decay(0.01);
  CHECK(s.lr == 0.1);
  CHECK(s.momentum == 0.9);
  CHECK(s.nesterov);
  CHECK(s.weight_decay == 0.01);
  const nn::AdamOptions a = optim::AdamOptions(2e-4).betas({0.5, 0.999});
  CHECK(a.lr == 2e-4);
  CHECK(a.beta1 == 0.5);
  CHECK(a.beta2 == 0.999);
  CHECK(a.weight_decay == 0);  // Adam's default, unlike AdamW's 0.01
  const nn::AdamWOptions aw = optim::AdamWOptions(1e-3);
  CHECK(aw.weight_decay == 0.01);
  CHECK(nn::Adam(std::vector<Tensor>{randn64({2}, 15)}).param_groups()[0].weight_decay == 0.0);
}

TEST_CASE("activation modules and Functional are the free functions") {
  const Tensor x = vec({-2, -0.5, 0, 1.5});
  CHECK(allclose(nn::ReLU()(x), relu(x)));
  CHECK(allclose(nn::Sigmoid()(x), sigmoid(x)));
  CHECK(allclose(nn::Tanh()(x), tanh(x)));
  CHECK(allclose(nn::SiLU()(x), silu(x)));
  CHECK(nn::LeakyReLU(0.2)(x).to_vector() == std::vector<double>{-0.4, -0.1, 0, 1.5});
  CHECK(nn::LeakyReLU()(x).at({0}) == doctest::Approx(-0.02));
  CHECK(allclose(nn::Functional(leaky_relu, 0.2)(x), leaky_relu(x, 0.2)));
  CHECK(allclose(nn::Functional(relu)(x), relu(x)));
  const Tensor g = vec({-1, 2}).requires_grad_();
  leaky_relu(g, 0.2).sum().backward();
  CHECK(g.grad().to_vector() == std::vector<double>{0.2, 1});
}

TEST_CASE("an MLP regression, as libtorch's tutorials write it, trains with chained SGD options") {
  // y = sin(x) on [-2, 2], 32 points; Linear-ReLU-Linear, SGD with momentum, smooth L1.
  auto train = [](auto options) {
    manual_seed(1);
    nn::Sequential net{std::make_shared<nn::Linear>(1, 16), std::make_shared<nn::ReLU>(),
                       std::make_shared<nn::Linear>(16, 1)};
    optim::SGD optimizer(net.parameters(), options);
    const Tensor x = linspace(-2, 2, 32).unsqueeze(1), y = x.sin();
    std::vector<double> losses;
    for (int epoch = 0; epoch < 200; ++epoch) {
      optimizer.zero_grad();
      auto prediction = net(x);
      auto loss = nn::smooth_l1_loss(prediction, y);
      loss.backward();
      optimizer.step();
      losses.push_back(loss.item<float>());
    }
    return losses;
  };
  const std::vector<double> chained = train(optim::SGDOptions(0.05).momentum(0.9));
  const std::vector<double> designated = train(nn::SGDOptions{.lr = 0.05, .momentum = 0.9});
  CHECK(chained == designated);  // one optimizer, two spellings of its options
  CHECK(chained.back() < chained.front() / 10);
  CHECK(train(0.05) == train(nn::SGDOptions{.lr = 0.05}));  // SGD(params, lr)
}
