// Registry cases: reductions over every set of dims (with and without keepdim, contiguous and
// transposed inputs), long rows and columns (the multi-block kernels), softmax / log_softmax along
// every dim, masked (-inf) and large logits, argmax.
#include <cmath>

#include "ops_util.h"
#include "linea/tensor/error.h"

namespace linea::check {

std::vector<OpCase> reduce_cases() {
  using V = const std::vector<Tensor>&;
  const Tol E = Tol::Elementwise, R = Tol::Reduction;
  std::vector<OpCase> c = {
      {"sum of a permuted view", {{3, 4, 5}}, [](V x) { return sum(x[0].permute({2, 0, 1}), {1}); }, R},
      {"sum long rows", {{3, 5000}}, [](V x) { return sum(x[0], {1}); }, R},
      {"sum long columns", {{5000, 3}}, [](V x) { return sum(x[0], {0}); }, R},
      {"var of a sliced view", {{3, 5}}, [](V x) { return var(x[0].slice(1, 0, 5, 2), {0, 1}); }, R},
      {"logsumexp large values", {{3, 7}}, [](V x) { return logsumexp(x[0] * 100.0, {1}); }, R},
      {"softmax long rows", {{2, 1500}}, [](V x) { return softmax(x[0] * 10.0); }, R},
      {"softmax masked (-inf) logits", {{2, 3}}, [](V x) { return softmax(x[0] + mask(x[0]), 1); }, R},
      // log_softmax is -inf at masked entries: only the live columns 0 and 2 are compared.
      {"log_softmax masked (-inf) logits", {{2, 3}},
       [](V x) { return log_softmax(x[0] + mask(x[0]), 1).slice(1, 0, 3, 2); }, R},
      {"log_softmax long rows", {{2, 1500}}, [](V x) { return log_softmax(x[0]); }, R},
      {"argmax", {{3, 4, 5}}, [](V x) { return argmax(x[0], 1); }, E, false},
      {"argmax keepdim", {{3, 4, 5}}, [](V x) { return argmax(x[0], -1, true); }, E, false},
  };
  // Every reduction over each set of dims, with and without keepdim; the keepdim cases take a
  // transposed (non-contiguous) input. var's correction: 1 without keepdim, 0 with it.
  const std::vector<std::vector<int64_t>> dim_sets = {{}, {0}, {1}, {2}, {0, 1}, {1, 2}, {2, 0}, {-1, 0}, {0, 1, 2}};
  for (const auto& dims : dim_sets)
    for (bool keep : {false, true}) {
      const std::string tag = fmt::format(" dims [{}]{}", fmt::join(dims, ", "), keep ? " keepdim, transposed" : "");
      const Input in = keep ? transposed({3, 4, 5}) : Input{3, 4, 5};
      const int64_t corr = keep ? 0 : 1;
      c.push_back({"sum" + tag, {in}, [=](V x) { return sum(x[0], dims, keep); }, R});
      c.push_back({"mean" + tag, {in}, [=](V x) { return mean(x[0], dims, keep); }, R});
      c.push_back({"var" + tag, {in}, [=](V x) { return var(x[0], dims, keep, corr); }, R});
      c.push_back({"max" + tag, {in}, [=](V x) { return max(x[0], dims, keep); }, R});
      c.push_back({"min" + tag, {in}, [=](V x) { return min(x[0], dims, keep); }, R});
      if (!dims.empty())
        c.push_back({"logsumexp" + tag, {in}, [=](V x) { return logsumexp(x[0], dims, keep); }, R});
    }
  for (int64_t d : {0, 1, 2, -1}) {
    const std::string tag = fmt::format(" dim {}", d);
    c.push_back({"softmax" + tag, {{3, 4, 5}}, [=](V x) { return softmax(x[0], d); }, R});
    c.push_back({"softmax" + tag + " transposed", {transposed({3, 4, 5})}, [=](V x) { return softmax(x[0], d); }, R});
    c.push_back({"log_softmax" + tag, {{3, 4, 5}}, [=](V x) { return log_softmax(x[0], d); }, R});
    c.push_back({"log_softmax" + tag + " transposed", {transposed({3, 4, 5})},
                 [=](V x) { return log_softmax(x[0], d); }, R});
  }
  for (int64_t d = 0; d < 3; ++d)
    for (bool keep : {false, true})
      c.push_back({fmt::format("argmax dim {}{}", d, keep ? " keepdim" : ""), {{3, 4, 5}},
                   [=](V x) { return argmax(x[0], d, keep); }, E, false});
  return c;
}

}  // namespace linea::check
