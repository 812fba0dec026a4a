// Non-causal MHLA: the fused operator (hand-written backward) against the same algorithm composed
// from primitive ops (autograd backward) and against the quadratic oracle of spec §1
// (check/mhla_reference.h); the identities with linear attention; large inputs; errors. The causal
// form: test_mhla_causal.cpp. Float64 gradchecks: registry cases (check/ops_nn.cpp), run by ctest
// check_gradcheck.
#include <cmath>

#include <linea/nn/functional/linear_attention_detail.h>

#include "helpers.h"
#include "mhla_reference.h"

using namespace linea;
using namespace linea::nn::functional;
using linea::testing::allclose;
using linea::testing::randn64;

namespace {

struct Case {
  int64_t B, H, N, L, d, dv;
};
// M = 3 equal blocks; unequal (5, 5, 2); M = 1; M = 5 with a last block of 1; d = 19 (the CPU
// kernel's column sums run 16 columns at a time, then the rest).
const Case kCases[] = {{2, 2, 12, 4, 3, 5}, {1, 2, 12, 5, 4, 3}, {2, 1, 7, 7, 3, 2}, {1, 1, 9, 2, 2, 2},
                       {1, 2, 10, 4, 19, 3}};
const FeatureMap kMaps[] = {FeatureMap::ReluEps, FeatureMap::Elu1, FeatureMap::Relu, FeatureMap::Identity};

int64_t blocks_of(const Case& c) { return (c.N + c.L - 1) / c.L; }

MHLAOptions options(const Case& c, FeatureMap fm) {
  MHLAOptions o;
  o.block_len = c.L;
  o.feature_map = fm;
  return o;
}

// Inputs with positive denominators: W in [0.1, 1.1); under Identity q, k are positive too.
struct Inputs {
  Tensor q, k, v, mix;
};
Inputs inputs(const Case& c, FeatureMap fm, uint64_t seed) {
  Inputs in{randn64({c.B, c.H, c.N, c.d}, seed), randn64({c.B, c.H, c.N, c.d}, seed + 1),
            randn64({c.B, c.H, c.N, c.dv}, seed + 2), Tensor()};
  if (fm == FeatureMap::Identity) {
    in.q = (abs(in.q) + 0.1).detach().requires_grad_();
    in.k = (abs(in.k) + 0.1).detach().requires_grad_();
  }
  Generator g(seed + 3);
  const int64_t M = blocks_of(c);
  in.mix = (rand({M, M}, g, float64) + 0.1).requires_grad_();
  return in;
}

// Gradients of sum(f(q, k, v, mix) * w) for a fixed random w: dq, dk, dv, dmix.
template <class F>
std::vector<Tensor> grads(F f, const Inputs& in, uint64_t seed) {
  std::vector<Tensor> leaves;
  for (const Tensor& t : {in.q, in.k, in.v, in.mix}) leaves.push_back(t.detach().requires_grad_());
  Tensor out = f(leaves[0], leaves[1], leaves[2], leaves[3]);
  out.backward(randn64(out.shape(), seed, false));
  return {leaves[0].grad(), leaves[1].grad(), leaves[2].grad(), leaves[3].grad()};
}

}  // namespace

TEST_CASE("mhla: fused == composite == quadratic oracle (forward, float64)") {
  for (const Case& c : kCases)
    for (FeatureMap fm : kMaps) {
      CAPTURE(c.N);
      CAPTURE(c.L);
      CAPTURE(static_cast<int>(fm));
      Inputs in = inputs(c, fm, 10);
      MHLAOptions o = options(c, fm);
      Tensor want = check::mhla_quadratic(in.q, in.k, in.v, in.mix, o);
      CHECK(allclose(mhla(in.q, in.k, in.v, in.mix, o), want, 1e-12, 1e-10));
      CHECK(allclose(mhla_composite(in.q, in.k, in.v, in.mix, o), want, 1e-12, 1e-10));
    }
}

TEST_CASE("mhla: non-contiguous inputs (q, k, v as transposed views of [B, N, H, e])") {
  const Case c{1, 2, 7, 3, 2, 3};
  Tensor q = randn64({c.B, c.N, c.H, c.d}, 30).transpose(1, 2);
  Tensor k = randn64({c.B, c.N, c.H, c.d}, 31).transpose(1, 2);
  Tensor v = randn64({c.B, c.N, c.H, c.dv}, 32).transpose(1, 2);
  REQUIRE_FALSE(q.is_contiguous());
  Generator g(33);
  Tensor mix = (rand({3, 3}, g, float64) + 0.1).requires_grad_();
  MHLAOptions o = options(c, FeatureMap::Elu1);
  CHECK(allclose(mhla(q, k, v, mix, o), check::mhla_quadratic(q, k, v, mix, o), 1e-12, 1e-10));
}

