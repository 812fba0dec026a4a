// The fused CUDA MHLA kernels (cuda/mhla.cu) against the CPU: forward and all four gradients of
// mhla() on the GPU equal mhla_composite() on the CPU (autograd's backward of the same
// algorithm) and the fused mhla() on the CPU, non-causal and causal, padded last blocks, every
// feature map, d != dv; float64 gradchecks on the GPU; N = 16384 with large inputs stays finite
// and close to float64; MHLAStream on the GPU gives the CPU stream's and the chunkwise outputs.
// Runs only where a GPU is present (tests/gpu_main.cpp).
#include <cmath>

#include "helpers.h"

using namespace linea;
using namespace linea::nn::functional;
using linea::testing::allclose;
using linea::testing::randn64;

namespace {

const Device kGpu = Device::cuda();

struct Case {
  int64_t B, H, N, L, d, dv;
  FeatureMap fm;
  bool causal;
};

// Padded last blocks (N % L != 0), M = 1, one-token last block, d != dv, the largest head dims,
// chunks that are not a whole number of 16-token tiles, and block_len > N.
const Case kCases[] = {
    {2, 2, 12, 4, 3, 5, FeatureMap::ReluEps, false},   {1, 2, 13, 5, 4, 3, FeatureMap::Elu1, false},
    {2, 1, 7, 8, 4, 3, FeatureMap::Relu, false},       {1, 1, 9, 2, 2, 2, FeatureMap::Identity, false},
    {1, 2, 40, 16, 128, 128, FeatureMap::ReluEps, false},
    {2, 2, 12, 4, 4, 5, FeatureMap::ReluEps, true},    {1, 2, 13, 5, 3, 4, FeatureMap::Elu1, true},
    {2, 1, 7, 8, 4, 3, FeatureMap::Relu, true},        {1, 2, 10, 3, 3, 2, FeatureMap::Identity, true},
    {1, 2, 70, 32, 128, 96, FeatureMap::ReluEps, true},  // chunks longer than a 16-token tile
    {1, 2, 50, 20, 8, 8, FeatureMap::Elu1, true},         // chunk > one tile, not a multiple of 16
    {2, 1, 5, 64, 4, 4, FeatureMap::ReluEps, false},      // block_len > N: one partial block
    {1, 1, 5, 64, 4, 4, FeatureMap::ReluEps, true},
};

MHLAOptions options(const Case& c) {
  MHLAOptions o;
  o.causal = c.causal;
  o.block_len = c.L;
  o.feature_map = c.fm;
  return o;
}

// Float64 CPU inputs (not requiring grad): positive q, k under Identity (positive denominators),
// W in [0.1, 1.1).
struct Inputs {
  Tensor q, k, v, mix;
};
Inputs inputs(const Case& c, uint64_t seed) {
  Inputs in{randn64({c.B, c.H, c.N, c.d}, seed, false), randn64({c.B, c.H, c.N, c.d}, seed + 1, false),
            randn64({c.B, c.H, c.N, c.dv}, seed + 2, false), Tensor()};
  if (c.fm == FeatureMap::Identity) {
    in.q = abs(in.q) + 0.1;
    in.k = abs(in.k) + 0.1;
  }
  const int64_t M = (c.N + c.L - 1) / c.L;
  Generator g(seed + 3);
  in.mix = rand({M, M}, g, float64) + 0.1;
  return in;
}

// Output and gradients (dq, dk, dv, dmix) of f on `device` in `dtype` for the upstream gradient g,
// all returned as float64 CPU tensors. strided: the leaves are stored [B, N, H, e] (mix
// transposed) and f sees non-contiguous transposed views of them.
using MhlaFn = Tensor (*)(const Tensor&, const Tensor&, const Tensor&, const Tensor&, MHLAOptions);
std::vector<Tensor> run(MhlaFn f, const Inputs& in, const Tensor& g, const MHLAOptions& o, Device device, DType dtype,
                        bool strided = false) {
  auto view = [&](const Tensor& t, int i) { return !strided ? t : i == 3 ? t.t() : t.transpose(1, 2); };
  const Tensor src[] = {in.q, in.k, in.v, in.mix};
  std::vector<Tensor> leaves, x;
  for (int i = 0; i < 4; ++i) {
    leaves.push_back(view(src[i], i).contiguous().detach().to(dtype).to(device).requires_grad_());
    x.push_back(view(leaves[i], i));
  }
  Tensor out = f(x[0], x[1], x[2], x[3], o);
  out.backward(g.to(dtype).to(device));
  std::vector<Tensor> res{out.detach()};
  for (int i = 0; i < 4; ++i) res.push_back(view(leaves[i].grad(), i));
  for (Tensor& t : res) t = t.to(Device::cpu()).to(float64);
  return res;
}

double max_abs(const Tensor& x) { return max(abs(x)).item(); }

const char* kNames[] = {"out", "dq", "dk", "dv", "dmix"};

}  // namespace

