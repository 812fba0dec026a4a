// The engine itself: accumulation, graph freeing, no-grad, detach, long graphs, custom
// functions, gradcheck catching a wrong gradient, and the engine's error messages.
#include "helpers.h"

using namespace linea;
using linea::testing::allclose;
using linea::testing::randn64;

TEST_CASE("backward of a scalar fills leaf grads; a reused input accumulates") {
  Tensor x = from_vector<double>({1, 2, 3}).requires_grad_();
  Tensor y = sum(x * x + x);  // dy/dx = 2x + 1, x used twice
  y.backward();
  CHECK(allclose(x.grad(), from_vector<double>({3, 5, 7})));
  sum(x * 2.0).backward();  // a second backward adds to .grad
  CHECK(allclose(x.grad(), from_vector<double>({5, 7, 9})));
  x.zero_grad();
  CHECK_FALSE(x.grad().defined());
}

TEST_CASE("shared subexpressions are visited once (diamond graph)") {
  Tensor x = from_vector<double>({2.0}).requires_grad_();
  Tensor h = exp(x);
  Tensor y = sum(h * h + h);  // dy/dx = 2 e^{2x} + e^x
  y.backward();
  double e = std::exp(2.0);
  CHECK(x.grad().item() == doctest::Approx(2 * e * e + e));
}

TEST_CASE("a pending gradient shared with another node is not added to in place") {
  // In y = (k + h·5) + h the adds hand one gradient tensor to h, to k and to h·5 (the engine runs
  // them in that order, k's node last); h then gets its second gradient from h·5. Adding that into
  // the shared tensor in place would change k's too: dx would read 2·6 + 3·6 = 30, not 2·6 + 3 = 15.
  Tensor x = from_vector<double>({1, 2}).requires_grad_();
  Tensor h = x * 2.0, k = x * 3.0;
  ((k + h * 5.0) + h).backward(from_vector<double>({1, 1}));  // contiguous gradients all the way
  CHECK(allclose(x.grad(), from_vector<double>({15, 15}), 0, 0));
  Tensor w = from_vector<double>({1, 2}).requires_grad_();
  Tensor u = exp(w);
  sum(u * u + u).backward();  // u's two gradients: 2u·1 then 1, the second into the first
  const std::vector<double> wv = w.grad().to_vector();
  for (int i = 0; i < 2; ++i) CHECK(wv[i] == doctest::Approx(2 * std::exp(2.0 * (i + 1)) + std::exp(i + 1.0)));
}

TEST_CASE("the graph is freed after backward unless retain_graph") {
  Tensor x = randn64({3}, 1);
  Tensor y = sum(exp(x));
  y.backward(Tensor(), /*retain_graph=*/true);
  y.backward();  // allowed: retained
  CHECK(allclose(x.grad(), 2.0 * exp(x.detach())));
  CHECK_THROWS_WITH_AS(y.backward(), doctest::Contains("retain_graph"), Error);
}

TEST_CASE("a non-scalar output needs an explicit gradient of its shape") {
  Tensor x = randn64({2, 3}, 2);
  Tensor y = x * 3.0;
  CHECK_THROWS_WITH_AS(y.backward(), doctest::Contains("non-scalar"), Error);
  CHECK_THROWS_WITH_AS(y.backward(ones({3, 2}, float64)), doctest::Contains("does not match"), Error);
  y.backward(ones({2, 3}, float64));
  CHECK(allclose(x.grad(), full({2, 3}, 3.0, float64)));
}

TEST_CASE("NoGradGuard records nothing; detach cuts the graph but shares data") {
  Tensor x = randn64({4}, 3);
  {
    NoGradGuard guard;
    Tensor y = x * x;
    CHECK_FALSE(y.requires_grad());
  }
  CHECK((x * x).requires_grad());
  Tensor d = x.detach();
  CHECK_FALSE(d.requires_grad());
  CHECK(d.data_ptr() == x.data_ptr());
  Tensor c = from_vector<double>({1.0});
  CHECK_THROWS_WITH_AS(sum(c * 2.0).backward(), doctest::Contains("does not require grad"), Error);
}