// The fused kernels read the heads where the projection put them and write the output and the
// input gradients in that layout, so merging the heads ([B, H, N, dv] -> [B, N, H·dv]) is a view.
// Head widths of 16, 32 and 64 take the gathers' fixed-length row copies (cpu_mhla.cpp), 3 and 5
// the general loop; causal or not.
TEST_CASE("mhla: heads of a [B, N, H, e] projection: fused == composite, output and gradients token-major") {
  for (const Case& c : {Case{2, 3, 10, 4, 3, 5}, Case{1, 2, 10, 4, 16, 32}, Case{1, 2, 10, 4, 64, 16}})
    for (bool causal : {false, true}) {
      CAPTURE(c.d);
      CAPTURE(c.dv);
      CAPTURE(causal);
      Generator gen(37);
      const Inputs in{randn64({c.B, c.N, c.H, c.d}, 34).transpose(1, 2), randn64({c.B, c.N, c.H, c.d}, 35).transpose(1, 2),
                      randn64({c.B, c.N, c.H, c.dv}, 36).transpose(1, 2), (rand({3, 3}, gen, float64) + 0.1)};
      MHLAOptions o = options(c, FeatureMap::ReluEps);
      o.causal = causal;
      const Tensor out = mhla(in.q, in.k, in.v, in.mix, o);
      CHECK(allclose(out, mhla_composite(in.q, in.k, in.v, in.mix, o), 1e-12, 1e-12));
      CHECK(out.transpose(1, 2).is_contiguous());  // the head merge is a view
      // Gradients of strided inputs, fed a gradient in the merged layout (as the projection sends it).
      std::vector<Tensor> leaves;
      for (const Tensor& t : {in.q, in.k, in.v, in.mix}) leaves.push_back(t.detach().requires_grad_());
      const Tensor g_out = randn64({c.B, c.N, c.H, c.dv}, 38, false).transpose(1, 2);
      mhla(leaves[0], leaves[1], leaves[2], leaves[3], o).backward(g_out);
      std::vector<Tensor> comp_leaves;
      for (const Tensor& t : {in.q, in.k, in.v, in.mix}) comp_leaves.push_back(t.detach().requires_grad_());
      mhla_composite(comp_leaves[0], comp_leaves[1], comp_leaves[2], comp_leaves[3], o).backward(g_out);
      for (size_t i = 0; i < 4; ++i) {
        CAPTURE(i);
        CHECK(allclose(leaves[i].grad(), comp_leaves[i].grad(), 1e-10, 1e-10));
      }
    }
}

TEST_CASE("mhla_qkv: a packed [B, N, 3·H·d] projection == mhla on its thirds, gradient in one buffer") {
  const Case c{2, 3, 10, 4, 4, 5};
  Generator gen(43);
  const Tensor qkv0 = randn64({c.B, c.N, 3 * c.H * c.d}, 44, false), mix0 = rand({3, 3}, gen, float64) + 0.1;
  const MHLAOptions o = options(c, FeatureMap::ReluEps);
  auto thirds = [&](const Tensor& y) {
    std::vector<Tensor> t;
    for (int64_t i = 0; i < 3; ++i)
      t.push_back(y.narrow(2, i * c.H * c.d, c.H * c.d).view({c.B, c.N, c.H, c.d}).transpose(1, 2));
    return t;
  };
  const Tensor qkv = qkv0.detach().requires_grad_(), mix = mix0.detach().requires_grad_();
  const Tensor out = mhla_qkv(qkv, c.H, mix, o);
  CHECK(out.transpose(1, 2).is_contiguous());  // the head merge is a view
  // The composite on the three slices (its gradient summed from each slice by autograd).
  const Tensor qkv_c = qkv0.detach().requires_grad_(), mix_c = mix0.detach().requires_grad_();
  const std::vector<Tensor> h = thirds(qkv_c);
  const Tensor out_c = mhla_composite(h[0], h[1], h[2], mix_c, o);
  CHECK(allclose(out, out_c, 1e-12, 1e-12));
  const Tensor g_out = randn64({c.B, c.N, c.H, c.d}, 45, false).transpose(1, 2);
  out.backward(g_out);
  out_c.backward(g_out);
  CHECK(allclose(qkv.grad(), qkv_c.grad(), 1e-10, 1e-10));
  CHECK(allclose(mix.grad(), mix_c.grad(), 1e-10, 1e-10));
  // Finite differences on a smaller case, and the errors.
  const Case s{1, 2, 6, 3, 2, 2};
  const Tensor mix_s = (rand({2, 2}, gen, float64) + 0.1).detach().requires_grad_();
  CHECK_GRADCHECK(
      [&](const std::vector<Tensor>& in) { return mhla_qkv(in[0], s.H, in[1], options(s, FeatureMap::Elu1)); },
      {randn64({s.B, s.N, 3 * s.H * s.d}, 46), mix_s});
  CHECK_THROWS_WITH_AS(mhla_qkv(qkv0, 5, mix0, o), doctest::Contains("[mhla_qkv] expected qkv [B, N, 3·heads·d]"),
                       linea::Error);
}

