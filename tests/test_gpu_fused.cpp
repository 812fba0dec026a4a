// The fused kernels for nn/ on the GPU against the CPU backend: cross-entropy (values and
// gradients, every option), AdamW / SGD multi-tensor steps, sum_squares, scale_all and
// clip_grad_norm_, the counter RNG and Dropout masks (bit-identical across devices for the same
// seed), cumsum (bit-identical) and the causal linear attention that uses it. Skips (exit 77)
// without a device: see gpu_main.cpp.
//
// Tolerances: float64 1e-12 relative; float32 1e-5 (the GPU sums a row's exponentials in another
// order and uses expf where the CPU uses a Cephes polynomial; FMAs change the last bit of updates).
#include <vector>

#include "helpers.h"

using namespace linea;
using linea::testing::allclose;
using linea::testing::randn64;
using nn::CrossEntropyOptions;
using nn::Reduction;

namespace {

const Device kGpu = Device::cuda();

double tol(DType d) { return d == DType::Float64 ? 1e-12 : 1e-5; }

// A leaf on `device` with the given values.
Tensor leaf(const Tensor& values, Device device) { return values.detach().to(device).requires_grad_(); }

}  // namespace

TEST_CASE("cross_entropy on the GPU matches the CPU: values and gradients, every option") {
  struct Case { int64_t rows, C; };
  for (Case k : {Case{6, 5}, Case{37, 1000}, Case{3, 70000}}) {
    for (DType dtype : {DType::Float32, DType::Float64}) {
      for (double eps : {0.0, 0.1}) {
        for (Reduction red : {Reduction::Mean, Reduction::Sum, Reduction::None}) {
          CAPTURE(k.rows);
          CAPTURE(k.C);
          CAPTURE(dtype);
          CAPTURE(eps);
          CAPTURE(static_cast<int>(red));
          Tensor x = (randn64({k.rows, k.C}, 40, false) * 3).to(dtype);
          std::vector<int64_t> t(static_cast<size_t>(k.rows));
          for (int64_t r = 0; r < k.rows; ++r) t[r] = r % 4 == 1 ? -100 : (r * 7919) % k.C;
          Tensor tt = from_vector(t, {k.rows});
          const CrossEntropyOptions o{.ignore_index = -100, .label_smoothing = eps, .reduction = red};
          Tensor xc = leaf(x, Device::cpu()), xg = leaf(x, kGpu);
          Tensor lc = nn::cross_entropy(xc, tt, o), lg = nn::cross_entropy(xg, tt.to(kGpu), o);
          CHECK(lg.device() == kGpu);
          CHECK(allclose(lg.to(Device::cpu()), lc, tol(dtype), tol(dtype)));
          // A non-uniform upstream gradient for None, so the per-row weights are exercised.
          Tensor gc = red == Reduction::None ? randn64({k.rows}, 41, false).to(dtype) : ones({}, dtype);
          lc.backward(gc);
          lg.backward(gc.to(kGpu));
          CHECK(allclose(xg.grad().to(Device::cpu()), xc.grad(), tol(dtype), tol(dtype)));
        }
      }
    }
  }
  // Every target ignored: NaN mean, zero gradient, on both devices alike.
  Tensor x = randn64({2, 3}, 42, false).to(kGpu).requires_grad_();
  Tensor l = nn::cross_entropy(x, from_vector<int64_t>({-100, -100}, {2}).to(kGpu));
  CHECK(std::isnan(l.item()));
  // Out-of-range targets are caught on the host before any kernel runs.
  CHECK_THROWS_WITH_AS(nn::cross_entropy(x, from_vector<int64_t>({0, 3}, {2}).to(kGpu)),
                       doctest::Contains("target 3 at flat index 1 is out of range"), Error);
}