TEST_CASE("gpu_mhla: fused kernels = CPU composite, forward and all four gradients, float64 and float32") {
  uint64_t seed = 100;
  for (const Case& c : kCases) {
    const MHLAOptions o = options(c);
    const Inputs in = inputs(c, seed);
    const Tensor g = randn64({c.B, c.H, c.N, c.dv}, seed + 4, false);
    seed += 10;
    const auto ref = run(mhla_composite, in, g, o, Device::cpu(), float64);
    const auto gpu64 = run(mhla, in, g, o, kGpu, float64);
    const auto gpu32 = run(mhla, in, g, o, kGpu, float32);
    for (int i = 0; i < 5; ++i) {
      INFO("N=" << c.N << " L=" << c.L << " d=" << c.d << " dv=" << c.dv << " fm=" << static_cast<int>(c.fm)
                << " causal=" << c.causal << " " << kNames[i]);
      CHECK(allclose(gpu64[i], ref[i], 1e-10, 1e-10));
      // float32: every kernel sums in float32, in another order than the CPU; errors are
      // measured relative to the largest entry (sums of mixed signs cancel).
      const double scale = std::max(max_abs(ref[i]), 1e-30);
      CHECK(max_abs(gpu32[i] - ref[i]) / scale < 1e-4);
    }
  }
}

TEST_CASE("gpu_mhla: fused kernels on the GPU = the fused op on the CPU, directly") {
  uint64_t seed = 300;
  for (const Case& c : kCases) {
    const MHLAOptions o = options(c);
    const Inputs in = inputs(c, seed);
    const Tensor g = randn64({c.B, c.H, c.N, c.dv}, seed + 4, false);
    seed += 10;
    for (DType dt : {float64, float32}) {
      const auto cpu = run(mhla, in, g, o, Device::cpu(), dt);
      const auto gpu = run(mhla, in, g, o, kGpu, dt);
      for (int i = 0; i < 5; ++i) {
        INFO("N=" << c.N << " L=" << c.L << " d=" << c.d << " dv=" << c.dv << " fm=" << static_cast<int>(c.fm)
                  << " causal=" << c.causal << " " << dtype_name(dt) << " " << kNames[i]);
        if (dt == float64) {
          CHECK(allclose(gpu[i], cpu[i], 1e-10, 1e-10));
        } else {  // both sum in float32, in different orders: relative to the largest entry
          CHECK(max_abs(gpu[i] - cpu[i]) / std::max(max_abs(cpu[i]), 1e-30) < 1e-4);
        }
      }
    }
  }
}

TEST_CASE("gpu_mhla: MHLAStream on the GPU = MHLAStream on the CPU = the chunkwise op") {
  for (const Case& c : kCases) {
    if (!c.causal) continue;
    const MHLAOptions o = options(c);
    const Inputs in = inputs(c, 400);
    const Tensor mix = tril(in.mix);  // causal: only the lower triangle is used
    MHLAStream cpu(mix, o), gpu(mix.to(kGpu), o);
    const Tensor qg = in.q.to(kGpu), kg = in.k.to(kGpu), vg = in.v.to(kGpu);
    std::vector<Tensor> out_cpu, out_gpu;
    for (int64_t t = 0; t < c.N; ++t) {
      out_cpu.push_back(cpu.step(in.q.select(2, t), in.k.select(2, t), in.v.select(2, t)));
      out_gpu.push_back(gpu.step(qg.select(2, t), kg.select(2, t), vg.select(2, t)));
    }
    INFO("N=" << c.N << " L=" << c.L << " d=" << c.d << " dv=" << c.dv << " fm=" << static_cast<int>(c.fm));
    const Tensor s_gpu = stack(out_gpu, 2).to(Device::cpu());
    CHECK(gpu.position() == c.N);
    CHECK(allclose(s_gpu, stack(out_cpu, 2), 1e-10, 1e-10));
    CHECK(allclose(s_gpu, mhla(qg, kg, vg, mix.to(kGpu), o).to(Device::cpu()), 1e-10, 1e-10));
  }
}

