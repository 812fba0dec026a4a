// nn layers: values against independent loops, float64 gradchecks of every layer (parameters
// included), initialisers, seeded dropout, hierarchical names, state dicts, errors.
#include <cmath>
#include <algorithm>
#include <map>

#include "helpers.h"

using namespace linea;
using linea::testing::allclose;
using linea::testing::randn64;

namespace {

// Gradcheck of m.forward(x) with respect to x and every parameter of m (all float64).
template <class M>
void check_module_gradients(M& m, const Tensor& x) {
  std::vector<Tensor> inputs{x};
  for (const Tensor& p : m.parameters()) inputs.push_back(p);
  CHECK_GRADCHECK([&m](const std::vector<Tensor>& in) { return m.forward(in[0]); }, inputs);
}

template <class M, class... Args>
std::shared_ptr<M> make64(Args&&... args) {
  auto m = std::make_shared<M>(std::forward<Args>(args)...);
  nn::to(*m, float64);
  return m;
}

std::vector<std::string> names(const nn::Module& m) {
  std::vector<std::string> out;
  for (const auto& [n, _] : m.named_parameters()) out.push_back(n);
  return out;
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// initialisers and dtype conversion

TEST_CASE("init: the global seed makes weights reproducible bit for bit") {
  manual_seed(123);
  nn::Linear a(7, 5);
  manual_seed(123);
  nn::Linear b(7, 5);
  nn::Linear c(7, 5);  // the generator moved on: different weights
  CHECK(a.weight.to_vector() == b.weight.to_vector());
  CHECK(a.bias.to_vector() == b.bias.to_vector());
  CHECK(a.weight.to_vector() != c.weight.to_vector());
}

TEST_CASE("init: distributions and bounds") {
  Generator g(1);
  Tensor t = nn::uniform_(empty({200, 100}), -0.5, 0.25, g);
  CHECK(min(t).item() >= -0.5);
  CHECK(max(t).item() < 0.25);
  CHECK(mean(t).item() == doctest::Approx(-0.125).epsilon(0.01));

  Tensor n = nn::normal_(empty({200, 100}, float64), 3.0, 2.0, g);
  CHECK(mean(n).item() == doctest::Approx(3.0).epsilon(0.01));
  CHECK(std::sqrt(var(n).item()) == doctest::Approx(2.0).epsilon(0.02));

  // N(0, 0.5²) truncated to [-1, 1] (= ±2 std): std of the truncated law is 0.8796 · 0.5.
  Tensor tn = nn::trunc_normal_(empty({200, 100}, float64), 0.5, {}, {}, g);
  CHECK(min(tn).item() >= -1.0);
  CHECK(max(tn).item() <= 1.0);
  CHECK(std::sqrt(var(tn).item()) == doctest::Approx(0.8796 * 0.5).epsilon(0.02));
  Tensor tn2 = nn::trunc_normal_(empty({1000}), 1.0, 0.0, 0.5, g);  // one-sided interval
  CHECK(min(tn2).item() >= 0.0);
  CHECK(max(tn2).item() <= 0.5);

  // xavier: fan_in = 30 * 4, fan_out = 20 * 4 for a [20, 30, 2, 2] kernel.
  Tensor xv = nn::xavier_uniform_(empty({20, 30, 2, 2}), 1.0, g);
  const double bound = std::sqrt(6.0 / (120 + 80));
  CHECK(max(abs(xv)).item() <= bound);
  CHECK(max(abs(xv)).item() > 0.9 * bound);
}

TEST_CASE("init: in place through views, outside autograd") {
  Tensor p = zeros({3, 4}, float64).requires_grad_();
  nn::ones_(p.narrow(1, 1, 2));  // a strided view of a leaf that requires grad
  CHECK(p.to_vector() == std::vector<double>{0, 1, 1, 0, 0, 1, 1, 0, 0, 1, 1, 0});
  CHECK(p.is_leaf());
  nn::constant_(p, 2.5);
  CHECK(sum(p).item() == 30.0);
  nn::zeros_(p);
  CHECK(sum(abs(p)).item() == 0.0);
}

TEST_CASE("init errors") {
  CHECK_THROWS_WITH_AS(nn::trunc_normal_(empty({4}), 1.0, 10.0, 11.0), doctest::Contains("[trunc_normal_]"), Error);
  CHECK_THROWS_WITH_AS(nn::trunc_normal_(empty({4}), 1.0, 1.0, -1.0), doctest::Contains("[trunc_normal_]"), Error);
  CHECK_THROWS_WITH_AS(nn::xavier_uniform_(empty({4})), doctest::Contains("[xavier_uniform_]"), Error);
  CHECK_THROWS_WITH_AS(nn::normal_(arange(4), 0, 1), doctest::Contains("[normal_]"), Error);
  CHECK_THROWS_WITH_AS(nn::uniform_(empty({2}), 1, 0), doctest::Contains("[uniform_]"), Error);
}

namespace {
struct WithIndexBuffer : nn::Module {
  WithIndexBuffer() : Module("WithIndexBuffer") {
    lin = register_module("lin", std::make_shared<nn::Linear>(3, 2));
    idx = register_buffer("idx", arange(5));
    scale = register_buffer("scale", ones({2}));
  }
  std::shared_ptr<nn::Linear> lin;
  Tensor idx, scale;
};
}  // namespace

TEST_CASE("nn::to converts floating parameters and buffers in place, integer buffers untouched") {
  WithIndexBuffer m;
  Tensor held = m.lin->weight;  // a handle taken before the conversion
  const std::vector<double> before = held.to_vector();
  nn::to(m, float64);
  CHECK(held.dtype() == DType::Float64);
  CHECK(held.to_vector() == before);  // float32 -> float64 is exact
  CHECK(held.requires_grad());
  CHECK(m.lin->bias.dtype() == DType::Float64);
  CHECK(m.scale.dtype() == DType::Float64);
  CHECK(m.idx.dtype() == DType::Int64);
  for (const auto& [_, t] : m.state_dict()) CHECK(t.dtype() != DType::Float32);
  CHECK_THROWS_WITH_AS(nn::to(m, DType::Int64), doctest::Contains("[nn::to]"), Error);
}

// ---------------------------------------------------------------------------------------------
// Linear

TEST_CASE("Linear: y = x W^T + b over leading dims, against loops") {
  nn::Linear lin(4, 3);
  Tensor x = randn({2, 5, 4});
  Tensor y = lin.forward(x);
  CHECK(y.shape() == Shape{2, 5, 3});
  const auto xv = x.to_vector(), wv = lin.weight.to_vector(), bv = lin.bias.to_vector(), yv = y.to_vector();
  for (int r = 0; r < 10; ++r)
    for (int o = 0; o < 3; ++o) {
      double s = bv[o];
      for (int i = 0; i < 4; ++i) s += xv[r * 4 + i] * wv[o * 4 + i];
      CHECK(yv[r * 3 + o] == doctest::Approx(s).epsilon(1e-5));
    }
  // PyTorch's default init bound 1/sqrt(in)
  CHECK(max(abs(lin.weight)).item() <= 0.5);
  CHECK(lin.num_parameters() == 4 * 3 + 3);
  nn::Linear nob(4, 3, false);
  CHECK_FALSE(nob.bias.defined());
  CHECK(names(nob) == std::vector<std::string>{"weight"});
  CHECK(nob.forward(randn({4})).shape() == Shape{3});  // a 1-d input works too
}

TEST_CASE("Linear gradcheck (float64, x and parameters)") {
  auto lin = make64<nn::Linear>(4, 3);
  check_module_gradients(*lin, randn64({2, 3, 4}, 1));
  auto nob = make64<nn::Linear>(3, 2, false);
  check_module_gradients(*nob, randn64({5, 3}, 2));
}

TEST_CASE("Linear errors") {
  nn::Linear lin(4, 3);
  CHECK_THROWS_WITH_AS(lin.forward(randn({2, 5})), doctest::Contains("[Linear] expected input [..., 4]"), Error);
  CHECK_THROWS_WITH_AS(nn::Linear(0, 3), doctest::Contains("[Linear]"), Error);
}

// ---------------------------------------------------------------------------------------------
// Embedding, positional embeddings

TEST_CASE("Embedding: rows of the table, gradients accumulate over repeated indices") {
  manual_seed(5);
  nn::Embedding emb(50, 40);
  // PyTorch's default init N(0, 1); init_std sets e.g. GPT's 0.02.
  CHECK(std::sqrt(var(emb.weight).item()) == doctest::Approx(1.0).epsilon(0.05));
  nn::Embedding small(50, 40, 0.02);
  CHECK(std::sqrt(var(small.weight).item()) == doctest::Approx(0.02).epsilon(0.05));
  Tensor idx = from_vector<int64_t>({3, 0, 3, 49}, {2, 2});
  Tensor y = emb.forward(idx);
  CHECK(y.shape() == Shape{2, 2, 40});
  CHECK(y.select(0, 1).select(0, 1).to_vector() == emb.weight.select(0, 49).to_vector());

  auto e64 = make64<nn::Embedding>(6, 3);
  Tensor idx6 = from_vector<int64_t>({3, 0, 3, 5, 3}, {5});
  CHECK_GRADCHECK([&](const auto&) { return e64->forward(idx6); }, {e64->weight});
  CHECK_THROWS_WITH_AS(emb.forward(from_vector<double>({1.0})), doctest::Contains("[Embedding] expected int64"),
                       Error);
  CHECK_THROWS_WITH_AS(emb.forward(from_vector<int64_t>({50})), doctest::Contains("out of range"), Error);
}

TEST_CASE("PositionalEmbedding: x + weight[offset : offset + N], gradcheck, N > max_len") {
  nn::PositionalEmbedding pos(8, 4);
  CHECK(max(abs(pos.weight)).item() <= 0.04);  // truncated N(0, 0.02²)
  Tensor x = randn({2, 3, 4});
  Tensor y = pos.forward(x, 5);
  CHECK(allclose(y.select(0, 1).select(0, 2), x.select(0, 1).select(0, 2) + pos.weight.select(0, 7), 0, 0));
  auto p64 = make64<nn::PositionalEmbedding>(6, 3);
  check_module_gradients(*p64, randn64({2, 4, 3}, 3));
  CHECK_THROWS_WITH_AS(pos.forward(randn({1, 9, 4})), doctest::Contains("exceed max_len 8"), Error);
  CHECK_THROWS_WITH_AS(pos.forward(randn({1, 3, 4}), 6), doctest::Contains("[PositionalEmbedding]"), Error);
  CHECK_THROWS_WITH_AS(pos.forward(randn({3, 5})), doctest::Contains("[PositionalEmbedding] expected"), Error);
}

TEST_CASE("RotaryEmbedding: NeoX half rotation against loops, offsets, relative positions") {
  const int64_t hd = 6, n = 5;
  nn::RotaryEmbedding rope(hd, 100.0);
  Tensor x = randn64({2, 3, n, hd}, 4, false);
  Tensor y = rope.forward(x, 2);
  auto xv = x.to_vector(), yv = y.to_vector();
  for (int64_t row = 0; row < 2 * 3 * n; ++row) {
    const double t = static_cast<double>(row % n + 2);
    for (int64_t i = 0; i < hd / 2; ++i) {
      const double a = t * std::pow(100.0, -2.0 * i / hd);
      const double x1 = xv[row * hd + i], x2 = xv[row * hd + i + hd / 2];
      CHECK(yv[row * hd + i] == doctest::Approx(x1 * std::cos(a) - x2 * std::sin(a)).epsilon(1e-12));
      CHECK(yv[row * hd + i + hd / 2] == doctest::Approx(x2 * std::cos(a) + x1 * std::sin(a)).epsilon(1e-12));
    }
  }
  // Streaming: positions 2.. of a longer sequence equal an offset application.
  Tensor full_seq = rope.forward(randn64({1, 1, 40, hd}, 5, false));  // also grows the cached tables
  Tensor xs = randn64({1, 1, 40, hd}, 5, false);
  CHECK(allclose(rope.forward(xs.narrow(2, 30, 10), 30), rope.forward(xs).narrow(2, 30, 10), 1e-14, 0));
  CHECK(full_seq.size(2) == 40);
  // A rotation: norms are kept, and q_m · k_n depends only on m - n.
  CHECK(allclose(sum(y * y, {-1}), sum(x * x, {-1}), 1e-12, 1e-12));
  Tensor q = randn64({1, 1, 1, hd}, 6, false), k = randn64({1, 1, 1, hd}, 7, false);
  const double d1 = sum(rope.forward(q, 3) * rope.forward(k, 1)).item();
  const double d2 = sum(rope.forward(q, 17) * rope.forward(k, 15)).item();
  CHECK(d1 == doctest::Approx(d2).epsilon(1e-12));
  // float32 input gets float32 tables
  CHECK(rope.forward(randn({2, 4, hd})).dtype() == DType::Float32);
}

TEST_CASE("RotaryEmbedding gradcheck and errors") {
  nn::RotaryEmbedding rope(4);
  Tensor x = randn64({2, 2, 3, 4}, 8);
  CHECK_GRADCHECK([&](const auto& in) { return rope.forward(in[0], 1); }, {x});
  CHECK_THROWS_WITH_AS(nn::RotaryEmbedding(5), doctest::Contains("[RotaryEmbedding] head_dim must be even"), Error);
  CHECK_THROWS_WITH_AS(rope.forward(randn({2, 3, 6})), doctest::Contains("[RotaryEmbedding] expected"), Error);
  CHECK_THROWS_WITH_AS(rope.forward(randn({3, 4}), -1), doctest::Contains("[RotaryEmbedding] offset"), Error);
}

// ---------------------------------------------------------------------------------------------
// PatchEmbed

namespace {
// Patches by loops: token (gy, gx) of image b holds x[b, c, gy·p + py, gx·p + px] in (c, py, px)
// order. Returns [B, grid², C·p·p] in raster token order.
Tensor patchify_loops(const Tensor& x, int64_t p) {
  const int64_t B = x.size(0), C = x.size(1), S = x.size(2), G = S / p;
  auto xv = x.to_vector();
  std::vector<double> out;
  for (int64_t b = 0; b < B; ++b)
    for (int64_t gy = 0; gy < G; ++gy)
      for (int64_t gx = 0; gx < G; ++gx)
        for (int64_t c = 0; c < C; ++c)
          for (int64_t py = 0; py < p; ++py)
            for (int64_t px = 0; px < p; ++px) out.push_back(xv[((b * C + c) * S + gy * p + py) * S + gx * p + px]);
  return from_vector(out, {B, G * G, C * p * p});
}
}  // namespace

TEST_CASE("PatchEmbed: raster patches equal a stride-p convolution; block_major is a token permutation") {
  nn::PatchEmbed pe(8, 2, 3, 5);  // 4x4 patch grid
  CHECK(pe.num_patches() == 16);
  Tensor x = randn({2, 3, 8, 8});
  Tensor y = pe.forward(x);
  CHECK(y.shape() == Shape{2, 16, 5});
  Tensor expect = matmul(patchify_loops(x, 2), pe.proj->weight.to(float64).t()) + pe.proj->bias.to(float64);
  CHECK(allclose(y.to(float64), expect, 1e-5, 1e-5));

  // Block-major with 2x2 blocks: block (hb, wb) in raster order, then (p1, p2) inside the block.
  pe.block_major(2);
  std::vector<int64_t> perm;
  for (int64_t hb = 0; hb < 2; ++hb)
    for (int64_t wb = 0; wb < 2; ++wb)
      for (int64_t p1 = 0; p1 < 2; ++p1)
        for (int64_t p2 = 0; p2 < 2; ++p2) perm.push_back((hb * 2 + p1) * 4 + wb * 2 + p2);
  CHECK(perm == std::vector<int64_t>{0, 1, 4, 5, 2, 3, 6, 7, 8, 9, 12, 13, 10, 11, 14, 15});
  CHECK(allclose(pe.forward(x), index_select(y, 1, from_vector(perm)), 0, 0));
  CHECK(nn::block_major_order(4, 4, 2).to_vector_as<int64_t>() == perm);  // the attention layers' own ordering
  pe.block_major(4);  // the whole grid is one block: raster order again
  CHECK(allclose(pe.forward(x), y, 0, 0));
}

TEST_CASE("PatchEmbed gradcheck (block-major, non-contiguous images) and errors") {
  auto pe = make64<nn::PatchEmbed>(4, 1, 2, 3);
  pe->block_major(2);
  Tensor x = randn64({4, 4, 2, 2}, 9).detach().permute({3, 2, 0, 1}).requires_grad_();  // [2, 2, 4, 4] view
  check_module_gradients(*pe, x);
  nn::PatchEmbed p(8, 2, 3, 5);
  CHECK_THROWS_WITH_AS(p.forward(randn({2, 3, 8, 6})), doctest::Contains("[PatchEmbed] expected images"), Error);
  CHECK_THROWS_WITH_AS(p.forward(randn({3, 8, 8})), doctest::Contains("[PatchEmbed] expected images"), Error);
  CHECK_THROWS_WITH_AS(p.block_major(3), doctest::Contains("[PatchEmbed] block 3"), Error);
  CHECK_THROWS_WITH_AS(nn::PatchEmbed(10, 4, 3, 5), doctest::Contains("[PatchEmbed]"), Error);
}

// ---------------------------------------------------------------------------------------------
// norms

TEST_CASE("LayerNorm / RMSNorm modules: fused op values, gradchecks incl. weight and bias, errors") {
  auto ln = make64<nn::LayerNorm>(5);
  auto rn = make64<nn::RMSNorm>(5);
  CHECK(names(*ln) == std::vector<std::string>{"weight", "bias"});
  CHECK(names(*rn) == std::vector<std::string>{"weight"});
  CHECK(nn::LayerNorm(5, 1e-5, false).num_parameters() == 0);
  // non-trivial affine parameters, so their gradients are exercised
  nn::normal_(ln->weight, 1, 0.5);
  nn::normal_(ln->bias, 0, 0.5);
  nn::normal_(rn->weight, 1, 0.5);
  Tensor x = randn64({2, 3, 5}, 10);
  CHECK(allclose(ln->forward(x), layer_norm(x, ln->weight, ln->bias, 1e-5), 0, 0));
  check_module_gradients(*ln, x);
  check_module_gradients(*rn, x);
  CHECK_THROWS_WITH_AS(ln->forward(randn64({2, 4}, 1)), doctest::Contains("[LayerNorm] expected input [..., 5]"),
                       Error);
  CHECK_THROWS_WITH_AS(rn->forward(randn64({2, 4}, 1)), doctest::Contains("[RMSNorm] expected input [..., 5]"),
                       Error);
}

// ---------------------------------------------------------------------------------------------
// Dropout

TEST_CASE("Dropout: statistics, scaling, eval identity, p = 0 and p = 1") {
  nn::Dropout drop(0.3, 42);
  Tensor x = ones({100000});
  Tensor y = drop.forward(x);
  auto yv = y.to_vector();
  int64_t zeros_seen = 0, badly_scaled = 0;
  for (double v : yv) {
    if (v == 0) ++zeros_seen;
    else if (std::abs(v - 1 / 0.7) > 1e-6) ++badly_scaled;
  }
  CHECK(badly_scaled == 0);
  CHECK(static_cast<double>(zeros_seen) / 100000 == doctest::Approx(0.3).epsilon(0.03));
  CHECK(mean(y).item() == doctest::Approx(1.0).epsilon(0.02));
  drop.eval();
  CHECK(drop.forward(x).same(x));
  nn::Dropout none(0.0);
  CHECK(none.forward(x).same(x));
  nn::Dropout all(1.0);
  CHECK(sum(all.forward(x)).item() == 0.0);
  CHECK_THROWS_WITH_AS(nn::Dropout(1.5), doctest::Contains("[Dropout] p must be in [0, 1]"), Error);
  CHECK_THROWS_WITH_AS(nn::Dropout(-0.1), doctest::Contains("[Dropout]"), Error);
}

TEST_CASE("Dropout: the same seed gives the same mask; the global seed seeds the layer") {
  Tensor x = ones({1000});
  nn::Dropout a(0.5, 7), b(0.5, 7), c(0.5, 8);
  CHECK(a.forward(x).to_vector() == b.forward(x).to_vector());
  CHECK(a.forward(x).to_vector() != c.forward(x).to_vector());
  manual_seed(3);
  nn::Dropout d1(0.5);
  manual_seed(3);
  nn::Dropout d2(0.5);
  CHECK(d1.forward(x).to_vector() == d2.forward(x).to_vector());
}

TEST_CASE("Dropout gradcheck with a fixed mask (reseeded per call)") {
  nn::Dropout drop(0.4);
  Tensor x = randn64({4, 6}, 11);
  CHECK_GRADCHECK(
      [&](const auto& in) {
        drop.manual_seed(5);
        return drop.forward(in[0]);
      },
      {x});
}

// ---------------------------------------------------------------------------------------------
// GELU, Sequential, MLP

TEST_CASE("Sequential chains its children; names are indices") {
  manual_seed(9);
  auto l1 = std::make_shared<nn::Linear>(4, 6);
  auto l2 = std::make_shared<nn::Linear>(6, 2);
  nn::Sequential seq{l1, std::make_shared<nn::GELU>(GeluApprox::Tanh)};
  seq.push_back(l2);
  CHECK(seq.size() == 3);
  CHECK(names(seq) == std::vector<std::string>{"0.weight", "0.bias", "2.weight", "2.bias"});
  Tensor x = randn({3, 4});
  CHECK(allclose(seq.forward(x), l2->forward(gelu(l1->forward(x), GeluApprox::Tanh)), 0, 0));
  CHECK(allclose(seq(x), seq.forward(x), 0, 0));  // the call operator is forward
  CHECK(allclose((*l1)(x), l1->forward(x), 0, 0));
  CHECK(seq[1]->type_name() == "GELU");
  CHECK_THROWS_WITH_AS(seq[3], doctest::Contains("[Sequential] index 3"), Error);
}

TEST_CASE("MLP: fc1 -> GELU -> fc2, names, counts, gradcheck, dropout in train mode only") {
  nn::MLP mlp(4, 8, 3);
  CHECK(names(mlp) == std::vector<std::string>{"fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"});
  CHECK(mlp.num_parameters() == 4 * 8 + 8 + 8 * 3 + 3);
  Tensor x = randn({2, 4});
  CHECK(allclose(mlp.forward(x), mlp.fc2->forward(gelu(mlp.fc1->forward(x))), 0, 0));
  CHECK(nn::MLP(4, 8).forward(x).shape() == Shape{2, 4});  // out defaults to in

  auto m64 = make64<nn::MLP>(3, 5, 2, std::make_shared<nn::GELU>(GeluApprox::Tanh));
  check_module_gradients(*m64, randn64({2, 3}, 12));

  nn::MLP dropped(4, 8, 3, nullptr, 0.5);
  Tensor a = dropped.forward(x), b = dropped.forward(x);
  CHECK(a.to_vector() != b.to_vector());  // fresh masks in training
  dropped.eval();
  CHECK(allclose(dropped.forward(x), dropped.forward(x), 0, 0));
  CHECK_FALSE(dropped.drop->is_training());
}

// ---------------------------------------------------------------------------------------------
// hierarchical names and state dicts

namespace {
std::shared_ptr<nn::Sequential> small_net() {
  auto s = std::make_shared<nn::Sequential>();
  s->push_back(std::make_shared<nn::LayerNorm>(4));
  s->push_back(std::make_shared<nn::MLP>(4, 6));
  return s;
}
}  // namespace

TEST_CASE("state_dict round trip reproduces the outputs exactly; load errors list every problem") {
  manual_seed(1);
  auto a = small_net();
  manual_seed(2);
  auto b = small_net();
  Tensor x = randn({3, 4});
  CHECK(a->forward(x).to_vector() != b->forward(x).to_vector());
  nn::StateDict sd = a->state_dict();
  CHECK(sd.count("1.fc2.bias") == 1);
  CHECK(sd.size() == 6);
  b->load_state_dict(sd);
  CHECK(a->forward(x).to_vector() == b->forward(x).to_vector());

  nn::StateDict bad = sd;
  bad.erase("1.fc1.weight");
  bad["1.fc3.weight"] = zeros({2, 2});
  bad["0.weight"] = zeros({5});
  try {
    b->load_state_dict(bad);
    FAIL("load_state_dict accepted a bad state dict");
  } catch (const Error& e) {
    const std::string msg = e.what();
    INFO(msg);
    CHECK(msg.find("missing key '1.fc1.weight'") != std::string::npos);
    CHECK(msg.find("unexpected key '1.fc3.weight'") != std::string::npos);
    CHECK(msg.find("'0.weight': expected (4,)") != std::string::npos);
  }
  CHECK(a->forward(x).to_vector() == b->forward(x).to_vector());  // nothing was modified
}

// ---------------------------------------------------------------------------------------------
// TransformerBlock

namespace {
nn::TransformerBlockConfig block_config(const std::string& kind, bool causal, int64_t dim = 8) {
  nn::TransformerBlockConfig c;
  c.dim = dim;
  c.heads = 2;
  c.mlp_ratio = 2;
  c.attention = kind;
  c.causal = causal;
  c.grid = 2;       // non-causal mhla: 4 blocks
  c.block_len = 2;  // causal mhla: chunks of 2 tokens
  c.max_len = 8;
  return c;
}
}  // namespace

TEST_CASE("TransformerBlock: pre-norm wiring, names and parameter counts for each attention") {
  for (const std::string kind : {"softmax", "linear", "mhla"}) {
    CAPTURE(kind);
    manual_seed(4);
    nn::TransformerBlock blk(block_config(kind, false));
    Tensor x = randn({2, 8, 8});
    // The block adds its skip connections inside the projections' gemms (linear_add): the same sums
    // as this composition, rounded in another order.
    Tensor h = x + blk.attn->forward(blk.ln1->forward(x));
    CHECK(allclose(blk.forward(x), h + blk.mlp->forward(blk.ln2->forward(h)), 1e-6, 1e-6));
    const int64_t d = 8, hidden = 16;
    const int64_t common = 2 * 2 * d + (d * 3 * d + 3 * d) + (d * d + d) + (d * hidden + hidden + hidden * d + d);
    CHECK(blk.num_parameters() == common + (kind == "mhla" ? 4 * 4 : 0));
    auto n = names(blk);
    CHECK(n.front() == "ln1.weight");
    CHECK(std::find(n.begin(), n.end(), "attn.qkv.weight") != n.end());
    CHECK(std::find(n.begin(), n.end(), "mlp.fc2.bias") != n.end());
    CHECK((std::find(n.begin(), n.end(), "attn.mix") != n.end()) == (kind == "mhla"));
  }
}

TEST_CASE("TransformerBlock gradcheck (float64) for each attention kind, causal and not") {
  for (const std::string kind : {"softmax", "linear", "mhla"})
    for (bool causal : {false, true}) {
      CAPTURE(kind);
      CAPTURE(causal);
      manual_seed(6);
      auto blk = make64<nn::TransformerBlock>(block_config(kind, causal, 4));  // small: ~170 inputs to perturb
      // A positive qkv bias keeps q, k away from the feature map's kink at 0 and the linear kinds'
      // normalisers away from 0, where finite differences are unreliable.
      nn::constant_(std::dynamic_pointer_cast<nn::QKVAttention>(blk->attn)->qkv->bias, 1.0);
      // causal MHLA: 7 tokens, so the last chunk is padded; non-causal MHLA needs N = 4 blocks x 2.
      const int64_t n = kind == "mhla" && !causal ? 8 : 7;
      check_module_gradients(*blk, randn64({1, n, 4}, 13));
    }
}

TEST_CASE("TransformerBlock: causal blocks do not look ahead; dropout only in training") {
  for (const std::string kind : {"softmax", "linear", "mhla"}) {
    CAPTURE(kind);
    nn::TransformerBlock blk(block_config(kind, true));
    Tensor x = randn({1, 6, 8});
    Tensor x2 = x.clone();
    nn::normal_(x2.narrow(1, 4, 2));  // change the last two tokens only
    CHECK(allclose(blk.forward(x).narrow(1, 0, 4), blk.forward(x2).narrow(1, 0, 4), 0, 0));
    CHECK(max(abs(blk.forward(x).narrow(1, 4, 2) - blk.forward(x2).narrow(1, 4, 2))).item() > 1e-3);
  }
  auto c = block_config("softmax", false);
  c.dropout = 0.5;
  nn::TransformerBlock blk(c);
  Tensor x = randn({2, 4, 8});
  CHECK(blk.forward(x).to_vector() != blk.forward(x).to_vector());
  blk.eval();
  CHECK(blk.forward(x).to_vector() == blk.forward(x).to_vector());
}

TEST_CASE("forward_add: residual + forward(x), the add in the gemm, active dropout still applied") {
  Tensor x = randn({2, 4, 8}), r = randn({2, 4, 8});
  nn::MLP mlp(8, 16);
  CHECK(allclose(mlp.forward_add(x, r), r + mlp.forward(x), 1e-6, 1e-6));
  for (const std::string kind : {"softmax", "linear", "mhla"}) {
    CAPTURE(kind);
    auto attn = nn::make_attention(block_config(kind, false));
    CHECK(allclose(attn->forward_add(x, r), r + attn->forward(x), 1e-6, 1e-6));
  }
  // With dropout active forward_add is residual + forward: the same masks give the same bits.
  nn::MLP dropped(8, 16, 8, nullptr, 0.5);
  dropped.drop->set_rng_state(3, 0);
  const Tensor a = dropped.forward_add(x, r);
  dropped.drop->set_rng_state(3, 0);
  CHECK(allclose(a, r + dropped.forward(x), 0, 0));
  dropped.eval();
  CHECK(allclose(dropped.forward_add(x, r), r + dropped.forward(x), 1e-6, 1e-6));
}

namespace {
// A two-block model, to see hierarchical names the way a real model has them.
struct TinyModel : nn::Module {
  explicit TinyModel(const std::string& kind) : Module("TinyModel") {
    blocks = register_module("blocks", std::make_shared<nn::Sequential>());
    for (int i = 0; i < 2; ++i) blocks->push_back(std::make_shared<nn::TransformerBlock>(block_config(kind, false)));
    norm = register_module("norm", std::make_shared<nn::LayerNorm>(8));
  }
  Tensor forward(const Tensor& x) override { return norm->forward(blocks->forward(x)); }
  std::shared_ptr<nn::Sequential> blocks;
  std::shared_ptr<nn::LayerNorm> norm;
};
}  // namespace

TEST_CASE("TransformerBlock in a model: hierarchical names, state_dict round trip, load errors") {
  manual_seed(7);
  TinyModel a("mhla");
  manual_seed(8);
  TinyModel b("mhla");
  auto n = names(a);
  CHECK(std::find(n.begin(), n.end(), "blocks.0.attn.qkv.weight") != n.end());
  CHECK(std::find(n.begin(), n.end(), "blocks.1.attn.mix") != n.end());
  CHECK(std::find(n.begin(), n.end(), "blocks.1.mlp.fc1.bias") != n.end());
  CHECK(n.back() == "norm.bias");
  Tensor x = randn({1, 8, 8});
  b.load_state_dict(a.state_dict());
  CHECK(a.forward(x).to_vector() == b.forward(x).to_vector());
  nn::StateDict sd = a.state_dict();
  sd["blocks.0.attn.mix"] = zeros({3, 3});
  CHECK_THROWS_WITH_AS(b.load_state_dict(sd), doctest::Contains("'blocks.0.attn.mix': expected (4, 4)"), Error);
  TinyModel soft("softmax");
  CHECK_THROWS_WITH_AS(soft.load_state_dict(a.state_dict()), doctest::Contains("unexpected key 'blocks.0.attn.mix'"),
                       Error);
}

TEST_CASE("TransformerBlock errors") {
  auto c = block_config("flash", false);
  CHECK_THROWS_WITH_AS(nn::TransformerBlock{c},
                       doctest::Contains("unknown attention 'flash': expected one of softmax, linear, mhla"), Error);
  nn::TransformerBlock blk(block_config("linear", false));
  CHECK_THROWS_WITH_AS(blk.forward(randn({8, 8})), doctest::Contains("[TransformerBlock] expected input [B, N, 8]"),
                       Error);
  CHECK_THROWS_WITH_AS(blk.forward(randn({1, 4, 6})), doctest::Contains("[TransformerBlock]"), Error);
}