TEST_CASE("AdamW and SGD steps on the GPU match the CPU (one launch over all parameters)") {
  // Sizes around the 16384-element chunk of the multi-tensor kernel, in two groups, plus a float64
  // parameter (a second launch) and one without a gradient (skipped).
  const std::vector<int64_t> sizes = {1, 300, 16384, 16385, 70000};
  for (bool adam : {true, false}) {
    CAPTURE(adam);
    std::vector<Tensor> pc, pg;
    for (size_t i = 0; i < sizes.size() + 2; ++i) {
      const DType d = i == sizes.size() ? DType::Float64 : DType::Float32;
      const int64_t n = i < sizes.size() ? sizes[i] : 50;
      Tensor v = randn64({n}, 50 + i, false).to(d);
      pc.push_back(leaf(v, Device::cpu()));
      pg.push_back(leaf(v, kGpu));
    }
    auto groups = [&](const std::vector<Tensor>& ps) {
      nn::ParamGroup a{{}, 0.02, 0.0}, b{};
      for (size_t i = 0; i < ps.size(); ++i) (i % 2 ? a : b).params.emplace_back("p" + std::to_string(i), ps[i]);
      return std::vector<nn::ParamGroup>{a, b};
    };
    std::unique_ptr<nn::Optimizer> oc, og;
    if (adam) {
      nn::AdamWOptions o{.lr = 0.01, .beta1 = 0.8, .beta2 = 0.95, .eps = 1e-6, .weight_decay = 0.1};
      oc = std::make_unique<nn::AdamW>(groups(pc), o);
      og = std::make_unique<nn::AdamW>(groups(pg), o);
    } else {
      nn::SGDOptions o{.lr = 0.05, .momentum = 0.9, .nesterov = true, .weight_decay = 0.01};
      oc = std::make_unique<nn::SGD>(groups(pc), o);
      og = std::make_unique<nn::SGD>(groups(pg), o);
    }
    for (int step = 1; step <= 3; ++step) {
      for (auto* ps : {&pc, &pg}) {
        for (size_t i = 0; i + 1 < ps->size(); ++i) {  // the last parameter never gets a gradient
          (*ps)[i].zero_grad();
          sum((*ps)[i] * (*ps)[i] * (0.5 + step)).backward();
        }
      }
      oc->step();
      og->step();
    }
    for (size_t i = 0; i < pc.size(); ++i) {
      CAPTURE(i);
      CHECK(allclose(pg[i].detach().to(Device::cpu()), pc[i].detach(), 1e-6, 1e-5));
    }
    // The optimizer state round-trips through the host like the CPU's.
    const nn::StateDict sc = oc->state_dict(), sg = og->state_dict();
    for (const auto& [key, t] : sc) CHECK(allclose(sg.at(key).to(Device::cpu()), t, 1e-6, 1e-5));
  }
}

TEST_CASE("sum_squares on the GPU matches the CPU, and is the same on every run") {
  for (DType dtype : {DType::Float32, DType::Float64}) {
    for (int64_t n : {0, 1, 1000, 3000017}) {
      CAPTURE(dtype);
      CAPTURE(n);
      Tensor x = randn64({n}, 59, false).to(dtype), y = randn64({n / 2 + 3}, 58, false).to(dtype);
      Tensor oc = empty({2}, DType::Float64), og = empty({2}, DType::Float64, kGpu);
      Tensor og2 = empty({2}, DType::Float64, kGpu);
      backend(Device::cpu()).sum_squares({x, y}, oc);
      backend(kGpu).sum_squares({x.to(kGpu), y.to(kGpu)}, og);
      backend(kGpu).sum_squares({x.to(kGpu), y.to(kGpu)}, og2);
      const std::vector<double> c = oc.to_vector(), g = og.to(Device::cpu()).to_vector();
      for (int t = 0; t < 2; ++t) CHECK(g[t] == doctest::Approx(c[t]).epsilon(1e-12));
      CHECK(og2.to(Device::cpu()).to_vector() == g);
    }
  }
}

TEST_CASE("clip_grad_norm_ on the GPU matches the CPU") {
  Tensor a = randn64({300}, 60, false).to(DType::Float32), b = randn64({7, 9}, 61, false).to(DType::Float32);
  std::vector<Tensor> cpu = {leaf(a, Device::cpu()), leaf(b, Device::cpu())}, gpu = {leaf(a, kGpu), leaf(b, kGpu)};
  for (auto* ps : {&cpu, &gpu})
    for (Tensor& p : *ps) sum(p * p * 3.0).backward();
  const double nc = nn::clip_grad_norm_(cpu, 1.5), ng = nn::clip_grad_norm_(gpu, 1.5);
  CHECK(ng == doctest::Approx(nc).epsilon(1e-12));
  for (size_t i = 0; i < 2; ++i) CHECK(allclose(gpu[i].grad().to(Device::cpu()), cpu[i].grad(), 1e-7, 1e-6));
}

