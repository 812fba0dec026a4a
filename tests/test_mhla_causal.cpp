// Causal MHLA: the device's kernels (the CPU's in tensor/cpu/cpu_mhla.cpp, with a hand-written
// backward), the chunkwise composite, the masked quadratic oracle (check/mhla_reference.h), and
// the streaming form must all be one function
// (spec §3, §5.3). Float64 gradchecks: registry cases (check/ops_nn.cpp), run by ctest check_gradcheck.
#include <cmath>

#include <linea/nn/functional/attention.h>

#include "helpers.h"
#include "mhla_reference.h"

using namespace linea;
using namespace linea::nn::functional;
using linea::testing::allclose;
using linea::testing::randn64;

namespace {

struct Case {
  int64_t B, H, N, C, d, dv;
  FeatureMap fm;
};

// Every feature map, one chunk (M = 1), full chunks, and padded last chunks.
const Case kCases[] = {
    {2, 2, 12, 4, 4, 5, FeatureMap::ReluEps},   // 3 full chunks
    {1, 2, 13, 5, 3, 4, FeatureMap::Elu1},      // last chunk holds 3 of 5
    {2, 1, 7, 8, 4, 3, FeatureMap::Relu},       // M = 1, padded
    {1, 1, 6, 6, 2, 3, FeatureMap::Identity},   // M = 1, exact
    {1, 2, 10, 3, 3, 2, FeatureMap::Identity},  // M = 4, last chunk holds 1
};

MHLAOptions causal_opts(int64_t C, FeatureMap fm) {
  MHLAOptions o;
  o.causal = true;
  o.block_len = C;
  o.feature_map = fm;
  return o;
}

int64_t chunks(const Case& c) { return (c.N + c.C - 1) / c.C; }

// The official causal init W_ij = 1/(i+1) for j ≤ i (spec §2.2), with junk above the diagonal
// that must be ignored.
Tensor lm_init(int64_t M, DType dt) {
  std::vector<double> w(M * M);
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < M; ++j) w[i * M + j] = j <= i ? 1.0 / (i + 1) : 7.0 + i + j;
  return from_vector(w, {M, M}).to(dt);
}

struct Inputs {
  Tensor q, k, v, mix;
};

// q, k, v as non-contiguous [B,H,N,·] views of wider [B,N,H,·] leaves (as a qkv projection makes
// them) and a transposed mix, or all contiguous.
Inputs make_inputs(const Case& c, uint64_t seed, bool contiguous = false) {
  auto make = [&](int64_t e, uint64_t sd) {
    if (contiguous) return randn64({c.B, c.H, c.N, e}, sd);
    Tensor wide = randn64({c.B, c.N, c.H, e + 1}, sd, false);
    return wide.permute({0, 2, 1, 3}).narrow(3, 0, e).detach().requires_grad_();
  };
  const int64_t M = chunks(c);
  Tensor mix = contiguous ? randn64({M, M}, seed + 3) : randn64({M, M}, seed + 3, false).t().detach().requires_grad_();
  return {make(c.d, seed), make(c.d, seed + 1), make(c.dv, seed + 2), mix};
}

double max_diff(const Tensor& a, const Tensor& b) { return max(abs(a - b)).item(); }

std::vector<Tensor> grads_of(const Tensor& out, const Inputs& in, uint64_t seed) {
  for (Tensor t : {in.q, in.k, in.v, in.mix}) t.zero_grad();
  sum(out * randn64(out.shape(), seed, false)).backward();
  return {in.q.grad(), in.k.grad(), in.v.grad(), in.mix.grad()};
}

}  // namespace

