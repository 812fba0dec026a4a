// The table the device-parametrised tests run: every public op of autograd/ops_*.h (and the
// attention / loss functions models use), each as {name, input shapes, f(inputs) -> Tensor}.
// tests/test_gpu_ops.cpp runs each case on the CPU and on CUDA from identical float32 and float64
// inputs and compares outputs and gradients; tests/test_gpu_autograd.cpp gradchecks every
// differentiable case in float64 on the GPU. One table, so a new op is one new line.
//
// Inputs are N(0, 1) floating tensors of the given shapes, in the test's dtype, on one device;
// anything else a case needs (indices, masks, positive values) it builds from them on their device.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "helpers.h"

namespace linea::testing {

// Float32 tolerances (|gpu - cpu| <= atol + rtol |cpu|): elementwise kernels round once per
// element, so they match the CPU to a few ulps; reductions and products sum in another order.
// Float64 results agree to 1e-10 everywhere.
enum class Tol { Elementwise, Reduction };
inline double rtol32(Tol t) { return t == Tol::Elementwise ? 1e-5 : 1e-4; }
inline double atol32(Tol t) { return t == Tol::Elementwise ? 1e-6 : 1e-5; }
constexpr double kTol64 = 1e-10;

struct OpCase {
  std::string name;
  std::vector<Shape> shapes;
  std::function<Tensor(const std::vector<Tensor>&)> f;
  Tol tol = Tol::Elementwise;
  bool differentiable = true;  // false: integer/bool outputs, or no gradient path
};

namespace cases {
namespace F = nn::functional;
// A positive version of x, for log / sqrt / pow / division.
inline Tensor pos(const Tensor& x) { return abs(x) + 0.5; }
// An int64 index tensor with these values on x's device.
inline Tensor index(const Tensor& x, std::vector<int64_t> v, Shape shape) { return from_vector(v, shape, x.device()); }
}  // namespace cases

inline std::vector<OpCase> op_cases() {
  using namespace cases;
  using V = const std::vector<Tensor>&;
  const Tol E = Tol::Elementwise, R = Tol::Reduction;
  constexpr F::FeatureMap kElu1 = F::FeatureMap::Elu1;  // smooth and > 0: a normaliser far from 0
  std::vector<OpCase> c = {
      // ---- unary
      {"neg", {{3, 4}}, [](V x) { return neg(x[0]); }},
      {"exp", {{3, 4}}, [](V x) { return exp(x[0]); }},
      {"log", {{3, 4}}, [](V x) { return log(pos(x[0])); }},
      {"sqrt", {{3, 4}}, [](V x) { return sqrt(pos(x[0])); }},
      {"rsqrt", {{3, 4}}, [](V x) { return rsqrt(pos(x[0])); }},
      {"tanh", {{3, 4}}, [](V x) { return tanh(x[0]); }},
      {"sigmoid", {{3, 4}}, [](V x) { return sigmoid(x[0]); }},
      {"relu", {{3, 4}}, [](V x) { return relu(x[0]); }},
      {"gelu erf", {{3, 4}}, [](V x) { return gelu(x[0]); }},
      {"gelu tanh", {{3, 4}}, [](V x) { return gelu(x[0], GeluApprox::Tanh); }},
      {"silu", {{3, 4}}, [](V x) { return silu(x[0]); }},
      {"abs", {{3, 4}}, [](V x) { return abs(x[0]); }},
      {"pow scalar", {{3, 4}}, [](V x) { return pow(pos(x[0]), 2.5); }},
      {"clamp", {{3, 4}}, [](V x) { return clamp(x[0], -0.5, 0.7); }},
      {"unary on a transposed view", {{4, 3}}, [](V x) { return tanh(x[0].t()); }},
      {"unary, large contiguous (vector path)", {{1027, 5}}, [](V x) { return sigmoid(x[0]); }},
      // ---- binary, broadcasting, scalars, non-contiguous operands
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
      {"binary, large contiguous (vector path)", {{2049, 3}, {2049, 3}}, [](V x) { return x[0] * x[1] - x[0]; }},
      // ---- comparisons (bool), where, tril / triu
      {"eq", {{3, 4}}, [](V x) { return eq(x[0], clamp(x[0], -0.5, 0.5)); }, E, false},
      {"ne", {{3, 4}}, [](V x) { return ne(x[0], clamp(x[0], -0.5, 0.5)); }, E, false},
      {"lt broadcast", {{3, 4}, {4}}, [](V x) { return lt(x[0], x[1]); }, E, false},
      {"le", {{3, 4}}, [](V x) { return le(x[0], clamp(x[0], -0.5, 0.5)); }, E, false},
      {"gt transposed", {{4, 3}, {3, 4}}, [](V x) { return gt(x[0].t(), x[1]); }, E, false},
      {"ge", {{3, 4}}, [](V x) { return ge(x[0], clamp(x[0], -0.5, 0.5)); }, E, false},
      {"where broadcast", {{3, 1}, {3, 4}, {4}}, [](V x) { return where(gt(x[0], 0.0 * x[0]), x[1], x[2]); }},
      {"tril", {{2, 4, 5}}, [](V x) { return tril(x[0], 1); }},
      {"triu", {{4, 5}}, [](V x) { return triu(x[0], -1); }},
      // ---- reductions and softmax
      {"sum all", {{3, 4, 5}}, [](V x) { return sum(x[0]); }, R},
      {"sum dims 0, 2", {{3, 4, 5}}, [](V x) { return sum(x[0], {0, 2}); }, R},
      {"sum of a permuted view", {{3, 4, 5}}, [](V x) { return sum(x[0].permute({2, 0, 1}), {1}); }, R},
      {"sum long rows", {{3, 5000}}, [](V x) { return sum(x[0], {1}); }, R},
      {"sum long columns", {{5000, 3}}, [](V x) { return sum(x[0], {0}); }, R},
      {"mean all", {{3, 4, 5}}, [](V x) { return mean(x[0]); }, R},
      {"var unbiased", {{3, 4, 5}}, [](V x) { return var(x[0], {1}); }, R},
      {"var population keepdim", {{3, 4, 5}}, [](V x) { return var(x[0], {0, 2}, true, 0); }, R},
      {"max all", {{3, 4, 5}}, [](V x) { return max(x[0]); }, R},
      {"min dims 1, 2", {{3, 4, 5}}, [](V x) { return min(x[0], {1, 2}); }, R},
      {"logsumexp", {{3, 4, 5}}, [](V x) { return logsumexp(x[0], {-1}); }, R},
      {"logsumexp large values", {{3, 7}}, [](V x) { return logsumexp(x[0] * 100.0, {1}); }, R},
      {"softmax last dim", {{3, 4, 5}}, [](V x) { return softmax(x[0]); }, R},
      {"softmax dim 0", {{3, 4, 5}}, [](V x) { return softmax(x[0], 0); }, R},
      {"softmax long rows", {{4, 3000}}, [](V x) { return softmax(x[0] * 10.0); }, R},
      {"log_softmax", {{3, 4, 5}}, [](V x) { return log_softmax(x[0], 1); }, R},
      {"log_softmax long rows", {{2, 1500}}, [](V x) { return log_softmax(x[0]); }, R},
      // ---- matmul
      {"matmul 2-d", {{3, 4}, {4, 5}}, [](V x) { return matmul(x[0], x[1]); }, R},
      {"matmul vector @ matrix", {{4}, {4, 5}}, [](V x) { return matmul(x[0], x[1]); }, R},
      {"matmul matrix @ vector", {{3, 4}, {4}}, [](V x) { return matmul(x[0], x[1]); }, R},
      {"matmul dot", {{6}, {6}}, [](V x) { return matmul(x[0], x[1]); }, R},
      {"matmul batched", {{2, 3, 4}, {2, 4, 5}}, [](V x) { return matmul(x[0], x[1]); }, R},
      {"matmul broadcast batch", {{2, 1, 3, 4}, {3, 4, 5}}, [](V x) { return matmul(x[0], x[1]); }, R},
      {"matmul a transposed", {{4, 3}, {4, 5}}, [](V x) { return matmul(x[0].t(), x[1]); }, R},
      {"matmul b transposed", {{3, 4}, {5, 4}}, [](V x) { return matmul(x[0], x[1].t()); }, R},
      {"matmul batched both transposed", {{2, 4, 3}, {2, 5, 4}},
       [](V x) { return matmul(x[0].transpose(1, 2), x[1].transpose(-1, -2)); }, R},
      {"matmul non-contiguous rows", {{3, 8}, {4, 5}}, [](V x) { return matmul(x[0].slice(1, 0, 8, 2), x[1]); }, R},
      {"matmul larger", {{64, 96}, {96, 80}}, [](V x) { return matmul(x[0], x[1]); }, R},
      // ---- views, copies, joins
      {"contiguous of a permute", {{2, 3, 4}}, [](V x) { return x[0].permute({2, 0, 1}).contiguous(); }},
      {"clone of a strided slice", {{4, 6}}, [](V x) { return x[0].slice(1, 1, 6, 2).clone(); }},
      {"reshape of a transpose (copy)", {{3, 4}}, [](V x) { return x[0].t().reshape({2, 6}); }},
      {"expand + contiguous", {{3, 1}}, [](V x) { return x[0].expand({3, 4}).contiguous(); }},
      {"select, narrow, squeeze, unsqueeze", {{3, 1, 5}},
       [](V x) { return x[0].select(0, 1).narrow(1, 1, 3).squeeze().unsqueeze(0) * 2.0; }},
      {"flatten, unflatten, view", {{2, 3, 4}}, [](V x) { return x[0].flatten(1).unflatten(1, {4, 3}).view({-1}); }},
      {"chunk + cat reversed", {{6, 4}},
       [](V x) {
         auto ch = x[0].chunk(3, 0);
         return cat({ch[2], ch[1], ch[0]}, 0);
       }},
      {"split + cat dim 1", {{3, 7}},
       [](V x) {
         auto s = x[0].split(3, 1);
         return cat({s[1], s[0], s[2]}, 1);
       }},
      {"cat of non-contiguous, dim 1", {{4, 3}, {3, 2}}, [](V x) { return cat({x[0].t(), x[1]}, 1); }},
      {"stack dim 0", {{3, 4}, {3, 4}}, [](V x) { return stack({x[0], x[1]}, 0); }},
      {"stack dim 2", {{3, 4}, {3, 4}}, [](V x) { return stack({x[0], x[1].t().t()}, 2); }},
      // ---- indexing
      {"index_select dim 0 (repeats)", {{5, 3}},
       [](V x) { return index_select(x[0], 0, index(x[0], {4, 0, 4, 2}, {4})); }},
      {"index_select dim 1", {{3, 5}}, [](V x) { return index_select(x[0], 1, index(x[0], {1, 1, 3}, {3})); }},
      {"gather dim 0", {{4, 3}},
       [](V x) { return gather(x[0], 0, index(x[0], {3, 0, 1, 0, 0, 2}, {2, 3})); }},
      {"gather dim 1", {{3, 4}},
       [](V x) { return gather(x[0], 1, index(x[0], {3, 3, 0, 1, 2, 0}, {3, 2})); }},
      {"scatter_add dim 0 (repeats)", {{3, 4}, {2, 4}},
       [](V x) { return scatter_add(x[0], 0, index(x[0], {1, 1, 0, 2, 1, 1, 0, 2}, {2, 4}), x[1]); }},
      {"scatter_add dim 1", {{3, 4}, {3, 2}},
       [](V x) { return scatter_add(x[0], 1, index(x[0], {0, 0, 3, 1, 2, 2}, {3, 2}), x[1]); }},
      {"embedding (repeats)", {{6, 4}}, [](V x) { return embedding(x[0], index(x[0], {5, 0, 5, 2, 2, 1}, {2, 3})); }},
      {"one_hot", {{1}}, [](V x) { return one_hot(index(x[0], {2, 0, 3, 3}, {2, 2}), 5); }, E, false},
      {"one_hot float", {{1}}, [](V x) { return one_hot(index(x[0], {1, 4, 0}, {3}), 5, x[0].dtype()); }, E, false},
      // ---- normalisation
      {"layer_norm affine", {{3, 4, 8}, {8}, {8}}, [](V x) { return layer_norm(x[0], x[1], x[2]); }, R},
      {"layer_norm plain", {{5, 6}}, [](V x) { return layer_norm(x[0]); }, R},
      {"layer_norm long rows", {{3, 1000}, {1000}, {1000}}, [](V x) { return layer_norm(x[0], x[1], x[2]); }, R},
      {"rms_norm weight", {{3, 4, 8}, {8}}, [](V x) { return rms_norm(x[0], x[1]); }, R},
      {"rms_norm plain, long rows", {{2, 1500}}, [](V x) { return rms_norm(x[0]); }, R},
      // ---- dtype conversions
      {"to float64 and back", {{3, 4}}, [](V x) { return exp(x[0].to(DType::Float64)).to(x[0].dtype()); }},
      {"to int64 (truncation)", {{3, 4}}, [](V x) { return (x[0] * 3.0).to(DType::Int64); }, E, false},
      {"to bool / uint8", {{3, 4}}, [](V x) { return clamp(x[0], 0, 1).to(DType::Bool).to(DType::UInt8); }, E, false},
      {"int64 -> float", {{3, 4}}, [](V x) { return (x[0] * 3.0).to(DType::Int64).to(x[0].dtype()); }, E, false},
      {"argmax", {{3, 4, 5}}, [](V x) { return argmax(x[0], 1); }, E, false},
      {"argmax keepdim", {{3, 4, 5}}, [](V x) { return argmax(x[0], -1, true); }, E, false},
      // ---- the functions models use
      {"cross_entropy", {{6, 5}}, [](V x) { return nn::cross_entropy(x[0], index(x[0], {0, 4, 2, 2, 1, 3}, {6})); }, R},
      {"cross_entropy smoothed, ignore_index", {{2, 3, 5}},
       [](V x) {
         return nn::cross_entropy(x[0], index(x[0], {1, -100, 4, 0, 0, 3}, {2, 3}), {.label_smoothing = 0.1});
       }, R},
      {"softmax_attention", {{1, 2, 6, 4}, {1, 2, 6, 4}, {1, 2, 6, 3}},
       [](V x) { return F::softmax_attention(x[0], x[1], x[2]); }, R},
      {"softmax_attention causal", {{2, 1, 7, 4}, {2, 1, 7, 4}, {2, 1, 7, 4}},
       [](V x) { return F::softmax_attention(x[0], x[1], x[2], {.causal = true}); }, R},
      {"linear_attention", {{1, 2, 6, 4}, {1, 2, 6, 4}, {1, 2, 6, 3}},
       [](V x) { return F::linear_attention(x[0], x[1], x[2]); }, R},
      {"linear_attention causal", {{1, 2, 6, 4}, {1, 2, 6, 4}, {1, 2, 6, 3}},
       [](V x) { return F::linear_attention(x[0], x[1], x[2], {.causal = true}); }, R},
      {"mhla", {{1, 2, 8, 4}, {1, 2, 8, 4}, {1, 2, 8, 3}, {4, 4}},
       [](V x) { return F::mhla(x[0], x[1], x[2], sigmoid(x[3]), {.block_len = 2, .feature_map = kElu1}); }, R},
      {"mhla padded last block", {{1, 1, 7, 4}, {1, 1, 7, 4}, {1, 1, 7, 4}, {3, 3}},
       [](V x) { return F::mhla(x[0], x[1], x[2], sigmoid(x[3]), {.block_len = 3, .feature_map = kElu1}); }, R},
      {"mhla causal", {{1, 2, 12, 4}, {1, 2, 12, 4}, {1, 2, 12, 3}, {3, 3}},
       [](V x) {
         return F::mhla(x[0], x[1], x[2], x[3], {.causal = true, .block_len = 4, .feature_map = F::FeatureMap::Relu});
       }, R},
      {"mhla causal padded", {{1, 1, 10, 4}, {1, 1, 10, 4}, {1, 1, 10, 4}, {4, 4}},
       [](V x) { return F::mhla(x[0], x[1], x[2], x[3], {.causal = true, .block_len = 3}); }, R},
  };
  // Every reduction over each dim of a 3-d tensor, with and without keepdim.
  for (int64_t d = 0; d < 3; ++d)
    for (bool keep : {false, true}) {
      const std::string tag = fmt::format(" dim {}{}", d, keep ? " keepdim" : "");
      c.push_back({"sum" + tag, {{3, 4, 5}}, [=](V x) { return sum(x[0], {d}, keep); }, R});
      c.push_back({"mean" + tag, {{3, 4, 5}}, [=](V x) { return mean(x[0], {d}, keep); }, R});
      c.push_back({"max" + tag, {{3, 4, 5}}, [=](V x) { return max(x[0], {d}, keep); }, R});
      c.push_back({"min" + tag, {{3, 4, 5}}, [=](V x) { return min(x[0], {d}, keep); }, R});
      c.push_back({"logsumexp" + tag, {{3, 4, 5}}, [=](V x) { return logsumexp(x[0], {d}, keep); }, R});
      c.push_back({"argmax" + tag, {{3, 4, 5}}, [=](V x) { return argmax(x[0], d, keep); }, E, false});
    }
  return c;
}

// Inputs of a case: N(0, 1) from a seed of their own, made on the CPU and copied, so both
// devices see the very same numbers.
inline std::vector<Tensor> case_inputs(const OpCase& c, DType dtype, Device device, uint64_t seed) {
  Generator gen(seed);
  std::vector<Tensor> xs;
  for (const Shape& s : c.shapes) xs.push_back(randn(s, gen, dtype).to(device));
  return xs;
}

}  // namespace linea::testing