TEST_CASE("mhla: fused backward == composite (autograd) backward to 1e-10") {
  for (const Case& c : kCases)
    for (FeatureMap fm : kMaps) {
      CAPTURE(c.N);
      CAPTURE(c.L);
      CAPTURE(static_cast<int>(fm));
      Inputs in = inputs(c, fm, 40);
      MHLAOptions o = options(c, fm);
      auto fused = grads([o](auto q, auto k, auto v, auto m) { return mhla(q, k, v, m, o); }, in, 41);
      auto comp = grads([o](auto q, auto k, auto v, auto m) { return mhla_composite(q, k, v, m, o); }, in, 41);
      for (size_t i = 0; i < 4; ++i) {
        CAPTURE(i);
        CHECK(allclose(fused[i], comp[i], 1e-10, 1e-10));
      }
    }
}

TEST_CASE("mhla: official (vision code) normaliser: oracle, composite") {
  const Case c{2, 2, 9, 3, 2, 3};
  for (FeatureMap fm : {FeatureMap::ReluEps, FeatureMap::Elu1}) {
    Inputs in = inputs(c, fm, 50);
    MHLAOptions o = options(c, fm);
    o.official_normalizer = true;
    Tensor want = check::mhla_official_quadratic(in.q, in.k, in.v, in.mix, o);
    CHECK(allclose(mhla(in.q, in.k, in.v, in.mix, o), want, 1e-12, 1e-10));
    // It is a different function from the clean form unless W is diagonal.
    CHECK(max(abs(want - check::mhla_quadratic(in.q, in.k, in.v, in.mix, options(c, fm)))).item() > 1e-3);
    auto fused = grads([o](auto q, auto k, auto v, auto m) { return mhla(q, k, v, m, o); }, in, 51);
    auto comp = grads([o](auto q, auto k, auto v, auto m) { return mhla_composite(q, k, v, m, o); }, in, 51);
    for (size_t i = 0; i < 4; ++i) CHECK(allclose(fused[i], comp[i], 1e-10, 1e-10));
  }
  // With a diagonal W both normalisers agree.
  Inputs in = inputs(c, FeatureMap::ReluEps, 52);
  MHLAOptions o = options(c, FeatureMap::ReluEps), off = o;
  off.official_normalizer = true;
  Tensor diag = eye(3, float64) * 0.7;
  CHECK(allclose(mhla(in.q, in.k, in.v, diag, off), mhla(in.q, in.k, in.v, diag, o), 1e-12, 1e-10));
}

namespace {
// linear_attention as composed from primitive ops: on the CPU, linear_attention itself runs the
// MHLA kernels with M = 1, so it would be no independent reference for that identity.
Tensor composed_linear(const Tensor& q, const Tensor& k, const Tensor& v, const LinearAttentionOptions& lo) {
  return detail::linear_attention_composite("linear_attention", {q, k, v}, 0, lo);
}
}  // namespace