TEST_CASE("causal mhla: fused == composite == masked quadratic oracle (float64)") {
  uint64_t seed = 100;
  for (const Case& c : kCases) {
    CAPTURE(c.N);
    CAPTURE(c.C);
    Inputs in = make_inputs(c, seed += 10);
    MHLAOptions o = causal_opts(c.C, c.fm);
    Tensor fused = mhla(in.q, in.k, in.v, in.mix, o);
    CHECK(fused.shape() == Shape({c.B, c.H, c.N, c.dv}));
    CHECK(allclose(fused, check::mhla_quadratic(in.q, in.k, in.v, in.mix, o), 1e-12, 1e-12));
    CHECK(allclose(mhla_composite(in.q, in.k, in.v, in.mix, o), fused, 1e-12, 1e-12));
  }
  // An explicit scale replaces d^-1/2.
  const Case& c = kCases[1];
  Inputs in = make_inputs(c, 7);
  MHLAOptions o = causal_opts(c.C, c.fm);
  o.scale = 0.3;
  CHECK(allclose(mhla(in.q, in.k, in.v, in.mix, o), check::mhla_quadratic(in.q, in.k, in.v, in.mix, o), 1e-12, 1e-12));
}

// mhla() runs the backend's kernels; mhla_composite derives its backward by autograd.
TEST_CASE("causal mhla: fused backward == composite backward; upper triangle of mix unused") {
  uint64_t seed = 300;
  for (const Case& c : kCases) {
    CAPTURE(c.N);
    CAPTURE(c.C);
    Inputs in = make_inputs(c, seed += 10);
    MHLAOptions o = causal_opts(c.C, c.fm);
    std::vector<Tensor> gf = grads_of(mhla(in.q, in.k, in.v, in.mix, o), in, seed + 5);
    std::vector<Tensor> gc = grads_of(mhla_composite(in.q, in.k, in.v, in.mix, o), in, seed + 5);
    for (size_t i = 0; i < gf.size(); ++i) {
      CAPTURE(i);
      CHECK(allclose(gf[i], gc[i], 1e-10, 1e-10));
    }
    // Entries j > i of mix: exactly zero gradient, and no effect on the output.
    const int64_t M = chunks(c);
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = i + 1; j < M; ++j) CHECK(gf[3].at({i, j}) == 0.0);
    Tensor changed = in.mix.detach() + triu(full_like(in.mix, 5.0), 1);
    CHECK(allclose(mhla(in.q, in.k, in.v, changed, o), mhla(in.q, in.k, in.v, in.mix, o), 0, 0));
  }
}

TEST_CASE("causal mhla: the CPU kernels in float32 (the char-GPT's chunks, and a short last one) match float64") {
  for (int64_t N : {64, 60}) {
    CAPTURE(N);
    const int64_t B = 2, H = 2, C = 16, d = 32, dv = 32, M = (N + C - 1) / C;
    Generator g(360);
    Tensor q = randn({B, H, N, d}, g), k = randn({B, H, N, d}, g), v = randn({B, H, N, dv}, g);
    Tensor w = randn({B, H, N, dv}, g), mix = lm_init(M, DType::Float32);
    const MHLAOptions o = causal_opts(C, FeatureMap::Relu);
    std::vector<Tensor> got, want;
    for (bool f64 : {false, true}) {
      std::vector<Tensor> leaves;
      for (const Tensor& t : {q, k, v, mix})
        leaves.push_back((f64 ? t.to(DType::Float64) : t).detach().requires_grad_());
      Tensor out = mhla(leaves[0], leaves[1], leaves[2], leaves[3], o);
      out.backward(f64 ? w.to(DType::Float64) : w);
      std::vector<Tensor>& dst = f64 ? want : got;
      dst.push_back(out);
      for (const Tensor& l : leaves) dst.push_back(l.grad());
    }
    for (size_t i = 0; i < got.size(); ++i) {  // out, dq, dk, dv, dmix
      CAPTURE(i);
      const double err = max(abs(got[i].to(DType::Float64) - want[i])).item() / max(abs(want[i])).item();
      CHECK(err <= 2e-5);
    }
  }
}

TEST_CASE("causal mhla: a future token never changes earlier outputs") {
  const Case c{1, 2, 11, 4, 3, 3, FeatureMap::ReluEps};
  Inputs in = make_inputs(c, 400, true);
  MHLAOptions o = causal_opts(c.C, c.fm);
  Tensor before = mhla(in.q, in.k, in.v, in.mix, o);
  for (int64_t t0 : {2, 5, 10}) {  // mid-chunk, next chunk, the padded last chunk
    CAPTURE(t0);
    Tensor q = in.q.detach().clone(), k = in.k.detach().clone(), v = in.v.detach().clone();
    for (const Tensor& x : {q, k, v}) backend(x.device()).fill(x.narrow(2, t0, 1), 3.5);
    Tensor after = mhla(q, k, v, in.mix, o);
    CHECK(max_diff(after.narrow(2, 0, t0), before.narrow(2, 0, t0)) == 0.0);
    CHECK(max_diff(after.narrow(2, t0, 1), before.narrow(2, t0, 1)) > 1e-3);  // the test can fail
  }
}

