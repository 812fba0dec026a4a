// Attention modules: values against a per-head composition, float64 gradchecks (input and
// parameters), the mixing-matrix initialisations and their projection, block-major order, errors.
#include <cmath>

#include "helpers.h"

using namespace linea;
using namespace linea::testing;
namespace F = linea::nn::functional;

namespace {

// f(x) with x and the given parameters as gradcheck inputs (perturbed in place by gradcheck).
template <class M>
void gradcheck_module(M& m, const Tensor& x, std::vector<Tensor> params) {
  params.insert(params.begin(), x);
  CHECK_GRADCHECK([&](const std::vector<Tensor>& in) { return m.forward(in[0]); }, params);
}

std::vector<double> row(const Tensor& w, int64_t i) { return w.select(0, i).to_vector(); }

}  // namespace

TEST_CASE("MultiHeadAttention equals a per-head softmax attention composed by hand") {
  manual_seed(1);
  nn::MultiHeadAttention mha({8, 2, true, true});
  nn::to(mha, float64);
  Tensor x = randn64({2, 5, 8}, 2, false);
  Tensor qkv = matmul(x, mha.qkv->weight.t()) + mha.qkv->bias;  // [B, N, 24]: q | k | v
  std::vector<Tensor> heads;
  for (int64_t h = 0; h < 2; ++h) {
    Tensor q = qkv.narrow(2, h * 4, 4), k = qkv.narrow(2, 8 + h * 4, 4), v = qkv.narrow(2, 16 + h * 4, 4);
    Tensor s = matmul(q, k.transpose(1, 2)) / 2.0;  // 1/sqrt(4)
    s = where(tril_mask(5, 5), s, full({}, -INFINITY, float64));
    heads.push_back(matmul(softmax(s, -1), v));
  }
  Tensor ref = matmul(cat(heads, 2), mha.proj->weight.t()) + mha.proj->bias;
  CHECK(allclose(mha.forward(x), ref, 1e-12, 1e-12));
}

TEST_CASE("attention modules: float64 gradchecks of input and parameters") {
  manual_seed(3);
  Tensor x = randn64({1, 8, 8}, 4);
  SUBCASE("MultiHeadAttention") {
    nn::MultiHeadAttention m({8, 2, false, true});
    nn::to(m, float64);
    gradcheck_module(m, x, {m.qkv->weight, m.qkv->bias, m.proj->weight});
  }
  SUBCASE("LinearAttention causal, elu+1") {
    nn::LinearAttention m({8, 2, true, false, F::FeatureMap::Elu1});
    nn::to(m, float64);
    gradcheck_module(m, x, {m.qkv->weight, m.proj->weight});
  }
  SUBCASE("MHLA non-causal (2x2 grid: M = 4 blocks of 2 tokens)") {
    nn::MHLAConfig c;
    c.dim = 8, c.heads = 2, c.grid = 2;
    nn::MHLA m(c);
    nn::to(m, float64);
    gradcheck_module(m, x, {m.qkv->weight, m.mix});
  }
  SUBCASE("MHLA causal with RoPE, mix sliced to the chunks in use") {
    nn::MHLAConfig c;
    c.dim = 8, c.heads = 2, c.causal = true, c.block_len = 3, c.max_len = 16, c.rope = true;
    nn::MHLA m(c);
    nn::to(m, float64);
    gradcheck_module(m, x, {m.qkv->weight, m.mix, m.out_norm->weight});
  }
}

TEST_CASE("MHLA causal: mix sized for max_len, sliced for short inputs; gradient reaches the full parameter") {
  manual_seed(5);
  nn::MHLAConfig c;
  c.dim = 8, c.heads = 2, c.causal = true, c.block_len = 4, c.max_len = 16;
  nn::MHLA m(c);
  CHECK(m.mix.shape() == Shape{4, 4});
  CHECK(allclose(m.mix, nn::causal_mix(4), 0, 0));
  CHECK(row(m.mix, 2) == std::vector<double>{1.0f / 3, 1.0f / 3, 1.0f / 3, 0});
  sum(m.forward(randn({1, 6, 8}))).backward();  // 6 tokens: 2 chunks
  Tensor g = m.mix.grad();
  REQUIRE(g.defined());
  CHECK(g.shape() == Shape{4, 4});
  CHECK(g.at({1, 0}) != 0);
  for (int64_t i = 0; i < 4; ++i)
    for (int64_t j = 0; j < 4; ++j)
      if (i >= 2 || j >= 2 || j > i) CHECK(g.at({i, j}) == 0);
  CHECK_THROWS_WITH_AS(m.forward(randn({1, 17, 8})), doctest::Contains("max_len"), Error);
}

TEST_CASE("block-distance mixing init matches the spec's values") {
  Tensor lin = nn::block_distance_mix(2, nn::MixInit::Linear);
  CHECK(allclose(lin.select(0, 0), from_vector<double>({0.631, 0.185, 0.185, 0}).to(float32), 1e-3, 0));
  Tensor cosw = nn::block_distance_mix(2, nn::MixInit::Cos);
  CHECK(allclose(cosw.select(0, 0), from_vector<double>({0.294, 0.249, 0.249, 0.208}).to(float32), 1e-3, 0));
  Tensor w16 = nn::block_distance_mix(4, nn::MixInit::Linear);
  CHECK(w16.at({0, 0}) == doctest::Approx(0.144).epsilon(3e-3));   // a corner block
  CHECK(w16.at({5, 5}) == doctest::Approx(0.100).epsilon(5e-3));   // an inner block
  for (nn::MixInit init : {nn::MixInit::Linear, nn::MixInit::Cos, nn::MixInit::Exp, nn::MixInit::Local})
    CHECK(allclose(sum(nn::block_distance_mix(3, init), {0}), ones({9}), 1e-6, 0));  // columns sum to 1
  Tensor gauss = nn::block_distance_mix(3, nn::MixInit::Gaussian);  // not normalised: diagonal exp(0)
  CHECK(gauss.at({4, 4}) == 1);
  Tensor local = nn::block_distance_mix(3, nn::MixInit::Local);  // centre column: all 9 blocks are neighbours
  CHECK(local.at({0, 4}) == doctest::Approx(1.0 / 9));
  CHECK(local.at({0, 8}) == 0);  // corner to corner: not neighbours
  CHECK_THROWS_WITH_AS(nn::block_distance_mix(0), doctest::Contains("[block_distance_mix]"), Error);
}

