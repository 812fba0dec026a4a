// softmax_attention, linear_attention and attention_matrix: values against naive quadratic forms
// built from primitive ops, stability, and error messages.
// Their float64 gradchecks are registry cases (check/ops_nn.cpp), run by ctest check_gradcheck.
#include <cmath>

#include <linea/nn/functional/linear_attention_detail.h>

#include "helpers.h"

using namespace linea;
using namespace linea::testing;
namespace F = linea::nn::functional;

namespace {

Tensor naive_softmax_attention(const Tensor& q, const Tensor& k, const Tensor& v, bool causal, double scale) {
  Tensor logits = matmul(q, k.transpose(-2, -1)) * scale;
  if (causal)
    logits = where(tril_mask(q.size(2), q.size(2)), logits, full({}, -INFINITY, q.dtype()));
  return matmul(softmax(logits, -1), v);
}

Tensor phi(const Tensor& x, F::FeatureMap fm, double eps) {
  switch (fm) {
    case F::FeatureMap::ReluEps: return relu(x) + eps;
    case F::FeatureMap::Elu1: return where(gt(x, zeros({}, x.dtype())), x + 1.0, exp(x));
    case F::FeatureMap::Relu: return relu(x);
    case F::FeatureMap::Identity: return x;
  }
  return x;
}

// o_t = Σ_u a_tu v_u / (Σ_u a_tu + eps), a = φ(q)φ(k)ᵀ (masked to u <= t when causal).
Tensor naive_linear_attention(const Tensor& q, const Tensor& k, const Tensor& v, F::LinearAttentionOptions o) {
  Tensor a = matmul(phi(q, o.feature_map, o.eps), phi(k, o.feature_map, o.eps).transpose(-2, -1));
  if (o.causal) a = tril(a);
  return matmul(a, v) / (sum(a, {-1}, true) + o.eps);
}

// A [B, H, N, d] float64 leaf that is a non-contiguous view (the head split of a [B, N, H, d] tensor).
Tensor strided64(int64_t B, int64_t H, int64_t N, int64_t d, uint64_t seed) {
  return randn64({B, N, H, d}, seed, false).permute({0, 2, 1, 3}).detach().requires_grad_();
}

const F::FeatureMap kMaps[] = {F::FeatureMap::ReluEps, F::FeatureMap::Elu1, F::FeatureMap::Relu,
                               F::FeatureMap::Identity};

}  // namespace

TEST_CASE("softmax_attention equals softmax(QKᵀ)V in float64, causal or not, N off the tile size") {
  for (int64_t N : {1, 37, 300}) {
    Tensor q = randn64({2, 3, N, 8}, 1, false), k = randn64({2, 3, N, 8}, 2, false), v = randn64({2, 3, N, 5}, 3, false);
    for (bool causal : {false, true}) {
      CAPTURE(N);
      CAPTURE(causal);
      CHECK(allclose(F::softmax_attention(q, k, v, {causal}), naive_softmax_attention(q, k, v, causal, 1 / std::sqrt(8.0)),
                     1e-12, 1e-12));
      CHECK(allclose(F::softmax_attention(q, k, v, {causal, 0.7}), naive_softmax_attention(q, k, v, causal, 0.7),
                     1e-12, 1e-12));
    }
  }
}

// The inputs are head splits of [B, N, H, d] tensors (non-contiguous views).
TEST_CASE("softmax_attention backward equals the composed backward, one key tile or many") {
  // 300: several query tiles (64) and key tiles (128), the last ones partial; 64: one of each
  // (dq written directly rather than summed from per-thread parts).
  for (int64_t N : {300, 64})
  for (bool causal : {false, true}) {
    CAPTURE(N);
    CAPTURE(causal);
    Tensor q = strided64(1, 2, N, 6, 4), k = strided64(1, 2, N, 6, 5), v = strided64(1, 2, N, 7, 6);
    Tensor g = randn64({1, 2, N, 7}, 7, false);
    sum(F::softmax_attention(q, k, v, {causal}) * g).backward();
    Tensor gq = q.grad(), gk = k.grad(), gv = v.grad();
    q.zero_grad(), k.zero_grad(), v.zero_grad();
    sum(naive_softmax_attention(q, k, v, causal, 1 / std::sqrt(6.0)) * g).backward();
    CHECK(allclose(gq, q.grad(), 1e-11, 1e-10));
    CHECK(allclose(gk, k.grad(), 1e-11, 1e-10));
    CHECK(allclose(gv, v.grad(), 1e-11, 1e-10));
  }
}

