// Grad-ready hooks (autograd::set_grad_ready_hook): called once per backward for each hooked
// leaf, with its final gradient, as soon as no node left to run can add to it. Data-parallel
// training (dist/data_parallel.h) starts its all-reduces from these calls.
#include <string>
#include <vector>

#include "helpers.h"

using namespace linea;
using linea::testing::allclose;
using linea::testing::randn64;

TEST_CASE("a hook sees the final gradient of a leaf reached along several paths, once") {
  Tensor x = randn64({3}, 1);
  std::vector<Tensor> seen;
  autograd::set_grad_ready_hook(x, [&](const Tensor& g) { seen.push_back(g.clone()); });
  Tensor h = exp(x);
  sum(h * x + x * 2.0 + h).backward();  // x feeds three nodes: the hook waits for all of them
  REQUIRE(seen.size() == 1);
  CHECK(allclose(seen[0], x.grad()));
  const Tensor e = exp(x.detach());
  CHECK(allclose(x.grad(), e * x.detach() + e + 2.0 + e, 1e-12));
}

TEST_CASE("hooks fire while backward is still running, last layer first") {
  // y = sum(w2 * tanh(w1 * x)): w2's gradient is final before w1's node has run.
  Tensor x = randn64({4}, 2, false), w1 = randn64({4}, 3), w2 = randn64({4}, 4);
  std::vector<std::string> order;
  bool w1_grad_at_w2_hook = true;
  autograd::set_grad_ready_hook(w2, [&](const Tensor&) {
    order.push_back("w2");
    w1_grad_at_w2_hook = w1.grad().defined();
  });
  autograd::set_grad_ready_hook(w1, [&](const Tensor&) { order.push_back("w1"); });
  sum(w2 * tanh(w1 * x)).backward();
  CHECK(order == std::vector<std::string>{"w2", "w1"});
  CHECK_FALSE(w1_grad_at_w2_hook);
}

TEST_CASE("a hook fires on every backward with the accumulated gradient; an empty hook removes it") {
  Tensor w = randn64({2}, 5);
  std::vector<Tensor> seen;
  autograd::set_grad_ready_hook(w, [&](const Tensor& g) { seen.push_back(g.clone()); });
  sum(w * 3.0).backward();
  sum(w * 4.0).backward();  // accumulates: the hook sees 3 + 4
  REQUIRE(seen.size() == 2);
  CHECK(allclose(seen[1], full({2}, 7.0, {float64})));
  autograd::set_grad_ready_hook(w, {});
  sum(w).backward();
  CHECK(seen.size() == 2);
}

TEST_CASE("a leaf outside the graph gets no call; backward on a leaf itself does") {
  Tensor a = randn64({2}, 6), b = randn64({2}, 7);
  int calls_a = 0, calls_b = 0;
  autograd::set_grad_ready_hook(a, [&](const Tensor&) { ++calls_a; });
  autograd::set_grad_ready_hook(b, [&](const Tensor&) { ++calls_b; });
  sum(a * 2.0).backward();
  CHECK(calls_a == 1);
  CHECK(calls_b == 0);
  b.backward(ones({2}, {float64}));
  CHECK(calls_b == 1);
}

TEST_CASE("edges that carry no gradient still release the leaf") {
  // `stop` passes values through and returns no gradient: its node runs without producing one,
  // and exp's node, below it, is never reached by a gradient at all. w's hook must still fire.
  auto stop = [](const Tensor& t) {
    return custom_function(
        "stop", {t}, [](const std::vector<Tensor>& in) { return Forward{in[0] * 1.0, {}}; },
        [](const std::vector<Tensor>&, const Tensor&) { return std::vector<Tensor>{Tensor()}; });
  };
  Tensor w = randn64({3}, 8);
  std::vector<Tensor> seen;
  autograd::set_grad_ready_hook(w, [&](const Tensor& g) { seen.push_back(g.clone()); });
  (sum(w * 2.0) + sum(stop(exp(w))) + sum(stop(w))).backward();
  REQUIRE(seen.size() == 1);
  CHECK(allclose(seen[0], full({3}, 2.0, {float64})));
}

TEST_CASE("set_grad_ready_hook rejects what is not a leaf that requires grad") {
  Tensor w = randn64({2}, 9);
  CHECK_THROWS_WITH_AS(autograd::set_grad_ready_hook(w * 2.0, {}), doctest::Contains("op output"), Error);
  CHECK_THROWS_WITH_AS(autograd::set_grad_ready_hook(randn64({2}, 1, false), {}),
                       doctest::Contains("without requires_grad"), Error);
  CHECK_THROWS_WITH_AS(autograd::set_grad_ready_hook(Tensor(), {}), doctest::Contains("undefined"), Error);
}
