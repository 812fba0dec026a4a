// Optimizers against hand-computed steps (plain loops in this file), parameter groups, state
// dicts, the warmup-cosine schedule and global grad-norm clipping.
#include <cmath>
#include <numbers>
#include <vector>

#include "helpers.h"

using namespace linea;
using linea::testing::allclose;
using linea::testing::randn64;

namespace {

// Sets p.grad = c * p (the gradient of sum(c * p^2) / 2), so gradients change with the weights.
void quadratic_grads(std::vector<Tensor> ps, const std::vector<Tensor>& cs) {
  Tensor loss = scalar(0.0, ps[0].dtype());
  for (size_t i = 0; i < ps.size(); ++i) {
    ps[i].zero_grad();
    loss = loss + sum(cs[i] * ps[i] * ps[i]) * 0.5;
  }
  loss.backward();
}

struct SgdRef {
  double lr, momentum, wd;
  bool nesterov;
  std::vector<double> buf;
  int t = 0;
  void step(std::vector<double>& w, const std::vector<double>& c) {
    ++t;
    if (buf.empty()) buf.assign(w.size(), 0);
    for (size_t i = 0; i < w.size(); ++i) {
      double g = c[i] * w[i] + wd * w[i];
      if (momentum > 0) {
        buf[i] = t == 1 ? g : momentum * buf[i] + g;
        g = nesterov ? g + momentum * buf[i] : buf[i];
      }
      w[i] -= lr * g;
    }
  }
};

struct AdamWRef {
  double lr, b1, b2, eps, wd;
  std::vector<double> m, v;
  int t = 0;
  void step(std::vector<double>& w, const std::vector<double>& c) {
    ++t;
    if (m.empty()) m.assign(w.size(), 0), v.assign(w.size(), 0);
    for (size_t i = 0; i < w.size(); ++i) {
      const double g = c[i] * w[i];  // the gradient at the weights before decay
      w[i] *= 1 - lr * wd;
      m[i] = b1 * m[i] + (1 - b1) * g;
      v[i] = b2 * v[i] + (1 - b2) * g * g;
      const double mhat = m[i] / (1 - std::pow(b1, t)), vhat = v[i] / (1 - std::pow(b2, t));
      w[i] -= lr * mhat / (std::sqrt(vhat) + eps);
    }
  }
};

// A tiny model with the kinds of parameters the no-decay rule sorts.
struct Toy : nn::Module {
  Tensor weight, bias, tok_emb, norm, mix;
  Toy() : nn::Module("Toy") {
    weight = register_parameter("weight", randn64({3, 4}, 1, false));
    bias = register_parameter("bias", randn64({4}, 2, false));
    tok_emb = register_parameter("tok_emb", randn64({5, 4}, 3, false));
    norm = register_parameter("norm", randn64({4}, 4, false));
    mix = register_parameter("mix", randn64({2, 2}, 5, false));
  }
};

std::vector<std::string> names(const nn::ParamGroup& g) {
  std::vector<std::string> out;
  for (auto& [n, _] : g.params) out.push_back(n);
  return out;
}

}  // namespace

TEST_CASE("SGD matches hand-computed steps: plain, momentum, nesterov, weight decay") {
  struct Case { double momentum, wd; bool nesterov; };
  for (Case k : {Case{0, 0, false}, Case{0.9, 0, false}, Case{0.9, 0.1, true}, Case{0, 0.05, false},
                 Case{0.5, 0.01, false}}) {
    CAPTURE(k.momentum);
    CAPTURE(k.wd);
    CAPTURE(k.nesterov);
    Tensor w = randn64({2, 3}, 10), c = abs(randn64({2, 3}, 11, false));
    nn::SGD opt(nn::NamedParams{{"w", w}}, {.lr = 0.1, .momentum = k.momentum, .nesterov = k.nesterov,
                                            .weight_decay = k.wd});
    SgdRef ref{0.1, k.momentum, k.wd, k.nesterov, {}};
    std::vector<double> wr = w.to_vector(), cr = c.to_vector();
    for (int s = 0; s < 3; ++s) {
      quadratic_grads({w}, {c});
      opt.step();
      ref.step(wr, cr);
    }
    CHECK(allclose(w, from_vector(wr, {2, 3}), 1e-15, 1e-13));
  }
}