TEST_CASE("mhla: identities with linear attention") {
  const int64_t B = 2, H = 2, N = 12, d = 3, dv = 4;
  Tensor q = randn64({B, H, N, d}, 60, false), k = randn64({B, H, N, d}, 61, false), v = randn64({B, H, N, dv}, 62, false);
  for (FeatureMap fm : {FeatureMap::ReluEps, FeatureMap::Elu1}) {
    LinearAttentionOptions lo;
    lo.feature_map = fm;
    MHLAOptions o;
    o.feature_map = fm;
    // M = 1, W = [[1]]: one block is plain linear attention.
    o.block_len = N;
    CHECK(allclose(mhla(q, k, v, ones({1, 1}, float64), o), composed_linear(q, k, v, lo), 1e-12, 1e-10));
    // W all ones (M = 4): every block reads the sum of all summaries, i.e. linear attention again.
    o.block_len = 3;
    CHECK(allclose(mhla(q, k, v, ones({4, 4}, float64), o), composed_linear(q, k, v, lo), 1e-12, 1e-10));
    // W = I (M = 3, unequal blocks 5, 5, 2): each block attends only to itself.
    o.block_len = 5;
    std::vector<Tensor> parts;
    for (int64_t s = 0; s < N; s += 5) {
      const int64_t n = std::min<int64_t>(5, N - s);
      parts.push_back(composed_linear(q.narrow(2, s, n), k.narrow(2, s, n), v.narrow(2, s, n), lo));
    }
    CHECK(allclose(mhla(q, k, v, eye(3, float64), o), cat(parts, 2), 1e-12, 1e-10));
  }
}

TEST_CASE("mhla: large inputs (|x| ~ 1e3, N = 16384) stay finite and match float64") {
  const int64_t N = 16384, d = 16, dv = 16, L = 128, M = N / L;
  Generator g(70);
  Tensor q = randn({1, 1, N, d}, g) * 1e3, k = randn({1, 1, N, d}, g) * 1e3, v = randn({1, 1, N, dv}, g) * 1e3;
  Tensor mix = rand({M, M}, g);
  MHLAOptions o;
  o.block_len = L;
  Tensor q32 = q.detach().requires_grad_(), q64 = q.to(float64).requires_grad_();
  Tensor out = mhla(q32, k, v, mix, o), ref = mhla(q64, k.to(float64), v.to(float64), mix.to(float64), o);
  out.backward(ones_like(out));
  ref.backward(ones_like(ref));
  // Summaries reach ~1e10 and normalisers ~1e14, yet o and dq keep float32 accuracy relative to
  // their own size (measured: 5e-7 and 3e-7; tolerance 1e-5).
  auto rel_err = [](const Tensor& a, const Tensor& b) {
    return max(abs(a.to(float64) - b)).item() / max(abs(b)).item();
  };
  CHECK(std::isfinite(sum(out).item()));
  CHECK(std::isfinite(sum(abs(q32.grad())).item()));
  INFO("relative error: o " << rel_err(out, ref) << ", dq " << rel_err(q32.grad(), q64.grad()));
  CHECK(rel_err(out, ref) <= 1e-5);
  CHECK(rel_err(q32.grad(), q64.grad()) <= 1e-5);
}

TEST_CASE("mhla: errors name the op and the shapes") {
  Tensor q = randn64({1, 2, 8, 3}, 80, false), k = randn64({1, 2, 8, 3}, 81, false), v = randn64({1, 2, 8, 4}, 82, false);
  Tensor mix = ones({2, 2}, float64);
  MHLAOptions o;
  o.block_len = 4;
  auto throws = [](auto f, const char* what) { CHECK_THROWS_WITH_AS(f(), doctest::Contains(what), Error); };
  throws([&] { return mhla(q, k, v, ones({3, 3}, float64), o); }, "[mhla] mix must be [M, M]");
  throws([&] { return mhla(q, k, v, ones({2, 3}, float64), o); }, "[mhla] mix must be [M, M]");
  throws([&] { return mhla(q, k, v, Tensor(), o); }, "[mhla] mix must be [M, M]");
  throws([&] { return mhla(q, k, v, ones({2, 2}), o); }, "[mhla] mix");
  throws([&] { return mhla(q, k.to(float32), v, mix, o); }, "[mhla]");
  throws([&] { return mhla(q, randn64({1, 2, 8, 5}, 83, false), v, mix, o); }, "[mhla]");
  throws([&] { return mhla(q, k, randn64({1, 2, 7, 4}, 84, false), mix, o); }, "[mhla]");
  throws([&] { return mhla(q.view({2, 8, 3}), k, v, mix, o); }, "[mhla]");
  throws([&] { return mhla_composite(q, k, v, ones({3, 3}, float64), o); }, "[mhla] mix must be [M, M]");
  for (int64_t bad : {0, -4}) {
    MHLAOptions b = o;
    b.block_len = bad;
    throws([&] { return mhla(q, k, v, mix, b); }, "[mhla] block_len must be > 0");
  }
  MHLAOptions off = o;
  off.official_normalizer = true;
  off.block_len = 3;  // 8 tokens in blocks of 3
  throws([&] { return mhla(q, k, v, ones({3, 3}, float64), off); }, "[mhla] official_normalizer needs equal blocks");
  off.block_len = 4;
  off.causal = true;
  throws([&] { return mhla(q, k, v, mix, off); }, "[mhla] official_normalizer is for the non-causal form");
}

