// The fused kernels for nn/ on the CPU backend (backend.h, "fused kernels for nn/"): the counter
// RNG against a plain splitmix64, Dropout's (seed, offset) stream, cumsum against a plain loop,
// the multi-tensor optimizer steps against per-parameter steps and the pre-fusion loop, and
// clip_grad_norm_'s sum_squares and scale_all.
// tests/test_gpu_fused.cpp compares the CUDA versions with these.
#include <cmath>
#include <type_traits>
#include <vector>

#include "helpers.h"

using namespace linea;
using linea::testing::randn64;

namespace {

Backend& cpu_backend() { return backend(Device::cpu()); }

Tensor uniform(Shape shape, DType dtype, uint64_t seed, uint64_t offset) {
  Tensor u = empty(std::move(shape), dtype);
  cpu_backend().random_uniform(u, seed, offset);
  return u;
}

// splitmix64 written the usual stateful way: state += gamma, then mix.
struct SplitMix64 {
  uint64_t state;
  uint64_t next() {
    uint64_t z = (state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
};

}  // namespace

// ---------------------------------------------------------------------------------------------
// random_uniform and Dropout

TEST_CASE("random_uniform is splitmix64 keyed by the seed: reproducible, shifted by offset") {
  const uint64_t seed = 1234;
  // Number c of the stream is output c+1 of splitmix64 started from the state mix(seed).
  SplitMix64 keygen{seed - 0x9E3779B97F4A7C15ull};  // one step of this gives mix(seed)
  SplitMix64 ref{keygen.next()};
  std::vector<double> u = uniform({1000}, DType::Float64, seed, 0).to_vector();
  std::vector<float> f(1000);
  Tensor u32 = uniform({1000}, DType::Float32, seed, 0);
  for (int64_t i = 0; i < 1000; ++i) {
    const uint64_t b = ref.next();
    REQUIRE(u[i] == static_cast<double>(b >> 11) * 0x1p-53);
    REQUIRE(u32.data<float>()[i] == static_cast<float>(b >> 40) * 0x1p-24f);
  }
  CHECK(uniform({1000}, DType::Float64, seed, 0).to_vector() == u);  // same seed and offset: same numbers
  std::vector<double> shifted = uniform({990}, DType::Float64, seed, 10).to_vector();
  CHECK(shifted == std::vector<double>(u.begin() + 10, u.end()));    // offset shifts the stream
  CHECK(uniform({1000}, DType::Float64, seed + 1, 0).to_vector() != u);

  // Statistics of 1e6 numbers: mean 1/2, variance 1/12, all in [0, 1).
  std::vector<double> big = uniform({1000000}, DType::Float64, 7, 0).to_vector();
  double s = 0, s2 = 0, lo = 1, hi = 0;
  for (double v : big) s += v, s2 += v * v, lo = std::min(lo, v), hi = std::max(hi, v);
  const double mean = s / 1e6, var = s2 / 1e6 - mean * mean;
  CHECK(mean == doctest::Approx(0.5).epsilon(0.005));
  CHECK(var == doctest::Approx(1.0 / 12).epsilon(0.01));
  CHECK(lo >= 0);
  CHECK(hi < 1);

  CHECK_THROWS_WITH_AS(cpu_backend().random_uniform(empty({3}, DType::Int64), 1, 0),
                       doctest::Contains("[random_uniform] out must be a contiguous float32/float64"), Error);
}

TEST_CASE("Dropout reads its stream at (seed, offset) and advances offset by the input size") {
  nn::Dropout drop(0.25, 99);
  CHECK(drop.seed() == 99);
  CHECK(drop.offset() == 0);
  Tensor x = ones({4, 50});
  std::vector<double> y1 = drop.forward(x).to_vector();
  CHECK(drop.offset() == 200);
  std::vector<double> y2 = drop.forward(x).to_vector();
  CHECK(drop.offset() == 400);
  CHECK(y1 != y2);
  // The masks are (u >= p) of numbers 0..199 and 200..399 of the stream of seed 99.
  std::vector<double> u = uniform({400}, DType::Float32, 99, 0).to_vector();
  for (size_t i = 0; i < 200; ++i) {
    REQUIRE(y1[i] == (u[i] >= 0.25 ? 1 / 0.75f : 0.0f));
    REQUIRE(y2[i] == (u[200 + i] >= 0.25 ? 1 / 0.75f : 0.0f));
  }
  // (seed, offset) is the whole state: restoring it replays the second mask.
  nn::Dropout resumed(0.25, 5);
  resumed.set_rng_state(99, 200);
  CHECK(resumed.forward(x).to_vector() == y2);
  drop.manual_seed(99);  // back to the start of the stream
  CHECK(drop.forward(x).to_vector() == y1);
  drop.eval();
  CHECK(drop.forward(x).same(x));
  CHECK(drop.offset() == 200);  // eval draws nothing
}

// ---------------------------------------------------------------------------------------------
// cumsum

TEST_CASE("cumsum matches a plain loop: inclusive/exclusive, forward/reverse, three dtypes") {
  struct Geometry { int64_t outer, n, inner; };
  for (Geometry g : {Geometry{3, 7, 5}, Geometry{1, 4, 2500}, Geometry{2, 1, 1}, Geometry{4, 9, 1},
                     Geometry{0, 3, 2}, Geometry{2, 0, 3}}) {
    for (DType dtype : {DType::Float32, DType::Float64, DType::Int64}) {
      Tensor x = (randn64({g.outer, g.n, g.inner}, 21, false) * 10).to(dtype);
      std::vector<double> xv = x.to_vector();
      for (bool exclusive : {false, true})
        for (bool reverse : {false, true}) {
          CAPTURE(g.outer);
          CAPTURE(g.n);
          CAPTURE(g.inner);
          CAPTURE(dtype);
          CAPTURE(exclusive);
          CAPTURE(reverse);
          Tensor out = empty(x.shape(), dtype);
          cpu_backend().cumsum(x, out, g.outer, g.n, g.inner, exclusive, reverse);
          // The reference sums in the dtype too (float32 rounding after every add).
          std::vector<double> ref(xv.size());
          for (int64_t o = 0; o < g.outer; ++o)
            for (int64_t e = 0; e < g.inner; ++e) {
              double r = 0;
              for (int64_t s = 0; s < g.n; ++s) {
                const int64_t i = reverse ? g.n - 1 - s : s, at = (o * g.n + i) * g.inner + e;
                if (exclusive) ref[at] = r;
                r = dtype == DType::Float32 ? static_cast<float>(r + static_cast<float>(xv[at])) : r + xv[at];
                if (!exclusive) ref[at] = r;
              }
            }
          CHECK(out.to_vector() == ref);
        }
    }
  }
  Tensor x = zeros({2, 3});
  CHECK_THROWS_WITH_AS(cpu_backend().cumsum(x, empty({2, 3}), 2, 2, 1, true, false),
                       doctest::Contains("[cumsum] x and out must be contiguous"), Error);
  CHECK_THROWS_WITH_AS(cpu_backend().cumsum(x.to(DType::Bool), empty({2, 3}, DType::Bool), 2, 3, 1, true, false),
                       doctest::Contains("[cumsum] supports float32, float64 and int64"), Error);
}

// ---------------------------------------------------------------------------------------------
// optimizer steps

namespace {

// Parameters of several sizes (one beyond the CPU kernels' parallel threshold) with gradients.
std::vector<Tensor> make_params(DType dtype) {
  std::vector<Tensor> ps;
  int seed = 30;
  for (int64_t n : {1, 7, 300, 70000}) {
    Tensor p = (randn64({n}, seed++, false)).to(dtype).requires_grad_();
    ps.push_back(p);
  }
  return ps;
}

void set_grads(std::vector<Tensor> ps, int step) {  // handles: the copies share the leaves
  for (size_t i = 0; i < ps.size(); ++i) {
    ps[i].zero_grad();
    // grad = c * p with a fixed c per step: gradients change with the weights.
    sum(ps[i] * ps[i] * (0.5 + 0.25 * step + static_cast<double>(i))).backward();
  }
}

// The AdamW loop as nn/optim.cpp ran it per parameter before the fused backend call.
template <class T>
void adamw_reference(std::vector<T>& p, const std::vector<T>& g, std::vector<T>& m, std::vector<T>& v, double lr,
                     double wd, double b1, double b2, double eps, int64_t step) {
  const double t = static_cast<double>(step);
  const double bc1 = 1 - std::pow(b1, t), bc2 = 1 - std::pow(b2, t);
  const T decay = T(1 - lr * wd), beta1 = T(b1), beta2 = T(b2), step_size = T(lr / bc1), sqrt_bc2 = T(std::sqrt(bc2)),
          e = T(eps);
  for (size_t i = 0; i < p.size(); ++i) {
    p[i] *= decay;
    m[i] = beta1 * m[i] + (1 - beta1) * g[i];
    v[i] = beta2 * v[i] + (1 - beta2) * g[i] * g[i];
    p[i] -= step_size * m[i] / (std::sqrt(v[i]) / sqrt_bc2 + e);
  }
}

template <class T>
std::vector<T> values(const Tensor& t) {
  const T* d = t.data<T>();
  return std::vector<T>(d, d + t.numel());
}

}  // namespace

TEST_CASE("multi-tensor AdamW equals per-parameter AdamW bit for bit, and the pre-fusion loop") {
  for (DType dtype : {DType::Float32, DType::Float64}) {
    CAPTURE(dtype);
    std::vector<Tensor> all = make_params(dtype), single = make_params(dtype);
    // Two groups with their own lr / weight decay in the fused optimizer; one optimizer per
    // parameter (same hyperparameters) on the other side.
    nn::AdamWOptions o{.lr = 0.01, .beta1 = 0.8, .beta2 = 0.95, .eps = 1e-6, .weight_decay = 0.1};
    nn::AdamW fused({nn::ParamGroup{{{"a", all[0]}, {"b", all[1]}}, 0.02, 0.0},
                     nn::ParamGroup{{{"c", all[2]}, {"d", all[3]}}, std::nullopt, std::nullopt}},
                    o);
    std::vector<std::unique_ptr<nn::AdamW>> per;
    for (size_t i = 0; i < single.size(); ++i) {
      nn::AdamWOptions oi = o;
      if (i < 2) oi.lr = 0.02, oi.weight_decay = 0;
      per.push_back(std::make_unique<nn::AdamW>(nn::NamedParams{{"p", single[i]}}, oi));
    }
    // The reference loop for parameter "d" (group 2), in the parameter's dtype.
    dispatch_floating(dtype, "test", [&]<class T>() {
      std::vector<T> p = values<T>(all[3].detach()), m(p.size(), T(0)), v(p.size(), T(0));
      for (int step = 1; step <= 3; ++step) {
        set_grads(all, step);
        set_grads(single, step);
        adamw_reference<T>(p, values<T>(all[3].grad()), m, v, 0.01, 0.1, 0.8, 0.95, 1e-6, step);
        fused.step();
        for (auto& opt : per) opt->step();
      }
      // The same formula as the kernel, compiled here for the baseline, not the kernel's ISA (so
      // possibly without FMAs): equal within rounding.
      const std::vector<T> got = values<T>(all[3].detach());
      const double rel = std::is_same_v<T, float> ? 1e-5 : 1e-13;
      for (size_t i = 0; i < p.size(); ++i) REQUIRE(std::abs(got[i] - p[i]) <= rel * (std::abs(p[i]) + 1e-3));
      for (size_t i = 0; i < all.size(); ++i) CHECK(values<T>(all[i].detach()) == values<T>(single[i].detach()));
    });
  }
}

TEST_CASE("multi-tensor SGD equals per-parameter SGD, bit for bit") {
  for (bool nesterov : {false, true}) {
    std::vector<Tensor> all = make_params(DType::Float32), single = make_params(DType::Float32);
    nn::SGDOptions o{.lr = 0.05, .momentum = 0.9, .nesterov = nesterov, .weight_decay = 0.01};
    nn::NamedParams named;
    for (size_t i = 0; i < all.size(); ++i) named.emplace_back(std::to_string(i), all[i]);
    nn::SGD fused(named, o);
    std::vector<std::unique_ptr<nn::SGD>> per;
    for (const Tensor& p : single) per.push_back(std::make_unique<nn::SGD>(nn::NamedParams{{"p", p}}, o));
    for (int step = 1; step <= 3; ++step) {
      set_grads(all, step);
      set_grads(single, step);
      fused.step();
      for (auto& opt : per) opt->step();
    }
    for (size_t i = 0; i < all.size(); ++i)
      CHECK(values<float>(all[i].detach()) == values<float>(single[i].detach()));
  }
}

TEST_CASE("sum_squares: Σ x² in double per tensor, 0 for an empty one, the same alone or with others") {
  auto ref = [](const Tensor& x) {
    double s = 0;
    for (double v : x.to_vector()) s += v * v;
    return s;
  };
  // Tensors of both dtypes and sizes on both sides of the parallel threshold, one of them empty.
  std::vector<Tensor> xs;
  for (DType dtype : {DType::Float32, DType::Float64})
    for (int64_t n : {100001, 0, 7, 70000}) xs.push_back(randn64({n}, 90 + n, false).to(dtype));
  Tensor out = empty({int64_t(xs.size())}, DType::Float64);
  cpu_backend().sum_squares(xs, out);
  const std::vector<double> sums = out.to_vector();
  for (size_t t = 0; t < xs.size(); ++t) {
    CAPTURE(t);
    CHECK(sums[t] == doctest::Approx(ref(xs[t])).epsilon(1e-13));
    Tensor alone = empty({1}, DType::Float64);
    cpu_backend().sum_squares({xs[t]}, alone);
    CHECK(alone.to_vector()[0] == sums[t]);  // the same bits whichever thread summed it
  }
  CHECK(sums[1] == 0.0);
  cpu_backend().sum_squares({}, empty({0}, DType::Float64));  // nothing to sum
  CHECK_THROWS_WITH_AS(cpu_backend().sum_squares({zeros({3})}, empty({}, DType::Float64)),
                       doctest::Contains("[sum_squares] needs a contiguous float64 out [1]"), Error);
  CHECK_THROWS_WITH_AS(cpu_backend().sum_squares({zeros({3}), zeros({2, 3}).t()}, empty({2}, DType::Float64)),
                       doctest::Contains("[sum_squares] tensor 1 must be contiguous"), Error);
  CHECK_THROWS_WITH_AS(cpu_backend().sum_squares({zeros({3}, DType::Int64)}, empty({1}, DType::Float64)),
                       doctest::Contains("[sum_squares] tensor 0 must be contiguous and floating"), Error);
}

TEST_CASE("scale_all: x times the factor cast to x's dtype, the bits of a scalar Mul, alone or with others") {
  const double factor = 0.3;  // not a float32: the cast to each dtype shows
  auto expected = [&](const Tensor& x) {
    Tensor out = empty(x.shape(), x.dtype());
    cpu_backend().binary(BinaryOp::Mul, x, scalar(factor, x.dtype()).expand(x.shape()), out);
    return out.to_vector();
  };
  // Both dtypes, sizes on both sides of the parallel threshold, one empty: the threads' shares
  // then start and end inside tensors.
  std::vector<Tensor> xs, alone;
  for (DType dtype : {DType::Float32, DType::Float64})
    for (int64_t n : {100001, 0, 7, 70000}) xs.push_back(randn64({n}, 40 + n, false).to(dtype));
  std::vector<std::vector<double>> want;
  for (const Tensor& x : xs) {
    want.push_back(expected(x));
    alone.push_back(x.clone());
  }
  cpu_backend().scale_all(xs, factor);
  for (size_t t = 0; t < xs.size(); ++t) {
    CAPTURE(t);
    CHECK(xs[t].to_vector() == want[t]);
    cpu_backend().scale_all({alone[t]}, factor);
    CHECK(alone[t].to_vector() == want[t]);
  }
  cpu_backend().scale_all({}, factor);  // nothing to scale
  CHECK_THROWS_WITH_AS(cpu_backend().scale_all({zeros({3}), zeros({2, 3}).t()}, factor),
                       doctest::Contains("[scale_all] tensor 1 must be contiguous and floating"), Error);
  CHECK_THROWS_WITH_AS(cpu_backend().scale_all({zeros({3}, DType::Int64)}, factor),
                       doctest::Contains("[scale_all] tensor 0 must be contiguous and floating"), Error);
}

TEST_CASE("optimizer kernels reject mismatched state") {
  Tensor p = zeros({3}), g = zeros({3}), m = zeros({3}), v = zeros({4});
  CHECK_THROWS_WITH_AS(cpu_backend().adamw_step({{p, g, m, v, 1, 1, 1}}, 0.9, 0.999, 1e-8),
                       doctest::Contains("[adamw_step] exp_avg_sq must be a contiguous float32 (3,)"), Error);
  CHECK_THROWS_WITH_AS(cpu_backend().sgd_step({{p.to(DType::Int64), g, Tensor(), 0.1, 0, true}}, 0, false),
                       doctest::Contains("[sgd_step] parameters must be contiguous float32/float64"), Error);
}