TEST_CASE("AdamW matches hand-computed steps (float64 and float32)") {
  Tensor w = randn64({4, 3}, 12), c = abs(randn64({4, 3}, 13, false));
  nn::AdamW opt(nn::NamedParams{{"w", w}}, {.lr = 0.01, .beta1 = 0.8, .beta2 = 0.95, .eps = 1e-6,
                                            .weight_decay = 0.1});
  AdamWRef ref{0.01, 0.8, 0.95, 1e-6, 0.1, {}, {}};
  std::vector<double> wr = w.to_vector(), cr = c.to_vector();
  for (int s = 0; s < 3; ++s) {
    quadratic_grads({w}, {c});
    opt.step();
    ref.step(wr, cr);
  }
  CHECK(allclose(w, from_vector(wr, {4, 3}), 1e-15, 1e-13));

  // float32 parameters follow the same path within float32 rounding (defaults: 0.9, 0.999, 1e-8).
  Tensor w32 = randn64({50}, 14, false).to(float32).requires_grad_(), c32 = abs(randn64({50}, 15, false));
  nn::AdamW opt32(nn::NamedParams{{"w", w32}});
  AdamWRef ref32{1e-3, 0.9, 0.999, 1e-8, 0.01, {}, {}};
  std::vector<double> w32r = w32.to_vector(), c32r = c32.to_vector();
  for (int s = 0; s < 3; ++s) {
    quadratic_grads({w32}, {c32.to(float32)});
    opt32.step();
    ref32.step(w32r, c32r);
  }
  CHECK(allclose(w32.to(float64), from_vector(w32r), 1e-6, 1e-5));
}

TEST_CASE("parameter groups: no decay on biases, norms, embeddings and named exemptions") {
  auto toy = std::make_shared<Toy>();
  auto groups = nn::adamw_param_groups(*toy, 0.1, {"mix"});
  REQUIRE(groups.size() == 2);
  CHECK(names(groups[0]) == std::vector<std::string>{"weight"});
  CHECK(names(groups[1]) == std::vector<std::string>{"bias", "tok_emb", "norm", "mix"});
  CHECK(*groups[0].weight_decay == 0.1);
  CHECK(*groups[1].weight_decay == 0.0);
  CHECK_FALSE(groups[0].lr.has_value());
  CHECK(names(nn::adamw_param_groups(*toy, 0.1)[0]) == std::vector<std::string>{"weight", "mix"});

  // With zero gradients AdamW's only effect is the decay: p *= 1 - lr * wd, on the decayed group.
  nn::AdamW opt(groups, {.lr = 0.5});
  const std::vector<double> w0 = toy->weight.to_vector(), b0 = toy->bias.to_vector(), e0 = toy->tok_emb.to_vector();
  for (auto& [_, p] : toy->named_parameters()) sum(p * 0.0).backward();
  opt.step();
  std::vector<double> w1(w0);
  for (double& v : w1) v *= 1 - 0.5 * 0.1;
  CHECK(allclose(toy->weight, from_vector(w1, {3, 4}), 1e-15, 1e-15));
  CHECK(toy->bias.to_vector() == b0);
  CHECK(toy->tok_emb.to_vector() == e0);

  // Per-group lr; set_lr sets all groups.
  std::vector<nn::ParamGroup> gs{nn::ParamGroup{{{"a", toy->weight}}, 0.5, std::nullopt},
                                 nn::ParamGroup{{{"b", toy->bias}}, std::nullopt, std::nullopt}};
  nn::SGD sgd(gs, {.lr = 0.1});
  CHECK(*sgd.param_groups()[0].lr == 0.5);
  CHECK(*sgd.param_groups()[1].lr == 0.1);
  sgd.set_lr(0.02);
  CHECK(*sgd.param_groups()[0].lr == 0.02);
  CHECK(*sgd.param_groups()[1].lr == 0.02);
}

TEST_CASE("optimizer: parameters without gradients are skipped; zero_grad drops gradients") {
  Tensor a = randn64({3}, 20), b = randn64({3}, 21);
  nn::AdamW opt(nn::NamedParams{{"a", a}, {"b", b}});
  const std::vector<double> b0 = b.to_vector();
  sum(a * a).backward();
  opt.step();
  CHECK(b.to_vector() == b0);
  nn::StateDict sd = opt.state_dict();
  CHECK(sd.count("a.step"));
  CHECK(sd.count("a.exp_avg_sq"));
  CHECK_FALSE(sd.count("b.step"));
  CHECK(sd.at("a.step").item() == 1);
  CHECK(sd.at("param_groups.0.weight_decay").item() == 0.01);
  opt.zero_grad();
  CHECK_FALSE(a.grad().defined());
}