TEST_CASE("MHLAStream: token-by-token outputs equal the chunkwise form") {
  // N = 11 with C = 4: three chunks, the last one partial; mix sized for exactly those chunks.
  const Case c{2, 3, 11, 4, 5, 3, FeatureMap::ReluEps};
  for (DType dt : {DType::Float64, DType::Float32}) {
    CAPTURE(dt);
    Inputs in = make_inputs(c, 500, true);
    Tensor q = in.q.detach().to(dt), k = in.k.detach().to(dt), v = in.v.detach().to(dt);
    Tensor mix = lm_init(chunks(c), dt);
    MHLAOptions o = causal_opts(c.C, c.fm);
    Tensor ref = mhla(q, k, v, mix, o);
    MHLAStream stream(mix, o);
    std::vector<Tensor> outs;
    for (int64_t t = 0; t < c.N; ++t) outs.push_back(stream.step(q.select(2, t), k.select(2, t), v.select(2, t)));
    CHECK(stream.position() == c.N);
    // float32: both forms sum the same O(C + M) terms in different orders; 2e-6 relative to |o|.
    const double tol = dt == DType::Float64 ? 1e-12 : 2e-6;
    CHECK(allclose(stack(outs, 2), ref, tol, tol));
  }
}

TEST_CASE("MHLAStream: every feature map, an explicit scale, and no graph") {
  const Case c{1, 2, 9, 3, 4, 2, FeatureMap::Elu1};
  for (FeatureMap fm : {FeatureMap::Elu1, FeatureMap::Relu, FeatureMap::Identity}) {
    Inputs in = make_inputs(c, 600);
    MHLAOptions o = causal_opts(c.C, fm);
    o.scale = 0.7;
    Tensor ref = mhla(in.q, in.k, in.v, in.mix, o);
    MHLAStream stream(in.mix, o);
    std::vector<Tensor> outs;
    for (int64_t t = 0; t < c.N; ++t) {
      outs.push_back(stream.step(in.q.select(2, t), in.k.select(2, t), in.v.select(2, t)));
      CHECK_FALSE(outs.back().requires_grad());
    }
    CHECK(allclose(stack(outs, 2), ref.detach(), 1e-12, 1e-12));
  }
}

TEST_CASE("causal mhla: large magnitudes at N = 16384 in float32 match a float64 run") {
  // Values ~1e3, W from the LM init: outputs reach ~1e10. float32 GEMMs over up to d + C terms
  // per product and a 256-term mixing sum; measured max error ~2e-7 of max|o|; documented: 1e-5.
  const int64_t N = 16384, C = 64, d = 16, M = N / C;
  Generator g(700);
  Tensor q = randn({1, 2, N, d}, g, DType::Float64) * 1e3, k = randn({1, 2, N, d}, g, DType::Float64) * 1e3;
  Tensor v = randn({1, 2, N, d}, g, DType::Float64) * 1e3;
  MHLAOptions o = causal_opts(C, FeatureMap::ReluEps);
  Tensor ref = mhla(q, k, v, lm_init(M, DType::Float64), o);
  Tensor out = mhla(q.to(DType::Float32), k.to(DType::Float32), v.to(DType::Float32), lm_init(M, DType::Float32), o);
  const double peak = max(abs(ref)).item();
  CHECK(std::isfinite(max(abs(out)).item()));
  CHECK(peak > 1e8);
  const double err = max(abs(out.to(DType::Float64) - ref)).item() / peak;
  MESSAGE("float32 vs float64, max |diff| / max |o| = " << err);
  CHECK(err < 1e-5);
}