// float32 runs two kernels: N <= 128 (one key tile) the transposed-score form where the CPU has the
// direct gemm, beyond that the tiled one; both against the float64 kernel on the same values.
TEST_CASE("softmax_attention float32 forward and backward match float64, one key tile or many") {
  // 24, 48, 70: a causal block of 16 query rows straddles the half N/2 (rounded to 8) the products split at
  for (int64_t N : {1, 7, 24, 48, 64, 70, 128, 300})
    for (bool causal : {false, true}) {
      CAPTURE(N);
      CAPTURE(causal);
      Tensor q = strided64(2, 3, N, 16, 21), k = strided64(2, 3, N, 16, 22), v = strided64(2, 3, N, 12, 23);
      Tensor g = randn64({2, 3, N, 12}, 24, false);
      Tensor q32 = q.detach().to(float32).requires_grad_(), k32 = k.detach().to(float32).requires_grad_();
      Tensor v32 = v.detach().to(float32).requires_grad_();
      Tensor o = F::softmax_attention(q, k, v, {causal});
      Tensor o32 = F::softmax_attention(q32, k32, v32, {causal});
      sum(o * g).backward();
      sum(o32 * g.to(float32)).backward();
      CHECK(allclose(o32.to(float64), o, 1e-5, 1e-5));
      CHECK(allclose(q32.grad().to(float64), q.grad(), 1e-4, 1e-5));
      CHECK(allclose(k32.grad().to(float64), k.grad(), 1e-4, 1e-5));
      CHECK(allclose(v32.grad().to(float64), v.grad(), 1e-4, 1e-5));
    }
}

TEST_CASE("softmax_attention_qkv: a packed [B, N, 3·H·d] projection == softmax_attention on its thirds") {
  const int64_t B = 2, N = 70, H = 2, d = 5;
  for (bool causal : {false, true}) {
    CAPTURE(causal);
    Tensor qkv = randn64({B, N, 3 * H * d}, 11), qkv_ref = qkv.detach().requires_grad_();
    std::vector<Tensor> h;
    for (int64_t i = 0; i < 3; ++i)
      h.push_back(qkv_ref.narrow(2, i * H * d, H * d).view({B, N, H, d}).transpose(1, 2));
    const Tensor g = randn64({B, H, N, d}, 12, false);
    const Tensor out = F::softmax_attention_qkv(qkv, H, {causal});
    const Tensor ref = F::softmax_attention(h[0], h[1], h[2], {causal});
    CHECK(allclose(out, ref, 1e-12, 1e-12));
    sum(out * g).backward();
    sum(ref * g).backward();
    CHECK(allclose(qkv.grad(), qkv_ref.grad(), 1e-12, 1e-12));
  }
  CHECK_GRADCHECK([](const std::vector<Tensor>& in) { return F::softmax_attention_qkv(in[0], 2, {true}); },
                  {randn64({1, 5, 12}, 13)});
  CHECK_THROWS_WITH_AS(F::softmax_attention_qkv(randn64({1, 5, 12}, 14, false), 5),
                       doctest::Contains("[softmax_attention_qkv] expected qkv [B, N, 3·heads·d]"), linea::Error);
}

TEST_CASE("softmax_attention is stable for logits ~1e6: finite, float32 matches float64") {
  for (int64_t N : {64, 200})  // one key tile (the transposed form) and several
  for (bool causal : {false, true}) {
    CAPTURE(N);
    Generator g(11);
    Tensor q = randn({1, 2, N, 4}, g, float64) * 1e3, k = randn({1, 2, N, 4}, g, float64) * 1e3;
    Tensor v = randn({1, 2, N, 3}, g, float64);
    Tensor ref = naive_softmax_attention(q, k, v, causal, 0.5);
    Tensor o64 = F::softmax_attention(q, k, v, {causal, 0.5});
    CHECK(allclose(o64, ref, 1e-9, 1e-9));
    Tensor o32 = F::softmax_attention(q.to(float32), k.to(float32), v.to(float32), {causal, 0.5});
    for (double x : o32.to_vector()) REQUIRE(std::isfinite(x));
    CHECK(allclose(o32.to(float64), ref, 1e-3, 1e-3));
  }
}