TEST_CASE("optimizers take module.parameters(): each parameter is named by its index") {
  auto toy = std::make_shared<Toy>();
  const std::vector<Tensor> params = toy->parameters();
  nn::SGD sgd(params, {.lr = 0.5});
  const std::vector<double> w0 = toy->weight.to_vector();
  sum(toy->weight * 2.0).backward();  // d/dw = 2 everywhere; the other parameters get no gradient
  sgd.step();
  std::vector<double> w1(w0);
  for (double& v : w1) v -= 0.5 * 2.0;
  CHECK(toy->weight.to_vector() == w1);
  const nn::StateDict sd = nn::AdamW(params).state_dict();
  CHECK(sd.count("param_groups.0.lr"));
  REQUIRE(sgd.param_groups()[0].params.size() == params.size());
  for (size_t i = 0; i < params.size(); ++i) {
    CHECK(sgd.param_groups()[0].params[i].first == std::to_string(i));
    CHECK(&sgd.param_groups()[0].params[i].second.impl() == &params[i].impl());
  }
}

TEST_CASE("optimizer state_dict round trip: a fresh optimizer continues identically") {
  for (bool adam : {false, true}) {
    CAPTURE(adam);
    Tensor w = randn64({3, 2}, 30), c = abs(randn64({3, 2}, 31, false));
    auto make = [&](Tensor p) -> std::unique_ptr<nn::Optimizer> {
      if (adam) return std::make_unique<nn::AdamW>(nn::NamedParams{{"w", p}}, nn::AdamWOptions{.lr = 0.05});
      return std::make_unique<nn::SGD>(nn::NamedParams{{"w", p}}, nn::SGDOptions{.lr = 0.05, .momentum = 0.9});
    };
    auto o1 = make(w);
    for (int s = 0; s < 2; ++s) {
      quadratic_grads({w}, {c});
      o1->step();
    }
    o1->set_lr(0.03);
    Tensor w2 = w.detach().clone().requires_grad_();  // a rebuilt model with the same weights
    auto o2 = make(w2);
    o2->load_state_dict(o1->state_dict());
    CHECK(*o2->param_groups()[0].lr == 0.03);
    quadratic_grads({w}, {c});
    quadratic_grads({w2}, {c});
    o1->step();
    o2->step();
    CHECK(w.to_vector() == w2.to_vector());  // bit for bit
  }
}

TEST_CASE("optimizer load_state_dict errors name the key") {
  Tensor w = randn64({3, 2}, 40);
  nn::AdamW opt(nn::NamedParams{{"w", w}});
  sum(w * w).backward();
  opt.step();
  const nn::StateDict good = opt.state_dict();
  nn::StateDict missing = good;
  missing.erase("w.exp_avg");
  CHECK_THROWS_WITH_AS(opt.load_state_dict(missing),
                       doctest::Contains("[AdamW.load_state_dict] missing key 'w.exp_avg'"), Error);
  nn::StateDict shaped = good;
  shaped["w.exp_avg_sq"] = zeros({2, 3}, float64);
  CHECK_THROWS_WITH_AS(opt.load_state_dict(shaped),
                       doctest::Contains("'w.exp_avg_sq': expected (3, 2) float64, got (2, 3) float64"), Error);
  nn::StateDict extra = good;
  extra["v.step"] = scalar(1, int64);
  CHECK_THROWS_WITH_AS(opt.load_state_dict(extra), doctest::Contains("unexpected key 'v.step'"), Error);
  nn::StateDict negative = good;
  negative["w.step"] = scalar(-3, int64);
  CHECK_THROWS_WITH_AS(opt.load_state_dict(negative), doctest::Contains("'w.step' is negative (-3)"), Error);
  nn::StateDict nogroup = good;
  nogroup.erase("param_groups.0.lr");
  CHECK_THROWS_WITH_AS(opt.load_state_dict(nogroup), doctest::Contains("missing key 'param_groups.0.lr'"), Error);
  // Nothing was changed by the failed loads.
  const nn::StateDict now = opt.state_dict();
  CHECK(now.at("w.exp_avg").to_vector() == good.at("w.exp_avg").to_vector());
}