TEST_CASE("causal mhla and MHLAStream: clear errors") {
  const Case c{1, 1, 9, 4, 2, 2, FeatureMap::ReluEps};
  Inputs in = make_inputs(c, 800, true);
  MHLAOptions o = causal_opts(c.C, c.fm);
  Tensor small = randn64({2, 2}, 1);  // N = 9 needs 3 chunks of 4
  CHECK_THROWS_WITH_AS(mhla(in.q, in.k, in.v, small, o), doctest::Contains("[mhla]"), Error);
  MHLAOptions bad = o;
  bad.block_len = 0;
  CHECK_THROWS_WITH_AS(mhla(in.q, in.k, in.v, in.mix, bad), doctest::Contains("[mhla]"), Error);
  bad.block_len = -4;
  CHECK_THROWS_WITH_AS(mhla_composite(in.q, in.k, in.v, in.mix, bad), doctest::Contains("[mhla]"), Error);
  CHECK_THROWS_WITH_AS(mhla(in.q, in.k.narrow(3, 0, 1), in.v, in.mix, o), doctest::Contains("[mhla]"), Error);
  CHECK_THROWS_WITH_AS(mhla(in.q, in.k, in.v.narrow(2, 0, 5), in.mix, o), doctest::Contains("[mhla]"), Error);
  // A NaN or infinite scale would make every output NaN; a negative one flips the attention.
  for (double s : {double(NAN), -double(INFINITY), double(INFINITY), -0.5}) {
    MHLAOptions so = o;
    so.scale = s;
    const std::string want = fmt::format("[mhla] scale must be a finite number > 0, or 0 for d^-1/2; got {}", s);
    CHECK_THROWS_WITH_AS(mhla(in.q, in.k, in.v, in.mix, so), doctest::Contains(want.c_str()), Error);
    CHECK_THROWS_WITH_AS(mhla_composite(in.q, in.k, in.v, in.mix, so), doctest::Contains(want.c_str()), Error);
    CHECK_THROWS_WITH_AS(MHLAStream(in.mix, so), doctest::Contains("[MHLAStream] scale must be"), Error);
    so.causal = false;
    CHECK_THROWS_WITH_AS(mhla(in.q, in.k, in.v, sigmoid(in.mix), so), doctest::Contains(want.c_str()), Error);
  }
  MHLAOptions bad_eps = o;
  bad_eps.eps = INFINITY;
  CHECK_THROWS_WITH_AS(mhla(in.q, in.k, in.v, in.mix, bad_eps), doctest::Contains("[mhla] eps must be"), Error);

  // The stream: bad construction, bad steps, and running past M * block_len tokens.
  CHECK_THROWS_WITH_AS(MHLAStream(in.mix, bad), doctest::Contains("[MHLAStream]"), Error);
  MHLAOptions non_causal = o;
  non_causal.causal = false;
  CHECK_THROWS_WITH_AS(MHLAStream(in.mix, non_causal), doctest::Contains("[MHLAStream]"), Error);
  CHECK_THROWS_WITH_AS(MHLAStream(randn64({2, 3}, 2), o), doctest::Contains("[MHLAStream]"), Error);
  MHLAStream stream(randn64({2, 2}, 3, false), o);  // room for 2 * 4 = 8 tokens
  Tensor q = randn64({1, 1, 2}, 4, false), v = randn64({1, 1, 2}, 5, false);
  CHECK_THROWS_WITH_AS(stream.step(q, q.narrow(2, 0, 1), v), doctest::Contains("[MHLAStream]"), Error);
  CHECK_THROWS_WITH_AS(stream.step(q.to(DType::Float32), q.to(DType::Float32), v.to(DType::Float32)),
                       doctest::Contains("[MHLAStream]"), Error);
  for (int i = 0; i < 8; ++i) stream.step(q, q, v);
  CHECK_THROWS_WITH_AS(stream.step(q, q, v), doctest::Contains("position 8 exceeds"), Error);
  CHECK_THROWS_WITH_AS(stream.step(randn64({2, 1, 2}, 6, false), randn64({2, 1, 2}, 7, false), v),
                       doctest::Contains("[MHLAStream]"), Error);
}