TEST_CASE("requires_grad_ only on floating leaves") {
  Tensor x = randn64({2}, 4);
  Tensor y = x * 2.0;
  CHECK_THROWS_WITH_AS(y.requires_grad_(), doctest::Contains("leaf"), Error);
  CHECK_THROWS_WITH_AS(arange(3).requires_grad_(), doctest::Contains("int64"), Error);
}

TEST_CASE("a 20000-op chain backpropagates without recursion limits") {
  Tensor x = from_vector<double>({1.0}).requires_grad_();
  Tensor y = x;
  for (int i = 0; i < 20000; ++i) y = y * 1.0001;
  sum(y).backward();
  CHECK(x.grad().item() == doctest::Approx(std::pow(1.0001, 20000)).epsilon(1e-9));
}

TEST_CASE("custom_function: hand-written backward, saved tensors, shape checks") {
  // f(x, w) = sum_j x_ij^2 * w_j with a hand-written gradient.
  auto f = [](const Tensor& x, const Tensor& w) {
    return custom_function(
        "square_weighted", {x, w},
        [](const std::vector<Tensor>& in) {
          Tensor sq = in[0] * in[0];
          return Forward{sum(sq * in[1], {-1}), {in[0], in[1], sq}};
        },
        [](const std::vector<Tensor>& saved, const Tensor& g) -> std::vector<Tensor> {
          const Tensor &x = saved[0], &w = saved[1], &sq = saved[2];
          Tensor gx = 2.0 * x * w * g.unsqueeze(-1);
          Tensor gw = sum(sq * g.unsqueeze(-1), {0});
          return {gx, gw};
        });
  };
  Tensor x = randn64({3, 4}, 5), w = randn64({4}, 6);
  CHECK_GRADCHECK([&](const std::vector<Tensor>& in) { return f(in[0], in[1]); }, {x, w});
  // Its forward ran without recording: only the custom node is in the graph.
  Tensor y = f(x, w);
  CHECK(y.requires_grad());
  CHECK_FALSE(y.is_leaf());

  // A backward that returns the wrong shape is caught by the engine, naming the function.
  Tensor z = custom_function(
      "bad_grad", {x},
      [](const std::vector<Tensor>& in) { return Forward{sum(in[0]), {}}; },
      [](const std::vector<Tensor>&, const Tensor&) -> std::vector<Tensor> { return {ones({2}, float64)}; });
  CHECK_THROWS_WITH_AS(z.backward(), doctest::Contains("bad_grad"), Error);
}

TEST_CASE("gradcheck reports a wrong gradient with input, element and both values") {
  Tensor x = randn64({5}, 7);
  auto wrong = [](const std::vector<Tensor>& in) {
    return custom_function(
        "wrong_square", in,
        [](const std::vector<Tensor>& v) { return Forward{v[0] * v[0], {v[0]}}; },
        [](const std::vector<Tensor>& s, const Tensor& g) -> std::vector<Tensor> {
          return {3.0 * s[0] * g};  // should be 2x
        });
  };
  GradcheckResult r = gradcheck(wrong, {x});
  CHECK_FALSE(r.ok);
  CHECK(r.message.find("input 0") != std::string::npos);
  CHECK(r.message.find("element [0]") != std::string::npos);  // the first element already differs
  CHECK(r.message.find("analytic") != std::string::npos);
  CHECK(r.message.find("numeric") != std::string::npos);
  CHECK_THROWS_WITH_AS(gradcheck(wrong, {randn(std::vector<int64_t>{3}).requires_grad_()}),
                       doctest::Contains("float64"), Error);
}

TEST_CASE("gradients of non-contiguous leaves land in the leaf's shape") {
  Tensor base = randn64({4, 3}, 8, false);
  Tensor xt = base.t().detach().requires_grad_();  // shape (3, 4), strides (1, 3)
  CHECK_FALSE(xt.is_contiguous());
  CHECK_GRADCHECK([](const std::vector<Tensor>& in) { return exp(in[0]) * 2.0; }, {xt});
}