TEST_CASE("linear_attention equals the naive normalised quadratic form, every feature map") {
  for (int64_t N : {1, 64, 150}) {  // one token, one full chunk, a padded third chunk
    for (F::FeatureMap fm : kMaps) {
      for (bool causal : {false, true}) {
        CAPTURE(N);
        CAPTURE(int(fm));
        CAPTURE(causal);
        Tensor q = randn64({2, 2, N, 5}, 12, false), k = randn64({2, 2, N, 5}, 13, false);
        Tensor v = randn64({2, 2, N, 6}, 14, false);
        if (fm == F::FeatureMap::Identity) q = abs(q) + 0.1, k = abs(k) + 0.1;  // positive denominators
        F::LinearAttentionOptions o{causal, fm, 1e-6};
        const Tensor ref = naive_linear_attention(q, k, v, o);
        CHECK(allclose(F::linear_attention(q, k, v, o), ref, 1e-10, 1e-10));
        // the composition, which backends without MHLA kernels run
        CHECK(allclose(F::detail::linear_attention_composite("linear_attention", {q, k, v}, 0, o), ref, 1e-10, 1e-10));
      }
    }
  }
}

// On the CPU linear_attention runs the MHLA kernels (causal: 10 chunks of 16 tokens here, the
// normaliser inside the kernels); the compositions (causal: 3 chunks of 64) and the causal kernels
// on V' with the normaliser around them (CUDA's form) are checked the same way.
TEST_CASE("linear_attention backward equals the naive form's, kernels and compositions, causal or not") {
  enum Form { Kernels, Composite, KernelsOnOnesColumn };
  for (F::FeatureMap fm : kMaps) {
    for (Form form : {Kernels, Composite, KernelsOnOnesColumn}) {
      for (bool causal : {false, true}) {
        if (form == KernelsOnOnesColumn && !causal) continue;
        CAPTURE(int(fm));
        CAPTURE(int(form));
        CAPTURE(causal);
        Tensor q = strided64(2, 2, 150, 5, 28), k = strided64(2, 2, 150, 5, 29), v = strided64(2, 2, 150, 4, 30);
        if (fm == F::FeatureMap::Identity) {
          NoGradGuard ng;
          q = (abs(q) + 0.5).detach().requires_grad_(), k = (abs(k) + 0.5).detach().requires_grad_();
        }
        F::LinearAttentionOptions o{causal, fm, 1e-6};
        Tensor g = randn64({2, 2, 150, 4}, 31, false);
        const Tensor out =
            form == Composite ? F::detail::linear_attention_composite("linear_attention", {q, k, v}, 0, o)
            : form == Kernels ? F::linear_attention(q, k, v, o)
                              : F::detail::linear_attention_kernel_causal("linear_attention", {q, k, v}, 0, o);
        sum(out * g).backward();
        Tensor gq = q.grad(), gk = k.grad(), gv = v.grad();
        q.zero_grad(), k.zero_grad(), v.zero_grad();
        sum(naive_linear_attention(q, k, v, o) * g).backward();
        CHECK(allclose(gq, q.grad(), 1e-9, 1e-8));
        CHECK(allclose(gk, k.grad(), 1e-9, 1e-8));
        CHECK(allclose(gv, v.grad(), 1e-9, 1e-8));
      }
    }
  }
}

TEST_CASE("linear_attention_qkv: a packed projection == linear_attention on its thirds, causal or not") {
  const int64_t B = 2, N = 70, H = 2, d = 3;  // causal: full chunks and a padded last one
  for (bool causal : {false, true}) {
    CAPTURE(causal);
    const F::LinearAttentionOptions o{causal, F::FeatureMap::Elu1};
    Tensor qkv = randn64({B, N, 3 * H * d}, 21), qkv_ref = qkv.detach().requires_grad_();
    std::vector<Tensor> h;
    for (int64_t i = 0; i < 3; ++i)
      h.push_back(qkv_ref.narrow(2, i * H * d, H * d).view({B, N, H, d}).transpose(1, 2));
    const Tensor g = randn64({B, H, N, d}, 22, false);
    const Tensor out = F::linear_attention_qkv(qkv, H, o), ref = F::linear_attention(h[0], h[1], h[2], o);
    CHECK(allclose(out, ref, 1e-12, 1e-12));
    sum(out * g).backward();
    sum(ref * g).backward();
    CHECK(allclose(qkv.grad(), qkv_ref.grad(), 1e-12, 1e-12));
    CHECK_GRADCHECK([o](const std::vector<Tensor>& in) { return F::linear_attention_qkv(in[0], 2, o); },
                    {randn64({1, 5, 12}, 23)});
  }
}

