// Registry cases: unary and binary elementwise ops (broadcasting, 0-d and constant operands,
// transposed and strided leaves), scalar operators, comparisons, where, tril / triu.
#include "ops_util.h"

namespace linea::check {

std::vector<OpCase> elementwise_cases() {
  using V = const std::vector<Tensor>&;
  const Tol E = Tol::Elementwise;
  std::vector<OpCase> c = {
      // ---- unary (more below)
      {"unary on a transposed view", {{4, 3}}, [](V x) { return tanh(x[0].t()); }},
      {"unary of a sliced view", {{4, 6}}, [](V x) { return tanh(x[0].slice(1, 1, 6, 2)); }},
      {"unary, large contiguous (vector path)", {{1027, 5}}, [](V x) { return sigmoid(x[0]); }},
      // ---- binary: broadcasting, scalars, non-contiguous operands
      {"add broadcast row", {{3, 4}, {4}}, [](V x) { return add(x[0], x[1]); }},
      {"sub broadcast 3-d", {{2, 1, 4}, {3, 1}}, [](V x) { return sub(x[0], x[1]); }},
      {"mul broadcast column", {{3, 4}, {3, 1}}, [](V x) { return mul(x[0], x[1]); }},
      {"div", {{3, 4}, {3, 4}}, [](V x) { return div(x[0], pos(x[1])); }},
      {"pow tensor", {{3, 4}, {4}}, [](V x) { return pow(pos(x[0]), x[1]); }},
      {"maximum", {{3, 4}, {3, 4}}, [](V x) { return maximum(x[0], x[1]); }},
      {"minimum broadcast", {{3, 4}, {1, 4}}, [](V x) { return minimum(x[0], x[1]); }},
      {"scalar operators", {{3, 4}}, [](V x) { return (2.0 - x[0] * 3.0) / 4.0 + 1.0 / pos(x[0]); }},
      {"add transposed + strided", {{4, 3}, {3, 8}}, [](V x) { return x[0].t() + x[1].slice(1, 0, 8, 2); }},
      {"mul expanded 0-stride", {{1, 5}, {4, 5}}, [](V x) { return x[0].expand({4, 5}) * x[1]; }},
      {"mul int64 operand (no gradient)", {{2, 3}}, [](V x) { return x[0] * index(x[0], {1, -2, 3}, {3}); }},
      {"binary, large contiguous (vector path)", {{2049, 3}, {2049, 3}}, [](V x) { return x[0] * x[1] - x[0]; }},
      // ---- comparisons (bool), where, tril / triu
      {"eq", {{3, 4}}, [](V x) { return eq(x[0], clamp(x[0], -0.5, 0.5)); }, E, false},
      {"ne", {{3, 4}}, [](V x) { return ne(x[0], clamp(x[0], -0.5, 0.5)); }, E, false},
      {"lt broadcast", {{3, 4}, {4}}, [](V x) { return lt(x[0], x[1]); }, E, false},
      {"le", {{3, 4}}, [](V x) { return le(x[0], clamp(x[0], -0.5, 0.5)); }, E, false},
      {"gt transposed", {{4, 3}, {3, 4}}, [](V x) { return gt(x[0].t(), x[1]); }, E, false},
      {"ge", {{3, 4}}, [](V x) { return ge(x[0], clamp(x[0], -0.5, 0.5)); }, E, false},
      // x[0] is only the condition's operand: NaN > 0 is false, so b is taken (as in PyTorch)
      nan_stops_at({0}, {"where broadcast", {{3, 1}, {3, 4}, {4}},
                         [](V x) { return where(gt(x[0], 0.0 * x[0]), x[1], x[2]); }}),
      nan_stops_at({0}, {"where 0-d operand", {constant({3, 1}), {3, 4}, {}},
                         [](V x) { return where(gt(x[0], 0.0 * x[0]), x[1], x[2]); }}),
      nan_stops_at({0}, {"where broadcast both operands", {constant({3, 1}), {4}, {2, 3, 1}},
                         [](V x) { return where(gt(x[0], 0.0 * x[0]), x[1], x[2]); }}),
      {"tril", {{2, 4, 5}}, [](V x) { return tril(x[0], 1); }},
      {"triu", {{4, 5}}, [](V x) { return triu(x[0], -1); }},
      {"tril + triu of a transposed view", {{2, 3, 3}},
       [](V x) { return tril(x[0], 1) + triu(x[0].transpose(1, 2), -1) * 2.0; }},
  };
  // Every unary op on a contiguous and on a transposed leaf. Domains: positive for log, sqrt,
  // rsqrt and pow; N(0, 1) elsewhere, where kinks (relu, abs, clamp's bounds) are hit with
  // probability 0.
  const std::vector<std::pair<std::string, std::function<Tensor(const Tensor&)>>> unary = {
      {"neg", [](const Tensor& x) { return neg(x); }},
      {"exp", [](const Tensor& x) { return exp(x); }},
      {"log", [](const Tensor& x) { return log(pos(x)); }},
      {"sqrt", [](const Tensor& x) { return sqrt(pos(x)); }},
      {"rsqrt", [](const Tensor& x) { return rsqrt(pos(x)); }},
      {"tanh", [](const Tensor& x) { return tanh(x); }},
      {"sin", [](const Tensor& x) { return sin(x); }},
      {"cos", [](const Tensor& x) { return cos(x); }},
      {"sigmoid", [](const Tensor& x) { return sigmoid(x); }},
      {"relu", [](const Tensor& x) { return relu(x); }},
      {"gelu erf", [](const Tensor& x) { return gelu(x); }},
      {"gelu tanh", [](const Tensor& x) { return gelu(x, GeluApprox::Tanh); }},
      {"silu", [](const Tensor& x) { return silu(x); }},
      {"softplus", [](const Tensor& x) { return softplus(x); }},
      {"leaky_relu", [](const Tensor& x) { return leaky_relu(x, 0.1); }},
      {"abs", [](const Tensor& x) { return abs(x); }},
      {"pow scalar", [](const Tensor& x) { return pow(pos(x), 2.5); }},
      {"pow negative scalar", [](const Tensor& x) { return pow(pos(x), -1.5); }},
      {"clamp", [](const Tensor& x) { return clamp(x, -0.5, 0.7); }},
  };
  for (const auto& [name, op] : unary) {
    auto f = [op = op](V x) { return op(x[0]); };
    c.push_back({name, {{3, 4}}, f});
    c.push_back({name + " of a transposed leaf", {transposed({3, 4})}, f});
  }
  // Every binary op on every kind of operand pair its backward must handle: broadcasting both
  // ways (summed gradients), a 0-d operand on either side, transposed and strided leaves, and a
  // constant operand. div's divisor and pow's base are made positive.
  const std::vector<std::pair<std::string, std::function<Tensor(const Tensor&, const Tensor&)>>> binary = {
      {"add", [](const Tensor& a, const Tensor& b) { return a + b; }},
      {"sub", [](const Tensor& a, const Tensor& b) { return a - b; }},
      {"mul", [](const Tensor& a, const Tensor& b) { return a * b; }},
      {"div", [](const Tensor& a, const Tensor& b) { return a / exp(b); }},
      {"pow", [](const Tensor& a, const Tensor& b) { return pow(exp(a), b); }},
      {"maximum", [](const Tensor& a, const Tensor& b) { return maximum(a, b); }},
      {"minimum", [](const Tensor& a, const Tensor& b) { return minimum(a, b); }},
  };
  for (const auto& [name, op] : binary) {
    auto f = [op = op](V x) { return op(x[0], x[1]); };
    c.push_back({name + " operands [3, 1, 4] and [2, 4]", {{3, 1, 4}, {2, 4}}, f});
    c.push_back({name + " with a 0-d b", {{2, 4}, {}}, f});
    c.push_back({name + " with a 0-d a", {{}, {3, 2}}, f});
    c.push_back({name + " of transposed and strided leaves", {transposed({3, 4}), strided({3, 4})}, f});
    c.push_back({name + " with a constant b", {{2, 3}, constant({2, 3})}, f});
  }
  return c;
}

}  // namespace linea::check
