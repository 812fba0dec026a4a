// Registry cases: every view (and views of non-contiguous leaves), copies, joins, indexing with
// repeated indices (accumulating gradients), and dtype conversions.
#include "ops_util.h"

namespace linea::check {

std::vector<OpCase> shape_cases() {
  using V = const std::vector<Tensor>&;
  const Tol E = Tol::Elementwise;
  return {
      // ---- views
      {"view", {{2, 3, 4}}, [](V x) { return x[0].view({4, -1}); }},
      {"reshape", {{2, 3, 4}}, [](V x) { return x[0].reshape({6, 4}); }},
      {"reshape of a transpose (copy)", {{2, 3, 4}}, [](V x) { return x[0].transpose(0, 2).reshape({-1}); }},
      {"reshape of a transposed leaf", {transposed({4, 3})}, [](V x) { return x[0].reshape({2, 6}); }},
      {"permute", {{2, 3, 4}}, [](V x) { return x[0].permute({1, 2, 0}); }},
      {"transpose", {{2, 3, 4}}, [](V x) { return x[0].transpose(-1, 0); }},
      {"t", {{3, 5}}, [](V x) { return x[0].t(); }},
      {"unsqueeze", {{2, 3, 4}}, [](V x) { return x[0].unsqueeze(1).unsqueeze(-1); }},
      {"narrow", {{2, 3, 4}}, [](V x) { return x[0].narrow(1, 1, 2); }},
      {"slice", {{2, 3, 4}}, [](V x) { return x[0].slice(2, -3, 4, 2); }},
      {"slice of a transposed leaf", {transposed({4, 3})}, [](V x) { return x[0].slice(1, 0, 3, 2).flatten(); }},
      {"select", {{2, 3, 4}}, [](V x) { return x[0].select(1, -1); }},
      {"flatten", {{2, 3, 4}}, [](V x) { return x[0].flatten(1); }},
      {"unflatten", {{2, 3, 4}}, [](V x) { return x[0].unflatten(2, {2, 2}); }},
      {"chunk", {{2, 3, 4}}, [](V x) { return x[0].chunk(3, 2)[1]; }},
      {"split", {{2, 3, 4}}, [](V x) { return x[0].split(2, 1)[1]; }},
      {"squeeze", {{3, 1}}, [](V x) { return x[0].squeeze(); }},
      {"squeeze dim", {{3, 1}}, [](V x) { return x[0].squeeze(1); }},
      {"expand", {{3, 1}}, [](V x) { return x[0].expand({2, 3, 4}); }},
      {"expand of a transposed leaf", {transposed({4, 3})},
       [](V x) { return x[0].select(0, 2).unsqueeze(0).expand({2, 3}); }},
      {"overlapping views of one input", {{2, 3, 4}}, [](V x) { return x[0].narrow(2, 0, 3) * x[0].narrow(2, 1, 3); }},
      {"view chain: permute, slice, reshape", {{2, 3, 4}},
       [](V x) { return x[0].permute({2, 0, 1}).slice(0, 1, 4, 2).reshape({2, -1}); }},
      {"select, narrow, squeeze, unsqueeze", {{3, 1, 5}},
       [](V x) { return x[0].select(0, 1).narrow(1, 1, 3).squeeze().unsqueeze(0) * 2.0; }},
      {"flatten, unflatten, view", {{2, 3, 4}}, [](V x) { return x[0].flatten(1).unflatten(1, {4, 3}).view({-1}); }},
      // ---- copies
      {"contiguous of a permute", {{2, 3, 4}}, [](V x) { return x[0].permute({2, 0, 1}).contiguous(); }},
      {"contiguous of a transposed leaf", {transposed({4, 3})}, [](V x) { return x[0].contiguous(); }},
      {"clone", {{2, 3, 4}}, [](V x) { return x[0].clone(); }},
      {"clone of a strided slice", {{4, 6}}, [](V x) { return x[0].slice(1, 1, 6, 2).clone(); }},
      {"expand + contiguous", {{3, 1}}, [](V x) { return x[0].expand({3, 4}).contiguous(); }},
      {"t, expand, contiguous, view", {{3, 1}}, [](V x) { return x[0].t().expand({2, 1, 3}).contiguous().view({6}); }},
      // ---- joins
      {"cat of three, one transposed", {{2, 3}, {2, 1}, transposed({2, 4})}, [](V x) { return cat(x, -1); }},
      {"cat of transposed views, dim 0", {{2, 3}, transposed({2, 4})},
       [](V x) { return cat({x[0].t(), x[1].t()}, 0); }},
      {"cat of one input twice", {{2, 3}}, [](V x) { return cat({x[0], x[0]}, 0); }},
      {"cat of non-contiguous, dim 1", {{4, 3}, {3, 2}}, [](V x) { return cat({x[0].t(), x[1]}, 1); }},
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
      {"stack dim 0", {{3, 4}, {3, 4}}, [](V x) { return stack({x[0], x[1]}, 0); }},
      {"stack dim 1 of a strided leaf", {{2, 3}, strided({2, 3})}, [](V x) { return stack(x, 1); }},
      {"stack dim 2", {{3, 4}, {3, 4}}, [](V x) { return stack({x[0], x[1].t().t()}, 2); }},
      {"stack of one input twice", {{2, 3}}, [](V x) { return stack({x[0], x[0].t().t()}, -1); }},
      // ---- indexing (repeated indices: the gradient accumulates)
      {"index_select dim 0 (repeats)", {{5, 3}},
       [](V x) { return index_select(x[0], 0, index(x[0], {4, 0, 4, 2}, {4})); }},
      {"index_select dim 1", {{3, 5}}, [](V x) { return index_select(x[0], 1, index(x[0], {1, 1, 3}, {3})); }},
      {"index_select of a transposed leaf", {transposed({4, 3})},
       [](V x) { return index_select(x[0], 0, index(x[0], {3, 0, 3, 3, 1}, {5})); }},
      {"gather dim 0", {{4, 3}}, [](V x) { return gather(x[0], 0, index(x[0], {3, 0, 1, 0, 0, 2}, {2, 3})); }},
      {"gather dim 1", {{3, 4}}, [](V x) { return gather(x[0], 1, index(x[0], {3, 3, 0, 1, 2, 0}, {3, 2})); }},
      {"gather of a transposed leaf", {transposed({4, 3})},
       [](V x) { return gather(x[0], 0, index(x[0], {0, 2, 2, 1, 0, 0}, {2, 3})); }},
      {"scatter_add dim 0 (repeats)", {{3, 4}, {2, 4}},
       [](V x) { return scatter_add(x[0], 0, index(x[0], {1, 1, 0, 2, 1, 1, 0, 2}, {2, 4}), x[1]); }},
      {"scatter_add dim 1", {{3, 4}, {3, 2}},
       [](V x) { return scatter_add(x[0], 1, index(x[0], {0, 0, 3, 1, 2, 2}, {3, 2}), x[1]); }},
      {"scatter_add into a transposed leaf", {transposed({4, 3}), {2, 3}},
       [](V x) { return scatter_add(x[0], -1, index(x[0], {0, 2, 2, 1, 0, 0}, {2, 3}), x[1]); }},
      {"embedding (repeats)", {{6, 4}}, [](V x) { return embedding(x[0], index(x[0], {5, 0, 5, 2, 2, 1}, {2, 3})); }},
      {"embedding, transposed indices", {{6, 4}},
       [](V x) { return embedding(x[0], index(x[0], {5, 1, 1, 0, 5, 5}, {2, 3}).t()); }},
      {"one_hot", {{1}}, [](V x) { return one_hot(index(x[0], {2, 0, 3, 3}, {2, 2}), 5); }, E, false},
      {"one_hot float", {{1}}, [](V x) { return one_hot(index(x[0], {1, 4, 0}, {3}), 5, x[0].dtype()); }, E, false},
      // ---- dtype conversions
      {"to float64 and back", {{3, 4}}, [](V x) { return exp(x[0].to(DType::Float64)).to(x[0].dtype()); }},
      {"to int64 (truncation)", {{3, 4}}, [](V x) { return (x[0] * 3.0).to(DType::Int64); }, E, false},
      {"to bool / uint8", {{3, 4}}, [](V x) { return clamp(x[0], 0, 1).to(DType::Bool).to(DType::UInt8); }, E, false},
      nan_stops_at({0}, {"int64 -> float", {{3, 4}},  // an integer has no NaN
                         [](V x) { return (x[0] * 3.0).to(DType::Int64).to(x[0].dtype()); }, E, false}),
  };
}

}  // namespace linea::check