TEST_CASE("mhla: the CPU's fused kernels in float32 (the ViT's blocks, and a short last block) match float64") {
  // The CPU runs both forms in its own kernels (the direct gemm's tiles in float32); the causal
  // form's float32 case is in test_mhla_causal.cpp.
  struct Shape4 {
    int64_t N, L;
  };
  for (Shape4 sh : {Shape4{64, 16}, Shape4{60, 16}}) {
    CAPTURE(sh.N);
    const int64_t B = 2, H = 3, d = 16, dv = 16, M = (sh.N + sh.L - 1) / sh.L;
    Generator g(90);
    Tensor q = randn({B, H, sh.N, d}, g), k = randn({B, H, sh.N, d}, g), v = randn({B, H, sh.N, dv}, g);
    Tensor mix = rand({M, M}, g) + 0.1, w = randn({B, H, sh.N, dv}, g);
    MHLAOptions o;
    o.block_len = sh.L;
    o.eps = 1e-6;
    std::vector<Tensor> got, want;
    for (bool f64 : {false, true}) {
      std::vector<Tensor> leaves;
      for (const Tensor& t : {q, k, v, mix}) leaves.push_back((f64 ? t.to(float64) : t).detach().requires_grad_());
      Tensor out = mhla(leaves[0], leaves[1], leaves[2], leaves[3], o);
      out.backward(f64 ? w.to(float64) : w);
      std::vector<Tensor>& dst = f64 ? want : got;
      dst.push_back(out);
      for (const Tensor& l : leaves) dst.push_back(l.grad());
    }
    for (size_t i = 0; i < got.size(); ++i) {  // out, dq, dk, dv, dmix
      CAPTURE(i);
      const double err = max(abs(got[i].to(float64) - want[i])).item() / max(abs(want[i])).item();
      CHECK(err <= 2e-5);  // measured: 1e-7 .. 2e-6 (dmix sums 2·3 pairs of 272-long dots)
    }
  }
}

