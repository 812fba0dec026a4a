// Registry cases: matmul (every operand rank, batch broadcasting, transposed operands), linear,
// linear_add, the norms, the losses, and the attention functions: softmax, linear (every feature
// map, causal or not) and MHLA in its fused and composite forms (padded last blocks, M = 1, d != dv, causal), and the
// three on a packed qkv projection; convolution, pooling and batch norm.
#include "mhla_reference.h"
#include "ops_util.h"
#include "linea/tensor/error.h"

namespace linea::check {

namespace {
namespace F = nn::functional;
using V = const std::vector<Tensor>&;

const auto map_name = feature_map_name;
constexpr F::FeatureMap kMaps[] = {F::FeatureMap::ReluEps, F::FeatureMap::Elu1, F::FeatureMap::Relu,
                                   F::FeatureMap::Identity};

// Under the identity feature map q and k are made positive, so that normalisers stay away from 0.
Tensor feature_input(const Tensor& x, F::FeatureMap fm) { return fm == F::FeatureMap::Identity ? pos(x) : x; }

// MHLA cases: [B, H, N, d] / dv, block length L; non-causal mix in (0, 1) (a positive normaliser).
struct MhlaShape {
  int64_t B, H, N, L, d, dv;
};
std::string mhla_tag(const MhlaShape& s, F::FeatureMap fm) {
  return fmt::format("N={} L={} d={} dv={} {}", s.N, s.L, s.d, s.dv, map_name(fm));
}
void add_mhla(std::vector<OpCase>& c, const std::string& form, const MhlaShape& s, F::FeatureMap fm, bool causal,
              bool views) {
  const int64_t M = (s.N + s.L - 1) / s.L;
  const F::MHLAOptions o{.causal = causal, .block_len = s.L, .feature_map = fm};
  auto in = [views](Shape sh) { return views ? strided(std::move(sh)) : Input(std::move(sh), Layout::Contiguous, true); };
  const std::vector<Input> inputs = {in({s.B, s.H, s.N, s.d}), in({s.B, s.H, s.N, s.d}), in({s.B, s.H, s.N, s.dv}),
                                     views ? transposed({M, M}) : Input{M, M}};
  const bool fused = form == "mhla";
  OpFn f = [o, fused, causal](V x) {
    const Tensor q = feature_input(x[0], o.feature_map), k = feature_input(x[1], o.feature_map);
    const Tensor mix = causal ? x[3] : sigmoid(x[3]);
    return fused ? F::mhla(q, k, x[2], mix, o) : F::mhla_composite(q, k, x[2], mix, o);
  };
  c.push_back({fmt::format("{}{} {}{}", form, causal ? " causal" : "", mhla_tag(s, fm), views ? ", strided" : ""),
               inputs, f, Tol::Reduction});
}
// Convolution, pooling and batch norm (nn/functional/conv.h): stride, padding, dilation and groups
// alone and together, the transposed convolution with output_padding, pooling windows that overlap
// and that read padding, batch norm in training (batch statistics, running ones updated) and eval.
void add_conv_cases(std::vector<OpCase>& c) {
  const Tol R = Tol::Reduction;
  struct Geo {
    const char* tag;
    F::Size2 stride, padding, dilation;
    int64_t groups;
  };
  const Geo geos[] = {{"plain", 1, 0, 1, 1},
                      {"stride 2, padding 1", 2, 1, 1, 1},
                      {"stride (2, 1), padding (0, 2)", {2, 1}, {0, 2}, 1, 1},
                      {"dilation 2, padding 2", 1, 2, 2, 1},
                      {"groups 2", 1, 1, 1, 2},
                      {"groups 4 (depthwise), stride 2, dilation (1, 2)", 2, 1, {1, 2}, 4}};
  for (const Geo& g : geos) {
    c.push_back({fmt::format("conv2d {}", g.tag), {{2, 4, 6, 5}, {8, 4 / g.groups, 3, 2}, {8}},
                 [g](V x) { return F::conv2d(x[0], x[1], x[2], g.stride, g.padding, g.dilation, g.groups); }, R});
    c.push_back({fmt::format("conv_transpose2d {}", g.tag), {{2, 4, 4, 5}, {4, 8 / g.groups, 3, 2}, {8}},
                 [g](V x) {
                   return F::conv_transpose2d(x[0], x[1], x[2], g.stride, g.padding, 0, g.groups, g.dilation);
                 }, R});
  }
  c.push_back({"conv2d of a transposed x", {transposed({1, 2, 5, 4}), {3, 2, 2, 2}},
               [](V x) { return F::conv2d(x[0], x[1], Tensor(), 1, 1); }, R});
  c.push_back({"conv2d no bias, 1x1 kernel", {{2, 3, 4, 4}, {5, 3, 1, 1}},
               [](V x) { return F::conv2d(x[0], x[1]); }, R});
  c.push_back({"conv_transpose2d output_padding 1, stride 2", {{1, 3, 3, 3}, {3, 2, 3, 3}},
               [](V x) { return F::conv_transpose2d(x[0], x[1], Tensor(), 2, 1, 1); }, R});
  for (const auto& [name, pool] : {std::pair{"max_pool2d", &F::max_pool2d}, std::pair{"avg_pool2d", &F::avg_pool2d}}) {
    c.push_back({fmt::format("{} 2x2", name), {{2, 3, 4, 6}}, [pool](V x) { return pool(x[0], 2, 0, 0); }, R});
    c.push_back({fmt::format("{} 3x3 stride 2 padding 1 (overlapping, padded)", name), {{2, 2, 5, 6}},
                 [pool](V x) { return pool(x[0], 3, 2, 1); }, R});
  }
  c.push_back({"batch_norm training, running stats", {{3, 4, 3, 2}, {4}, {4}},
               [](V x) {
                 const Options o(x[0].dtype(), x[0].device());
                 return F::batch_norm(x[0], zeros({4}, o), ones({4}, o), x[1], x[2], true);
               }, R});
  c.push_back({"batch_norm training, no affine, [N, C, L]", {{4, 3, 5}},
               [](V x) { return F::batch_norm(x[0], Tensor(), Tensor(), Tensor(), Tensor(), true); }, R});
  c.push_back({"batch_norm eval", {{2, 3, 2, 2}, constant({3}), constant({3}), {3}, {3}},
               [](V x) { return F::batch_norm(x[0], x[1], pos(x[2]), x[3], x[4], false); }, R});
}

}  // namespace

std::vector<OpCase> nn_cases() {
  const Tol R = Tol::Reduction;
  std::vector<OpCase> c = {
      // ---- matmul
      {"matmul 2-d", {{3, 4}, {4, 5}}, [](V x) { return matmul(x[0], x[1]); }, R},
      {"matmul vector @ matrix", {{4}, {4, 5}}, [](V x) { return matmul(x[0], x[1]); }, R},
      {"matmul matrix @ vector", {{3, 4}, {4}}, [](V x) { return matmul(x[0], x[1]); }, R},
      {"matmul dot", {{6}, {6}}, [](V x) { return matmul(x[0], x[1]); }, R},
      {"matmul batched", {{2, 3, 4}, {2, 4, 5}}, [](V x) { return matmul(x[0], x[1]); }, R},
      {"matmul broadcast batch", {{2, 1, 3, 4}, {3, 4, 5}}, [](V x) { return matmul(x[0], x[1]); }, R},
      {"matmul a transposed", {{4, 3}, {4, 5}}, [](V x) { return matmul(x[0].t(), x[1]); }, R},
      {"matmul b transposed", {{3, 4}, {5, 4}}, [](V x) { return matmul(x[0], x[1].t()); }, R},
      {"matmul of transposed leaves", {transposed({3, 4}), transposed({4, 5})},
       [](V x) { return matmul(x[0], x[1]); }, R},
      {"matmul batched both transposed", {{2, 4, 3}, {2, 5, 4}},
       [](V x) { return matmul(x[0].transpose(1, 2), x[1].transpose(-1, -2)); }, R},
      {"matmul non-contiguous rows", {{3, 8}, {4, 5}}, [](V x) { return matmul(x[0].slice(1, 0, 8, 2), x[1]); }, R},
      {"matmul larger", {{33, 40}, {40, 36}}, [](V x) { return matmul(x[0], x[1]); }, R},
      // ---- norms
      {"layer_norm affine", {{3, 4, 8}, {8}, {8}}, [](V x) { return layer_norm(x[0], x[1], x[2]); }, R},
      {"layer_norm affine, transposed x", {transposed({4, 6}), {6}, {6}},
       [](V x) { return layer_norm(x[0], x[1], x[2]); }, R},
      {"layer_norm plain", {{5, 6}}, [](V x) { return layer_norm(x[0]); }, R},
      {"layer_norm bias only", {{5, 6}, {6}}, [](V x) { return layer_norm(x[0], Tensor(), x[1]); }, R},
      {"layer_norm long rows", {{3, 1000}, {1000}, {1000}}, [](V x) { return layer_norm(x[0], x[1], x[2]); }, R},
      {"rms_norm weight", {{3, 4, 8}, {8}}, [](V x) { return rms_norm(x[0], x[1]); }, R},
      {"rms_norm weight, transposed x", {transposed({4, 6}), {6}}, [](V x) { return rms_norm(x[0], x[1]); }, R},
      // the [B, H, N, e] heads of a [B, N, H·e] tensor: normalised where they lie, the output in x's layout
      {"rms_norm weight, heads view", {{2, 4, 3, 8}, {8}}, [](V x) { return rms_norm(x[0].transpose(1, 2), x[1]); }, R},
      {"layer_norm affine, heads view", {{2, 4, 3, 8}, {8}, {8}},
       [](V x) { return layer_norm(x[0].transpose(1, 2), x[1], x[2]); }, R},
      {"rms_norm plain, long rows", {{2, 1500}}, [](V x) { return rms_norm(x[0]); }, R},
      // ---- losses
      {"cross_entropy", {{6, 5}}, [](V x) { return nn::cross_entropy(x[0], index(x[0], {0, 4, 2, 2, 1, 3}, {6})); }, R},
      {"cross_entropy smoothed, ignore_index", {{2, 3, 5}},
       [](V x) {
         return nn::cross_entropy(x[0], index(x[0], {1, -100, 4, 0, 0, 3}, {2, 3}), {.label_smoothing = 0.1});
       }, R},
      {"cross_entropy smoothed, transposed logits", {transposed({4, 6})},
       [](V x) { return nn::cross_entropy(x[0], index(x[0], {5, -100, 0, 3}, {4}), {.label_smoothing = 0.1}); }, R},
      // ---- attention
      {"softmax_attention", {{1, 2, 6, 4}, {1, 2, 6, 4}, {1, 2, 6, 3}},
       [](V x) { return F::softmax_attention(x[0], x[1], x[2]); }, R},
      {"softmax_attention causal", {{2, 1, 7, 4}, {2, 1, 7, 4}, {2, 1, 7, 4}},
       [](V x) { return F::softmax_attention(x[0], x[1], x[2], {.causal = true}); }, R},
      // ---- linear (the gemm adds the bias) and the attentions on one packed [B, N, 3·H·d] projection
      {"linear", {{2, 3, 4}, {5, 4}, {5}}, [](V x) { return linear(x[0], x[1], x[2]); }, R},
      {"linear, transposed x", {transposed({4, 6}), {3, 6}, {3}}, [](V x) { return linear(x[0], x[1], x[2]); }, R},
      {"linear_add", {{2, 3, 4}, {5, 4}, {5}, {2, 3, 5}}, [](V x) { return linear_add(x[0], x[1], x[2], x[3]); }, R},
      {"linear_add no bias, transposed x", {transposed({4, 6}), {3, 6}, {4, 3}},
       [](V x) { return linear_add(x[0], x[1], Tensor(), x[2]); }, R},
      {"softmax_attention_qkv causal", {{1, 5, 12}},
       [](V x) { return F::softmax_attention_qkv(x[0], 2, {.causal = true}); }, R},
      {"linear_attention_qkv elu+1", {{1, 6, 12}},
       [](V x) { return F::linear_attention_qkv(x[0], 2, {false, F::FeatureMap::Elu1}); }, R},
      {"mhla_qkv", {{1, 8, 12}, {2, 2}}, [](V x) { return F::mhla_qkv(x[0], 2, sigmoid(x[1]), {.block_len = 4}); }, R},
  };
  // The losses under every reduction; cross-entropy with and without smoothing, smooth L1 at three betas.
  const std::pair<const char*, nn::Reduction> reductions[] = {
      {"mean", nn::Reduction::Mean}, {"sum", nn::Reduction::Sum}, {"none", nn::Reduction::None}};
  for (const auto& [rname, red] : reductions) {
    for (double eps : {0.0, 0.2})
      c.push_back({fmt::format("cross_entropy reduction {}, smoothing {}", rname, eps), {{4, 6}},
                   [red = red, eps](V x) {
                     return nn::cross_entropy(x[0], index(x[0], {5, -100, 0, 3}, {4}),
                                              {.label_smoothing = eps, .reduction = red});
                   }, R});
    c.push_back({fmt::format("mse_loss reduction {}", rname), {{3, 4}, {3, 4}},
                 [red = red](V x) { return nn::mse_loss(x[0], x[1], red); }, R});
    c.push_back({fmt::format("nll_loss reduction {}, ignore_index", rname), {{4, 6}},
                 [red = red](V x) {
                   return nn::nll_loss(log_softmax(x[0], 1), index(x[0], {5, -100, 0, 3}, {4}), red);
                 }, R});
    for (double beta : {1.0, 0.5, 0.0})
      c.push_back({fmt::format("smooth_l1_loss reduction {}, beta {}", rname, beta), {{3, 4}, {3, 4}},
                   [red = red, beta](V x) { return nn::smooth_l1_loss(x[0], x[1], red, beta); }, R});
    // Probabilities and soft targets in (0, 1), so both inputs get a gradient.
    c.push_back({fmt::format("binary_cross_entropy reduction {}", rname), {{3, 4}, {3, 4}},
                 [red = red](V x) { return nn::binary_cross_entropy(sigmoid(x[0]), sigmoid(x[1]), red); }, R});
    c.push_back({fmt::format("binary_cross_entropy_with_logits reduction {}", rname), {{3, 4}, {3, 4}},
                 [red = red](V x) { return nn::binary_cross_entropy_with_logits(x[0], sigmoid(x[1]), red); }, R});
  }
  // Softmax attention over two key tiles (N > 128 keys), on strided views.
  for (bool causal : {false, true})
    c.push_back({fmt::format("softmax_attention{} two key tiles, strided", causal ? " causal" : ""),
                 {strided({1, 1, 131, 2}), strided({1, 1, 131, 2}), strided({1, 1, 131, 2})},
                 [causal](V x) { return F::softmax_attention(x[0], x[1], x[2], {.causal = causal}); }, R});
  // Linear attention: every feature map, causal (a full chunk of 64 and a padded one) or not.
  for (F::FeatureMap fm : kMaps)
    for (bool causal : {false, true}) {
      const int64_t N = causal ? 70 : 10;
      const F::LinearAttentionOptions o{causal, fm, 1e-6};
      c.push_back({fmt::format("linear_attention{} N={} {}, strided", causal ? " causal" : "", N, map_name(fm)),
                   {strided({1, 1, N, 3}), strided({1, 1, N, 3}), strided({1, 1, N, 2})},
                   [o](V x) {
                     return F::linear_attention(feature_input(x[0], o.feature_map), feature_input(x[1], o.feature_map),
                                                x[2], o);
                   }, R});
    }
  // MHLA, fused (hand-written backward) and composite (autograd): equal blocks, a padded last
  // block, M = 1, d != dv, every feature map; the fused form on strided views too.
  const MhlaShape shapes[] = {{1, 2, 8, 4, 2, 3}, {2, 1, 7, 3, 2, 2}, {1, 1, 5, 5, 2, 2}};
  for (const MhlaShape& s : shapes)
    for (F::FeatureMap fm : kMaps) {
      add_mhla(c, "mhla", s, fm, false, false);
      add_mhla(c, "mhla", s, fm, true, false);
    }
  const MhlaShape wide = {1, 2, 10, 3, 3, 4};  // M = 4, a last block of 1
  for (F::FeatureMap fm : kMaps) {
    add_mhla(c, "mhla", wide, fm, false, true);
    add_mhla(c, "mhla", wide, fm, true, true);
    add_mhla(c, "mhla_composite", wide, fm, false, false);
    add_mhla(c, "mhla_composite", wide, fm, true, false);
  }
  // The official vision code's normaliser (equal blocks only). q is made positive: a query whose
  // φ(q) is all eps has a normaliser near eps, outputs near 1/eps, and central differences of
  // such a loss lose their digits to rounding.
  for (F::FeatureMap fm : {F::FeatureMap::ReluEps, F::FeatureMap::Elu1})
    c.push_back({fmt::format("mhla official normaliser N=9 L=3 d=2 dv=3 {}", map_name(fm)),
                 {{2, 2, 9, 2}, {2, 2, 9, 2}, {2, 2, 9, 3}, {3, 3}},
                 [fm](V x) {
                   const F::MHLAOptions o{.block_len = 3, .feature_map = fm, .official_normalizer = true};
                   return F::mhla(pos(x[0]), x[1], x[2], sigmoid(x[3]), o);
                 }, R});
  add_conv_cases(c);
  return c;
}

}  // namespace linea::check