TEST_CASE("gpu_mhla: float64 gradcheck of the fused op on the GPU") {
  for (const Case& c : {kCases[0], kCases[1], kCases[3], kCases[5], kCases[6], kCases[8]}) {
    const MHLAOptions o = options(c);
    const Inputs in = inputs(c, 7);
    std::vector<Tensor> x;
    for (const Tensor& t : {in.q, in.k, in.v, in.mix}) x.push_back(t.to(kGpu).requires_grad_());
    INFO("N=" << c.N << " L=" << c.L << " causal=" << c.causal << " fm=" << static_cast<int>(c.fm));
    CHECK_GRADCHECK([&](const std::vector<Tensor>& t) { return mhla(t[0], t[1], t[2], t[3], o); }, x);
  }
}

TEST_CASE("gpu_mhla: non-contiguous inputs, the official normaliser (GEMM path) and a deterministic dmix") {
  const Case c{2, 2, 12, 4, 3, 5, FeatureMap::ReluEps, false};
  const Inputs in = inputs(c, 3);
  const Tensor g = randn64({c.B, c.H, c.N, c.dv}, 9, false);
  MHLAOptions o = options(c);
  const auto ref = run(mhla_composite, in, g, o, Device::cpu(), float64);
  const auto gpu = run(mhla, in, g, o, kGpu, float64, /*strided=*/true);
  for (int i = 0; i < 5; ++i) CHECK(allclose(gpu[i], ref[i], 1e-10, 1e-10));
  const auto again = run(mhla, in, g, o, kGpu, float64, true);
  CHECK(max_abs(again[4] - gpu[4]) == 0.0);  // dmix: per-pair partials and a fixed reduction order

  o.official_normalizer = true;
  const auto ref_off = run(mhla_composite, in, g, o, Device::cpu(), float64);
  const auto gpu_off = run(mhla, in, g, o, kGpu, float64);
  for (int i = 0; i < 5; ++i) CHECK(allclose(gpu_off[i], ref_off[i], 1e-10, 1e-10));
}

TEST_CASE("gpu_mhla: N = 16384 with |q|, |k|, |v| ~ 1e3 stays finite and close to float64") {
  for (bool causal : {false, true}) {
    const Case c{1, 2, 16384, causal ? 64 : 128, 16, 16, FeatureMap::ReluEps, causal};
    const MHLAOptions o = options(c);
    Inputs in = inputs(c, 11);
    in.q = in.q * 1e3;
    in.k = in.k * 1e3;
    in.v = in.v * 1e3;
    if (causal) {  // the LM init: row i averages the chunks it sees
      const int64_t M = in.mix.size(0);
      in.mix = tril(ones({M, M}, float64) / (arange(0, M, 1, float64) + 1).unsqueeze(1));
    }
    const Tensor g = randn64({c.B, c.H, c.N, c.dv}, 12, false);
    const auto r64 = run(mhla, in, g, o, kGpu, float64);
    const auto r32 = run(mhla, in, g, o, kGpu, float32);
    for (int i = 0; i < 5; ++i) {
      INFO("causal=" << causal << " " << kNames[i]);
      CHECK(std::isfinite(max_abs(r32[i])));
      CHECK(max_abs(r32[i] - r64[i]) / std::max(max_abs(r64[i]), 1e-30) < 1e-4);
    }
  }
}

TEST_CASE("gpu_mhla: head dims above 128 are an error, not a silent fallback") {
  const Case c{1, 1, 8, 4, 129, 4, FeatureMap::ReluEps, false};
  const Inputs in = inputs(c, 5);
  CHECK_THROWS_WITH_AS(mhla(in.q.to(kGpu), in.k.to(kGpu), in.v.to(kGpu), in.mix.to(kGpu), options(c)),
                       doctest::Contains("d, dv <= 128"), Error);
}

TEST_CASE("gpu_mhla: mhla_qkv on the GPU = on the CPU, output and the packed gradient") {
  const int64_t B = 2, N = 12, H = 2, d = 4;
  Generator gen(61);
  const Tensor qkv = randn64({B, N, 3 * H * d}, 62, false), mix = rand({3, 3}, gen, float64) + 0.1;
  const Tensor g = randn64({B, N, H, d}, 63, false).transpose(1, 2);
  MHLAOptions o;
  o.block_len = 4;
  auto run_on = [&](Device dev) {
    const Tensor x = qkv.to(dev).requires_grad_(), w = mix.to(dev).requires_grad_();
    const Tensor out = mhla_qkv(x, H, w, o);
    out.backward(g.to(dev));
    return std::vector<Tensor>{out.to(Device::cpu()), x.grad().to(Device::cpu()), w.grad().to(Device::cpu())};
  };
  const auto cpu = run_on(Device::cpu()), gpu = run_on(kGpu);
  for (size_t i = 0; i < cpu.size(); ++i) {
    CAPTURE(i);
    CHECK(allclose(gpu[i], cpu[i], 1e-10, 1e-10));
  }
}