TEST_CASE("attention_matrix: rows sum to 1 and A @ V reproduces the attention outputs") {
  const int64_t N = 80;
  Tensor q = randn64({2, 2, N, 4}, 18, false), k = randn64({2, 2, N, 4}, 19, false), v = randn64({2, 2, N, 3}, 20, false);
  for (bool causal : {false, true}) {
    CAPTURE(causal);
    F::MHLAOptions o;
    o.causal = causal;
    o.feature_map = F::FeatureMap::Elu1;  // φ >= e^x keeps rowsum >> eps, so rows sum to 1 - O(eps)
    Tensor as = F::attention_matrix(F::AttentionKind::Softmax, q, k, Tensor(), o);
    CHECK(allclose(sum(as, {-1}), ones({2, 2, N}, float64), 1e-12, 0));
    CHECK(allclose(matmul(as, v), F::softmax_attention(q, k, v, {causal}), 1e-12, 1e-12));
    if (causal) CHECK(allclose(triu(as, 1), zeros({2, 2, N, N}, float64), 0, 0));

    Tensor al = F::attention_matrix(F::AttentionKind::Linear, q, k, Tensor(), o);
    CHECK(allclose(sum(al, {-1}), ones({2, 2, N}, float64), 1e-5, 0));
    CHECK(allclose(matmul(al, v), F::linear_attention(q, k, v, {causal, o.feature_map, o.eps}), 1e-12, 1e-10));
  }
}

TEST_CASE("attention_matrix for MHLA: block weights, all-ones = linear, identity = per-block linear") {
  const int64_t N = 50, L = 16;  // M = 4 blocks, the last one short
  Tensor q = randn64({1, 2, N, 4}, 21, false), k = randn64({1, 2, N, 4}, 22, false);
  F::MHLAOptions o;
  o.block_len = L;
  o.feature_map = F::FeatureMap::Elu1;
  Tensor lin = F::attention_matrix(F::AttentionKind::Linear, q, k, Tensor(), o);
  CHECK(allclose(F::attention_matrix(F::AttentionKind::MHLA, q, k, ones({4, 4}, float64), o), lin, 1e-12, 1e-12));
  Tensor a = F::attention_matrix(F::AttentionKind::MHLA, q, k, eye(4, float64), o);
  CHECK(allclose(sum(a, {-1}), ones({1, 2, N}, float64), 1e-5, 0));
  for (int64_t b = 0; b < 4; ++b) {  // identity mixing: each block attends only to itself
    const int64_t s = b * L, n = std::min(L, N - s);
    Tensor qb = q.narrow(2, s, n), kb = k.narrow(2, s, n);
    CHECK(allclose(a.narrow(2, s, n).narrow(3, s, n), F::attention_matrix(F::AttentionKind::Linear, qb, kb, Tensor(), o),
                   1e-12, 1e-12));
    CHECK(allclose(sum(a.narrow(2, s, n), {-1}), sum(a.narrow(2, s, n).narrow(3, s, n), {-1}), 1e-12, 0));
  }
  // Causal: s·(φq·φk)·W[b(t), b(u)] below the diagonal, unnormalised.
  o.causal = true;
  o.feature_map = F::FeatureMap::Relu;
  Generator g(23);
  Tensor w = rand({4, 4}, g, float64);
  Tensor ac = F::attention_matrix(F::AttentionKind::MHLA, q, k, w, o);
  auto qt = relu(q).select(0, 0).select(0, 1).select(0, 40).to_vector();
  auto ku = relu(k).select(0, 0).select(0, 1).select(0, 3).to_vector();
  double dot = 0;
  for (size_t i = 0; i < qt.size(); ++i) dot += qt[i] * ku[i];
  CHECK(ac.at({0, 1, 40, 3}) == doctest::Approx(0.5 * dot * w.at({2, 0})).epsilon(1e-12));
  CHECK(ac.at({0, 1, 3, 40}) == 0);
}

TEST_CASE("attention_matrix for MHLA reproduces the mhla op: A @ V == mhla(q, k, v, mix)") {
  const int64_t N = 50;
  Tensor q = randn64({1, 2, N, 4}, 32, false), k = randn64({1, 2, N, 4}, 33, false), v = randn64({1, 2, N, 3}, 34, false);
  Generator g(35);
  Tensor w = rand({4, 4}, g, float64);
  for (bool causal : {false, true}) {
    CAPTURE(causal);
    F::MHLAOptions o;
    o.causal = causal, o.block_len = 16, o.feature_map = F::FeatureMap::Elu1;
    CHECK(allclose(matmul(F::attention_matrix(F::AttentionKind::MHLA, q, k, w, o), v), F::mhla(q, k, v, w, o), 1e-12,
                   1e-10));
  }
}