TEST_CASE("optimizer construction errors") {
  Tensor w = randn64({2}, 50);
  CHECK_THROWS_WITH_AS(nn::SGD(nn::NamedParams{{"w", w}, {"w", randn64({2}, 51)}}),
                       doctest::Contains("[SGD] parameter name 'w' appears twice"), Error);
  CHECK_THROWS_WITH_AS(nn::SGD(nn::NamedParams{{"a", w}, {"b", w}}), doctest::Contains("appears twice"), Error);
  CHECK_THROWS_WITH_AS(nn::SGD(nn::NamedParams{{"w", w}}, {.nesterov = true}),
                       doctest::Contains("[SGD] nesterov needs momentum > 0"), Error);
  CHECK_THROWS_WITH_AS(nn::AdamW(nn::NamedParams{{"w", w}}, {.beta2 = 1.0}), doctest::Contains("[AdamW] betas"), Error);
  CHECK_THROWS_WITH_AS(nn::AdamW(nn::NamedParams{}), doctest::Contains("[AdamW] got no parameters"), Error);
  CHECK_THROWS_WITH_AS(nn::AdamW(nn::NamedParams{{"w", w}}, {.lr = -1}), doctest::Contains("[AdamW] group 0"), Error);
  CHECK_THROWS_WITH_AS(nn::SGD(nn::NamedParams{{"t", randn64({3, 2}, 52, false).t().requires_grad_()}}),
                       doctest::Contains("non-contiguous"), Error);
  // Neither an op's output nor a tensor without requires_grad ever gets a .grad: refused, not held
  // and silently never updated.
  CHECK_THROWS_WITH_AS(nn::AdamW(nn::NamedParams{{"w", w}, {"w2", w * 2.0}}),
                       doctest::Contains("[AdamW] parameter 'w2' is not a leaf tensor"), Error);
  CHECK_THROWS_WITH_AS(nn::SGD(nn::NamedParams{{"c", randn64({2}, 53, false)}}),
                       doctest::Contains("[SGD] parameter 'c' does not require grad"), Error);
}

TEST_CASE("warmup_cosine at key steps") {
  const nn::WarmupCosine s{.warmup_steps = 10, .total_steps = 110, .max_lr = 1.0, .min_lr = 0.1};
  CHECK(nn::warmup_cosine(0, s) == 0.0);
  CHECK(nn::warmup_cosine(5, s) == doctest::Approx(0.5));
  CHECK(nn::warmup_cosine(10, s) == doctest::Approx(1.0));
  CHECK(nn::warmup_cosine(60, s) == doctest::Approx(0.55));  // halfway down: (max + min) / 2
  CHECK(nn::warmup_cosine(35, s) == doctest::Approx(0.1 + 0.45 * (1 + std::cos(std::numbers::pi / 4))));
  CHECK(nn::warmup_cosine(110, s) == doctest::Approx(0.1));
  CHECK(nn::warmup_cosine(1000, s) == 0.1);
  nn::WarmupCosine from{.warmup_steps = 4, .total_steps = 8, .max_lr = 2.0, .start_lr = 1.0};
  CHECK(nn::warmup_cosine(0, from) == 1.0);
  CHECK(nn::warmup_cosine(2, from) == doctest::Approx(1.5));
  CHECK(nn::warmup_cosine(0, {.warmup_steps = 0, .total_steps = 10, .max_lr = 3.0}) == doctest::Approx(3.0));
  CHECK_THROWS_WITH_AS(nn::warmup_cosine(-1, s), doctest::Contains("[warmup_cosine]"), Error);
  CHECK_THROWS_WITH_AS(nn::warmup_cosine(0, {.warmup_steps = 5, .total_steps = 3}),
                       doctest::Contains("[warmup_cosine]"), Error);
}

TEST_CASE("clip_grad_norm_ scales all gradients by one factor and returns the norm") {
  Tensor a = from_vector<double>({1, 1}).requires_grad_(), b = from_vector<float>({1}).requires_grad_();
  Tensor none = randn64({3}, 60);
  auto set_grads = [&] {
    a.zero_grad();
    b.zero_grad();
    (sum(a * from_vector<double>({3, 4})) + sum(b * 12.0f).to(float64)).backward();
  };
  set_grads();  // grads (3, 4) and (12): norm 13
  CHECK(nn::clip_grad_norm_({a, b, none}, 100) == doctest::Approx(13));
  CHECK(a.grad().to_vector() == std::vector<double>{3, 4});  // under the limit: untouched
  const double k = 6.5 / (13 + 1e-6);
  CHECK(nn::clip_grad_norm_({a, b, none}, 6.5) == doctest::Approx(13));
  CHECK(allclose(a.grad(), from_vector<double>({3 * k, 4 * k}), 1e-15, 1e-15));
  CHECK(b.grad().item() == doctest::Approx(12 * k).epsilon(1e-7));
  CHECK(nn::clip_grad_norm_({a, b}, 6.5) == doctest::Approx(6.5).epsilon(1e-6));
  CHECK(nn::clip_grad_norm_({none}, 1.0) == 0.0);
  CHECK_THROWS_WITH_AS(nn::clip_grad_norm_({a}, 0), doctest::Contains("[clip_grad_norm_] max_norm"), Error);
}