TEST_CASE("mhla: the CPU's fused kernels refuse mismatched saved tensors and outputs, naming the op") {
  Tensor q = randn64({1, 2, 8, 3}, 95, false), v = randn64({1, 2, 8, 4}, 96, false), mix = ones({2, 2}, float64);
  Tensor out = empty({1, 2, 8, 4}, float64), s = empty({2, 2, 3, 5}, float64), sh = empty({2, 2, 3, 5}, float64),
         r = empty({2, 8}, float64);
  Backend::MHLAArgs a;
  a.block_len = 4;
  a.eps = 1e-3;  // φ = relu + eps: positive normalisers
  Backend& cpu = backend(Device::cpu());
  a.causal = true;  // causal summaries are [BH, M, d, dv]: these are sized for the non-causal form
  CHECK_THROWS_WITH_AS(cpu.mhla_forward(q, q, v, mix, a, out, s, sh, Tensor()),
                       doctest::Contains("[mhla_forward] s (2, 2, 3, 5) / sh (2, 2, 3, 5) / r undefined do not fit"),
                       Error);
  a.causal = false;
  CHECK_THROWS_WITH_AS(cpu.mhla_forward(q, q, v, mix, a, out, s, empty({2, 2, 3, 4}, float64), r),
                       doctest::Contains("[mhla_forward]"), Error);
  CHECK_THROWS_WITH_AS(cpu.mhla_forward(q, q, v, mix, a, out, s, sh, empty({2, 8}, float32)),
                       doctest::Contains("[mhla_forward]"), Error);
  // Per-token tensors need unit stride along their last dim.
  CHECK_THROWS_WITH_AS(cpu.mhla_forward(q, q, v, mix, a, empty({1, 2, 4, 8}, float64).transpose(2, 3), s, sh, r),
                       doctest::Contains("[mhla_forward] out must be float64 [1, 2, 8, 4] with unit stride"), Error);
  CHECK_THROWS_WITH_AS(cpu.mhla_forward(q.transpose(2, 3).contiguous().transpose(2, 3), q, v, mix, a, out, s, sh, r),
                       doctest::Contains("[mhla_forward] q must be"), Error);
  cpu.mhla_forward(q, q, v, mix, a, out, s, sh, r);  // the same call with matching outputs runs
  CHECK(std::isfinite(sum(out).item()));
  // The normaliser of causal linear attention: causal only, with summaries carrying V's ones column
  // and r, as the non-causal form's.
  a.normalised = true;
  CHECK_THROWS_WITH_AS(cpu.mhla_forward(q, q, v, mix, a, out, s, sh, r),
                       doctest::Contains("[mhla_forward] the normalised form is causal linear attention's: causal only"),
                       Error);
  a.causal = true;
  CHECK_THROWS_WITH_AS(cpu.mhla_forward(q, q, v, mix, a, out, s, sh, Tensor()),
                       doctest::Contains("r undefined do not fit q (1, 2, 8, 3) and v (1, 2, 8, 4) (causal, normalised)"),
                       Error);
  CHECK_THROWS_WITH_AS(cpu.mhla_forward(q, q, v, mix, a, out, empty({2, 2, 3, 4}, float64),
                                        empty({2, 2, 3, 4}, float64), r),
                       doctest::Contains("(causal, normalised)"), Error);
  CHECK(cpu.has_fused_causal_normaliser());
  cpu.mhla_forward(q, q, v, mix, a, out, s, sh, r);
  CHECK(std::isfinite(sum(out).item()));
}

TEST_CASE("mhla and linear attention: a NaN in q or k reaches every output that reads it, relu maps included") {
  // relu(NaN) is NaN, as in PyTorch: the feature map must not turn a NaN query or key into 0 and
  // hide it. The NaN sits at token 5 (chunk 1 of 2) of head 1; head 0 never reads it.
  const int64_t N = 8, L = 4, t = 5;
  for (DType dt : {float32, float64})
    for (FeatureMap fm : {FeatureMap::ReluEps, FeatureMap::Relu, FeatureMap::Elu1})
      for (bool causal : {false, true})
        for (int in_k : {0, 1})
          for (int form = 0; form < 3; ++form) {  // mhla, mhla_composite, linear_attention
            Generator g(7);
            std::vector<Tensor> qk = {randn({1, 2, N, 3}, g, dt), randn({1, 2, N, 3}, g, dt)};
            const Tensor v = randn({1, 2, N, 2}, g, dt);
            std::vector<double> x = qk[in_k].to_vector();
            x[(1 * N + t) * 3 + 1] = NAN;
            qk[in_k] = from_vector(x, {1, 2, N, 3}).to(dt);
            MHLAOptions o{.causal = causal, .block_len = L, .feature_map = fm};
            const Tensor mix = full({2, 2}, 0.5, dt);
            const Tensor out = form == 0   ? mhla(qk[0], qk[1], v, mix, o)
                               : form == 1 ? mhla_composite(qk[0], qk[1], v, mix, o)
                                           : linear_attention(qk[0], qk[1], v, {causal, fm, 1e-6});
            const std::vector<double> y = out.to_vector();  // [1, 2, N, 2]
            for (int64_t h = 0; h < 2; ++h)
              for (int64_t i = 0; i < N; ++i) {
                // a query reads its own row; a key reaches every query that attends to it
                const bool reads = h == 1 && (in_k ? (!causal || i >= t) : i == t);
                for (int64_t c = 0; c < 2; ++c) {
                  const double yv = y[((h * N) + i) * 2 + c];
                  INFO(std::string(dtype_name(dt)), " ", std::string(check::feature_map_name(fm)),
                       causal ? " causal" : "", in_k ? " NaN in k" : " NaN in q", " form ", form, " head ", h,
                       " token ", i);
                  // Causal, a NaN key also reaches earlier tokens: the mask is zero weights in a
                  // product (0 · NaN is NaN), as a NaN value always did.
                  if (reads) CHECK(std::isnan(yv));
                  else if (!causal || !in_k) CHECK(std::isfinite(yv));
                }
              }
          }
}