TEST_CASE("saved attention probabilities: sized by the backend, checked by the kernels") {
  Backend& cpu = backend(Device::cpu());
  auto throws = [](auto f, const char* what) { CHECK_THROWS_WITH_AS(f(), doctest::Contains(what), Error); };
  // float64 (the gradient-checking dtype) and long sequences recompute P: nothing to pass.
  CHECK(cpu.attention_probs_size(8, DType::Float64) == 0);
  CHECK(cpu.attention_probs_size(300, DType::Float32) == 0);
  Tensor q = randn64({1, 2, 8, 4}, 24, false), v = randn64({1, 2, 8, 3}, 25, false);
  Tensor o = empty({1, 2, 8, 3}, float64), lse = empty({2, 8}, float64);
  throws([&] { cpu.attention_forward(q, q, v, 0.5, false, o, lse, empty({2, 128}, float64)); }, "keeps no probabilities");
  const int64_t size = cpu.attention_probs_size(8, DType::Float32);
  if (size == 0) {
    MESSAGE("this CPU has no direct float32 kernel: every attention recomputes P");
    return;
  }
  CHECK(size == 8 * 16);  // the transposed scores' rows padded to 16 floats
  Tensor q32 = q.to(float32), v32 = v.to(float32), o32 = empty({1, 2, 8, 3}), lse32 = empty({2, 8});
  throws([&] { cpu.attention_forward(q32, q32, v32, 0.5, false, o32, lse32, empty({2, size - 1})); },
         "expected a contiguous probs [2, 128] float32");
  throws([&] { cpu.attention_forward(q32, q32, v32, 0.5, false, o32, lse32, empty({2, size}, float64)); },
         "expected a contiguous probs");
  Tensor probs = empty({2, size});
  cpu.attention_forward(q32, q32, v32, 0.5, true, o32, lse32, probs);
  Tensor dq = empty({1, 2, 8, 4}), dk = empty({1, 2, 8, 4}), dv = empty({1, 2, 8, 3});
  throws([&] { cpu.attention_backward(q32, q32, v32, o32, lse32, Tensor(), o32, 0.5, true, dq, dk, dv); },
         "[attention_backward] needs the forward's probs [2, 128]");
}

TEST_CASE("attention errors name the op and the shapes") {
  Tensor q = randn64({1, 2, 8, 4}, 24, false), v = randn64({1, 2, 8, 3}, 25, false);
  auto throws = [](auto f, const char* what) { CHECK_THROWS_WITH_AS(f(), doctest::Contains(what), Error); };
  throws([&] { F::softmax_attention(q, randn64({1, 2, 8, 5}, 26, false), v); }, "[softmax_attention]");
  throws([&] { F::softmax_attention(q, q, randn64({1, 2, 7, 3}, 27, false)); }, "[softmax_attention]");
  throws([&] { F::softmax_attention(q.select(0, 0), q.select(0, 0), v.select(0, 0)); }, "[B, H, N, d]");
  throws([&] { F::softmax_attention(q, q, v.to(float32)); }, "dtype");
  throws([&] { F::softmax_attention(q, q, v, {false, -1.0}); }, "scale");
  throws([&] { F::linear_attention(q, q.to(float32), v); }, "[linear_attention]");
  throws([&] { F::linear_attention(q, q, v, {false, F::FeatureMap::ReluEps, -1.0}); }, "eps");
  throws([&] { F::attention_matrix(F::AttentionKind::Softmax, zeros({1, 1, 5000, 2}, float64), zeros({1, 1, 5000, 2}, float64)); },
         "too many");
  F::MHLAOptions o;
  throws([&] { F::attention_matrix(F::AttentionKind::MHLA, q, q, ones({2, 2}, float64), o); }, "block_len");
  o.block_len = 4;
  throws([&] { F::attention_matrix(F::AttentionKind::MHLA, q, q, ones({3, 3}, float64), o); }, "M = ceil(N / block_len) = 2");
  throws([&] { F::attention_matrix(F::AttentionKind::MHLA, q, q, Tensor(), o); }, "undefined");
}