TEST_CASE("optimizer steps keep every MHLA's mix in its constraint set, through the module tree") {
  nn::MHLAConfig c;
  c.dim = 4, c.heads = 1, c.grid = 1;
  auto a = std::make_shared<nn::MHLA>(c);
  c.causal = true, c.block_len = 2, c.max_len = 6;
  auto b = std::make_shared<nn::MHLA>(c);
  nn::Sequential model{a, std::make_shared<nn::Sequential>(std::initializer_list<std::shared_ptr<nn::Module>>{b})};
  Tensor handle = a->mix;  // other holders of the parameter must see the projected values
  // With loss ½‖mix − target‖², one SGD step at lr 1 lands on the target; the projection then
  // clamps it: non-causal to [0, 1], causal to tril(clamp(., 1e-5, 1)).
  const Tensor ta = from_vector<float>({1.5f}, {1, 1});
  const Tensor tb = from_vector<float>({-1, 2, 3, 0.5f, -0.2f, 7, 0.3f, 0.4f, 0.1f}, {3, 3});
  nn::SGD sgd(model.named_parameters(), {.lr = 1});
  ((sum(pow(a->mix - ta, 2.0)) + sum(pow(b->mix - tb, 2.0))) * 0.5).backward();
  sgd.step();
  CHECK(handle.item() == 1);
  CHECK(allclose(b->mix, from_vector<float>({1e-5f, 0, 0, 0.5f, 1e-5f, 0, 0.3f, 0.4f, 0.1f}, {3, 3}), 1e-6, 1e-7));

  // AdamW at a large lr, gradients pushing every entry out of the set: each step ends inside it.
  nn::AdamW adam(model.named_parameters(), {.lr = 5, .weight_decay = 0});
  for (int step = 0; step < 3; ++step) {
    adam.zero_grad();
    (sum(a->mix) * -1.0 + sum(b->mix * from_vector<float>({1, -1, -1, -1, 1, -1, -1, -1, -1}, {3, 3}))).backward();
    adam.step();
    CHECK(a->mix.item() == 1);
    const std::vector<double> w = b->mix.to_vector();
    for (int i = 0; i < 3; ++i)
      for (int j = 0; j < 3; ++j) {
        if (j > i) CHECK(w[i * 3 + j] == 0);
        else CHECK((w[i * 3 + j] >= 1e-5f && w[i * 3 + j] <= 1));
      }
  }
}

TEST_CASE("set_projection: applied after every update of its parameter, removed by an empty one") {
  Tensor p = from_vector<double>({0.5, 0.5}, {2}).requires_grad_();
  nn::set_projection(p, [](const Tensor& w) { backend(w.device()).fill(w.narrow(0, 1, 1), 0.0); });
  nn::SGD sgd(nn::NamedParams{{"p", p}}, {.lr = 1});
  sum(p * -1.0).backward();  // p += 1 without the projection
  sgd.step();
  CHECK(p.to_vector() == std::vector<double>{1.5, 0});
  nn::set_projection(p, {});
  sgd.step();  // the same gradient again
  CHECK(p.to_vector() == std::vector<double>{2.5, 1});
}

TEST_CASE("block_major_order lays each block out contiguously") {
  Tensor p = nn::block_major_order(4, 4, 2);
  CHECK(p.to_vector_as<int64_t>() == std::vector<int64_t>{0, 1, 4, 5, 2, 3, 6, 7, 8, 9, 12, 13, 10, 11, 14, 15});
  CHECK(nn::block_major_order(2, 6, 2).to_vector_as<int64_t>() == std::vector<int64_t>{0, 1, 6, 7, 2, 3, 8, 9, 4, 5, 10, 11});
  CHECK_THROWS_WITH_AS(nn::block_major_order(4, 6, 4), doctest::Contains("[block_major_order]"), Error);
}

TEST_CASE("attention modules: errors name the module and the shapes") {
  CHECK_THROWS_WITH_AS(nn::MultiHeadAttention({6, 4}), doctest::Contains("[MultiHeadAttention]"), Error);
  nn::LinearAttention la({8, 2});
  CHECK_THROWS_WITH_AS(la.forward(randn({2, 5, 6})), doctest::Contains("[LinearAttention] expected x [B, N, 8]"), Error);
  nn::MHLAConfig c;
  c.dim = 8, c.heads = 2, c.grid = 2;
  nn::MHLA m(c);
  CHECK_THROWS_WITH_AS(m.forward(randn({1, 6, 8})), doctest::Contains("4 blocks"), Error);
  c.rope = true;  // the non-causal form has no sequence positions to rotate: refused, not ignored
  CHECK_THROWS_WITH_AS(nn::MHLA{c}, doctest::Contains("[MHLA] rope = true needs causal = true"), Error);
  c.causal = true;
  CHECK(nn::MHLA(c).rope != nullptr);
}