TEST_CASE("scale_all on the GPU is bit-identical to the CPU, the empty tensor skipped") {
  std::vector<Tensor> cpu, gpu;
  for (DType dtype : {DType::Float32, DType::Float64})
    for (int64_t n : {40000, 0, 5}) {
      cpu.push_back(randn64({n}, 70 + n, false).to(dtype));
      gpu.push_back(cpu.back().to(kGpu));
    }
  backend(Device::cpu()).scale_all(cpu, 0.3);
  backend(kGpu).scale_all(gpu, 0.3);
  for (size_t t = 0; t < cpu.size(); ++t) CHECK(gpu[t].to(Device::cpu()).to_vector() == cpu[t].to_vector());
  CHECK_THROWS_WITH_AS(backend(kGpu).scale_all({zeros({3}, {DType::Float32, kGpu}), zeros({3})}, 0.3),
                       doctest::Contains("[scale_all] tensor 1 must be contiguous and floating, on this backend's"),
                       Error);
}

TEST_CASE("random_uniform and Dropout masks are bit-identical on the GPU and the CPU") {
  for (DType dtype : {DType::Float32, DType::Float64}) {
    CAPTURE(dtype);
    for (uint64_t offset : {uint64_t{0}, uint64_t{12345}, uint64_t{1} << 40}) {
      Tensor uc = empty({100003}, dtype), ug = empty({100003}, dtype, kGpu);
      backend(Device::cpu()).random_uniform(uc, 77, offset);
      backend(kGpu).random_uniform(ug, 77, offset);
      CHECK(ug.to(Device::cpu()).to_vector() == uc.to_vector());
    }
  }
  nn::Dropout dc(0.3, 2024), dg(0.3, 2024);
  Tensor x = randn64({8, 33, 17}, 70, false).to(DType::Float32);
  for (int call = 0; call < 3; ++call) {  // the offsets advance alike too
    CAPTURE(call);
    CHECK(dg.forward(x.to(kGpu)).to(Device::cpu()).to_vector() == dc.forward(x).to_vector());
  }
  CHECK(dg.offset() == dc.offset());
}

TEST_CASE("cumsum on the GPU equals the CPU bit for bit; causal linear attention matches") {
  struct Geometry { int64_t outer, n, inner; };
  for (Geometry g : {Geometry{3, 7, 5}, Geometry{1, 40, 4160}, Geometry{1000, 5, 1}}) {
    for (DType dtype : {DType::Float32, DType::Float64, DType::Int64}) {
      Tensor x = (randn64({g.outer, g.n, g.inner}, 80, false) * 10).to(dtype);
      for (bool exclusive : {false, true})
        for (bool reverse : {false, true}) {
          CAPTURE(g.inner);
          CAPTURE(dtype);
          CAPTURE(exclusive);
          CAPTURE(reverse);
          Tensor oc = empty(x.shape(), dtype), og = empty(x.shape(), dtype, kGpu);
          backend(Device::cpu()).cumsum(x, oc, g.outer, g.n, g.inner, exclusive, reverse);
          backend(kGpu).cumsum(x.to(kGpu), og, g.outer, g.n, g.inner, exclusive, reverse);
          CHECK(og.to(Device::cpu()).to_vector() == oc.to_vector());
        }
    }
  }
  // Causal linear attention over 3 chunks of 64 tokens (its running sums of chunk summaries).
  Tensor q = randn64({2, 2, 150, 8}, 81, false), k = randn64({2, 2, 150, 8}, 82, false),
         v = randn64({2, 2, 150, 8}, 83, false);
  nn::functional::LinearAttentionOptions o;
  o.causal = true;
  std::vector<Tensor> c = {leaf(q, Device::cpu()), leaf(k, Device::cpu()), leaf(v, Device::cpu())},
                      gp = {leaf(q, kGpu), leaf(k, kGpu), leaf(v, kGpu)};
  Tensor yc = nn::functional::linear_attention(c[0], c[1], c[2], o);
  Tensor yg = nn::functional::linear_attention(gp[0], gp[1], gp[2], o);
  CHECK(allclose(yg.to(Device::cpu()), yc, 1e-10, 1e-10));
  sum(yc * yc).backward();
  sum(yg * yg).backward();
  for (size_t i = 0; i < 3; ++i) CHECK(allclose(gp[i].grad().to(Device::cpu()), c[i].grad(), 1e-10, 1e-10));
}
