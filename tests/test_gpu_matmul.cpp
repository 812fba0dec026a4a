// The CUDA gemm (cuBLAS) and indexing kernels against the CPU: odd sizes, transposed and strided
// views, broadcast batches, the float32 precision switch (Highest / TF32 / BF16 within their
// documented errors), repeated indices, and the out-of-range index error. Runs only where a GPU
// is present (tests/gpu_main.cpp skips otherwise).
#include <cmath>

#include "helpers.h"

using namespace linea;

namespace {

const Device kGpu = Device::cuda();

Tensor randn_on(Shape shape, uint64_t seed, DType dtype) {
  Generator g(seed);
  return randn(std::move(shape), g, dtype);
}

// ‖out − ref‖ / ‖ref‖ (Frobenius), out copied to the host; ref is the CPU's result.
double rel_error(const Tensor& out, const Tensor& ref) {
  REQUIRE(out.shape() == ref.shape());
  const std::vector<double> o = out.to(Device::cpu()).to_vector(), r = ref.to_vector();
  double num = 0, den = 0;
  for (size_t i = 0; i < r.size(); ++i) {
    num += (o[i] - r[i]) * (o[i] - r[i]);
    den += r[i] * r[i];
  }
  return den == 0 ? std::sqrt(num) : std::sqrt(num / den);
}

// Full-precision tolerances: float32 sums in another order than OpenBLAS, float64 agrees closely.
double tol(DType t) { return t == DType::Float64 ? 1e-12 : 1e-5; }

// matmul(va(a), vb(b)) on both devices from the same numbers; returns the relative error.
double gemm_error(Shape sa, Shape sb, DType dtype, const std::function<Tensor(const Tensor&)>& va,
                  const std::function<Tensor(const Tensor&)>& vb) {
  const Tensor a = randn_on(sa, 1, dtype), b = randn_on(sb, 2, dtype);
  const Tensor ref = matmul(va(a), vb(b));
  const Tensor out = matmul(va(a.to(kGpu)), vb(b.to(kGpu)));
  CHECK(out.device().is_cuda());
  CHECK(out.dtype() == dtype);
  return rel_error(out, ref);
}

const auto same = [](const Tensor& t) { return t; };
const auto t_last = [](const Tensor& t) { return t.transpose(-1, -2); };

}  // namespace

TEST_CASE("gpu gemm: odd sizes, float32 and float64, every transpose combination") {
  for (DType dtype : {DType::Float32, DType::Float64})
    for (int64_t M : {1, 7, 129})
      for (int64_t K : {1, 7, 129})
        for (int64_t N : {1, 7, 129}) {
          CAPTURE(dtype);
          CAPTURE(M);
          CAPTURE(K);
          CAPTURE(N);
          CHECK(gemm_error({M, K}, {K, N}, dtype, same, same) < tol(dtype));
          CHECK(gemm_error({K, M}, {K, N}, dtype, t_last, same) < tol(dtype));
          CHECK(gemm_error({M, K}, {N, K}, dtype, same, t_last) < tol(dtype));
          CHECK(gemm_error({3, K, M}, {3, N, K}, dtype, t_last, t_last) < tol(dtype));
        }
}

TEST_CASE("gpu gemm: batches, broadcast batches and strided views") {
  for (DType dtype : {DType::Float32, DType::Float64}) {
    CAPTURE(dtype);
    // A linear layer: [B, T, C] @ [C, N] (the weight broadcast; one folded product on cuBLAS).
    CHECK(gemm_error({4, 33, 65}, {65, 17}, dtype, same, same) < tol(dtype));
    CHECK(gemm_error({4, 33, 65}, {17, 65}, dtype, same, t_last) < tol(dtype));
    // Transposed activations with a shared weight: no folding, a batch of transposed a's.
    CHECK(gemm_error({4, 65, 33}, {65, 17}, dtype, t_last, same) < tol(dtype));
    // The left operand broadcast instead.
    CHECK(gemm_error({33, 65}, {5, 65, 17}, dtype, same, same) < tol(dtype));
    // Broadcast over two batch dims of different operands ([2, 1] against [1, 3]).
    CHECK(gemm_error({2, 1, 7, 9}, {1, 3, 9, 5}, dtype, same, same) < tol(dtype));
    // Batched with transposes on both sides, batch 6.
    CHECK(gemm_error({6, 129, 7}, {6, 1, 129}, dtype, t_last, t_last) < tol(dtype));
    // Rows with a gap (a narrowed view: leading dimension > cols).
    CHECK(gemm_error({7, 40}, {20, 9}, dtype, [](const Tensor& t) { return t.narrow(1, 3, 20); }, same) < tol(dtype));
    // Neither row- nor column-major (step-2 slices in both dims): copied first, like the CPU.
    CHECK(gemm_error({14, 40}, {20, 9}, dtype, [](const Tensor& t) { return t.slice(0, 0, 14, 2).slice(1, 0, 40, 2); },
                     same) < tol(dtype));
    // Vector operands (1-d promotion gives M = 1 / N = 1 with odd strides).
    CHECK(gemm_error({129}, {129, 7}, dtype, same, same) < tol(dtype));
    CHECK(gemm_error({7, 129}, {129}, dtype, same, same) < tol(dtype));
  }
}

TEST_CASE("gpu gemm: empty dims and K = 0") {
  const Tensor a = zeros({3, 0}, Options(DType::Float32, kGpu)), b = zeros({0, 4}, Options(DType::Float32, kGpu));
  const Tensor out = matmul(a, b);
  REQUIRE(out.shape() == Shape{3, 4});
  CHECK(out.to(Device::cpu()).to_vector() == std::vector<double>(12, 0.0));
  CHECK(matmul(zeros({0, 5}, Options(DType::Float64, kGpu)), zeros({5, 2}, Options(DType::Float64, kGpu))).numel() == 0);
}

TEST_CASE("gpu gemm with a residual and linear_add match the CPU") {
  // out = a·b + residual (+ bias), the residual out itself or another tensor, K = 0 included; then
  // linear_add and its gradients.
  for (int64_t K : {0, 7, 300})
    for (bool with_bias : {false, true}) {
      CAPTURE(K);
      CAPTURE(with_bias);
      const DType f64 = DType::Float64;
      const Tensor a = randn_on({2, 5, K}, 70, f64), b = randn_on({2, K, 9}, 71, f64);
      const Tensor start = randn_on({2, 5, 9}, 72, f64), bias = with_bias ? randn_on({9}, 73, f64) : Tensor();
      const Tensor oc = start.clone(), og = start.to(kGpu), rg = start.to(kGpu), sg = empty_like(rg);
      backend(Device::cpu()).gemm(a, b, oc, bias, oc);
      backend(kGpu).gemm(a.to(kGpu), b.to(kGpu), og, with_bias ? bias.to(kGpu) : Tensor(), og);
      backend(kGpu).gemm(a.to(kGpu), b.to(kGpu), sg, with_bias ? bias.to(kGpu) : Tensor(), rg);
      CHECK(rel_error(og, oc) < 1e-12);
      CHECK(rel_error(sg, oc) < 1e-12);
      CHECK(rel_error(rg, start) == 0);  // a separate residual is read, never written
    }
  const DType f64 = DType::Float64;
  const Tensor x = randn_on({3, 4, 6}, 74, f64).requires_grad_(), w = randn_on({5, 6}, 75, f64).requires_grad_();
  const Tensor bias = randn_on({5}, 76, f64).requires_grad_(), r = randn_on({3, 4, 5}, 77, f64).requires_grad_();
  const Tensor xg = x.detach().to(kGpu).requires_grad_(), wg = w.detach().to(kGpu).requires_grad_();
  const Tensor bg = bias.detach().to(kGpu).requires_grad_(), rg = r.detach().to(kGpu).requires_grad_();
  const Tensor yc = linear_add(x, w, bias, r), yg = linear_add(xg, wg, bg, rg);
  CHECK(rel_error(yg, yc) < 1e-12);
  sum(yc * yc).backward();
  sum(yg * yg).backward();
  for (const auto& [c, g] : {std::pair{x, xg}, std::pair{w, wg}, std::pair{bias, bg}, std::pair{r, rg}})
    CHECK(rel_error(g.grad(), c.grad()) < 1e-12);
  CHECK_THROWS_WITH_AS(linear_add(xg, wg, bg, r), doctest::Contains("[linear_add] residual must be"), Error);
}

TEST_CASE("gpu gemm: the float32 precision switch (TF32, BF16 autocast) within documented errors") {
  const Tensor a = randn_on({4, 129, 257}, 3, DType::Float32), b = randn_on({257, 131}, 4, DType::Float32);
  const Tensor ref = matmul(a, b);  // the CPU always multiplies in full float32
  const Tensor ga = a.to(kGpu), gb = b.to(kGpu);
  const Tensor gat = a.transpose(1, 2).contiguous().to(kGpu);  // the same a, stored transposed

  const double highest = rel_error(matmul(ga, gb), ref);
  double tf32 = 0, bf16 = 0, bf16_t = 0;
  {
    AutocastGuard guard(MatmulPrecision::TF32);
    tf32 = rel_error(matmul(ga, gb), ref);
  }
  {
    AutocastGuard guard;  // bf16 by default
    CHECK(matmul_precision() == MatmulPrecision::BF16);
    bf16 = rel_error(matmul(ga, gb), ref);
    bf16_t = rel_error(matmul(gat.transpose(1, 2), gb), ref);
    // float64 products are never rounded, autocast or not.
    const Tensor a64 = a.to(DType::Float64), b64 = b.to(DType::Float64);
    CHECK(rel_error(matmul(a64.to(kGpu), b64.to(kGpu)), matmul(a64, b64)) < 1e-12);
  }
  CHECK(matmul_precision() == MatmulPrecision::Highest);  // the guard restored it
  MESSAGE("gemm relative error vs CPU float32: highest " << highest << ", tf32 " << tf32 << ", bf16 " << bf16);
  CHECK(highest < 1e-5);
  CHECK(tf32 < 1e-3);
  CHECK(bf16 < 1e-2);
  CHECK(bf16_t < 1e-2);
  // cuBLAS may legally keep full precision under a "fast" compute type; say so if it did.
  WARN_MESSAGE(bf16 > 1e-5, "BF16 autocast gave full float32 accuracy: cuBLAS did not round the operands");
  WARN_MESSAGE(tf32 > 1e-6, "TF32 gave full float32 accuracy: cuBLAS did not round the operands");
}

TEST_CASE("gpu gemm: gradients match the CPU (float64)") {
  const Tensor a = randn_on({3, 7, 9}, 5, DType::Float64), b = randn_on({9, 4}, 6, DType::Float64);
  const Tensor ga = a.to(kGpu).requires_grad_(), gb = b.to(kGpu).requires_grad_();
  const Tensor ca = a.detach().requires_grad_(), cb = b.detach().requires_grad_();
  sum(matmul(ga.transpose(1, 2).transpose(1, 2), gb) * 0.5).backward();
  sum(matmul(ca, cb) * 0.5).backward();
  CHECK(rel_error(ga.grad(), ca.grad()) < 1e-12);
  CHECK(rel_error(gb.grad(), cb.grad()) < 1e-12);
}

TEST_CASE("gpu gemm errors name the op") {
  Backend& be = backend(kGpu);
  const Tensor i = zeros({1, 2, 2}, Options(DType::Int64, kGpu));
  CHECK_THROWS_WITH_AS(be.gemm(i, i, zeros({1, 2, 2}, Options(DType::Int64, kGpu)), Tensor(), Tensor()),
                       doctest::Contains("[gemm] expected a floating dtype"), Error);
  const Tensor f = zeros({1, 2, 3}, Options(DType::Float32, kGpu));
  CHECK_THROWS_WITH_AS(be.gemm(f, f, zeros({1, 2, 3}, Options(DType::Float32, kGpu)), Tensor(), Tensor()),
                       doctest::Contains("[gemm] shapes"), Error);
  // linear_weight_grad (the default: gemm, then reduce) refuses operands on two devices.
  const Tensor g = zeros({4, 3}, Options(DType::Float32, kGpu)), x_cpu = zeros({4, 2});
  CHECK_THROWS_WITH_AS(be.linear_weight_grad(g, x_cpu, zeros({3, 2}, Options(DType::Float32, kGpu)), Tensor()),
                       doctest::Contains("[linear_weight_grad] operands on different devices"), Error);
}

TEST_CASE("gpu linear_weight_grad: dw and db match the CPU") {
  Generator gen(9);
  const Tensor g = randn({70, 5}, gen), x = randn({70, 3}, gen);
  const Tensor dw = zeros({5, 3}, Options(DType::Float32, kGpu)), db = zeros({5}, Options(DType::Float32, kGpu));
  backend(kGpu).linear_weight_grad(g.to(kGpu), x.to(kGpu), dw, db);
  CHECK(testing::allclose(dw.to(Device::cpu()), matmul(g.t(), x), 1e-5, 1e-5));
  CHECK(testing::allclose(db.to(Device::cpu()), sum(g, {0}), 1e-5, 1e-5));
}

// ---- indexing ----

namespace {

// An index tensor with these values on `device`.
Tensor idx_on(std::vector<int64_t> v, Shape shape, Device device = kGpu) { return from_vector(v, shape, device); }

// Copies (index_select, gather, embedding values) must match the CPU exactly.
void check_equal(const Tensor& gpu, const Tensor& cpu) {
  REQUIRE(gpu.device().is_cuda());
  CHECK(gpu.dtype() == cpu.dtype());
  CHECK(gpu.to(Device::cpu()).to_vector() == cpu.to_vector());
}

// Sums (index_add, scatter_add) add in another order than the CPU (atomics): float32 within
// rounding of the whole tensor, float64 closely, int64 exactly.
void check_sums(const Tensor& gpu, const Tensor& cpu) {
  REQUIRE(gpu.device().is_cuda());
  CHECK(gpu.dtype() == cpu.dtype());
  if (cpu.dtype() == DType::Int64)
    CHECK(gpu.to(Device::cpu()).to_vector() == cpu.to_vector());
  else
    CHECK(rel_error(gpu, cpu) < (cpu.dtype() == DType::Float32 ? 2e-5 : 1e-12));
}

}  // namespace

TEST_CASE("gpu index_select matches the CPU: strided inputs and indices, repeats, every value dtype") {
  for (DType dtype : {DType::Float32, DType::Float64, DType::Int64}) {
    CAPTURE(dtype);
    const Tensor x = (randn_on({7, 5}, 7, DType::Float64) * 100.0).to(dtype), gx = x.to(kGpu);
    const std::vector<int64_t> iv = {6, 0, 6, 2, 2, 4};
    const Tensor ci = idx_on(iv, {6}, Device::cpu()), gi = idx_on(iv, {6});
    check_equal(index_select(gx, 0, gi), index_select(x, 0, ci));
    check_equal(index_select(gx.t(), 1, gi), index_select(x.t(), 1, ci));  // strided x
    const Tensor cs = ci.slice(0, 3, 6), gs = gi.slice(0, 3, 6);            // {2, 2, 4}
    check_equal(index_select(gx, 1, gs), index_select(x, 1, cs));
    check_equal(index_select(gx, 1, gi.slice(0, 1, 6, 2)), index_select(x, 1, ci.slice(0, 1, 6, 2)));  // strided idx
    check_equal(index_select(gx, 0, gi.select(0, 3)), index_select(x, 0, ci.select(0, 3)));          // 0-d idx
    check_equal(index_select(gx, 0, idx_on({}, {0})), index_select(x, 0, idx_on({}, {0}, Device::cpu())));
  }
  // Embedding-sized: many rows of a wide table.
  Generator g(8);
  const Tensor table = randn({1000, 256}, g, DType::Float32), idx = randint(0, 1000, {4096}, g);
  check_equal(index_select(table.to(kGpu), 0, idx.to(kGpu)), index_select(table, 0, idx));
}

TEST_CASE("gpu gather matches the CPU: both dims, index smaller than x, strided x") {
  for (DType dtype : {DType::Float32, DType::Float64, DType::Int64}) {
    CAPTURE(dtype);
    const Tensor x = (randn_on({4, 6}, 9, DType::Float64) * 100.0).to(dtype), gx = x.to(kGpu);
    const std::vector<int64_t> iv = {3, 0, 1, 0, 0, 2, 3, 3, 1, 2, 2, 0};
    const Tensor ci = idx_on(iv, {3, 4}, Device::cpu()), gi = ci.to(kGpu);
    check_equal(gather(gx, 0, gi), gather(x, 0, ci));
    check_equal(gather(gx, 1, gi), gather(x, 1, ci));
    check_equal(gather(gx.t(), 1, gi.t()), gather(x.t(), 1, ci.t()));  // strided x and index
  }
}

TEST_CASE("gpu index_add and scatter_add accumulate many repeated indices like the CPU") {
  const int64_t vocab = 300, d = 200, n = 4096;
  Generator g(10);
  const Tensor idx = randint(0, vocab, {n}, g), gidx = idx.to(kGpu);
  for (DType dtype : {DType::Float32, DType::Float64, DType::Int64}) {
    CAPTURE(dtype);
    const Tensor src = (randn({n, d}, g, DType::Float64) * 10.0).to(dtype), gsrc = src.to(kGpu);

    Tensor out = zeros({vocab, d}, dtype), gout = zeros({vocab, d}, Options(dtype, kGpu));
    backend(Device::cpu()).index_add(out, 0, idx, src);
    backend(kGpu).index_add(gout, 0, gidx, gsrc);
    check_sums(gout, out);

    Tensor out1 = zeros({d, vocab}, dtype), gout1 = zeros({d, vocab}, Options(dtype, kGpu));
    backend(Device::cpu()).index_add(out1, 1, idx, src.t());  // along dim 1 from a transposed source
    backend(kGpu).index_add(gout1, 1, gidx, gsrc.t());
    check_sums(gout1, out1);

    // scatter_add: 4096 x 200 sources onto 5 rows, and along dim 1 from a strided source.
    const Tensor sidx = randint(0, 5, {n, d}, g), x = zeros({5, d}, dtype);
    check_sums(scatter_add(x.to(kGpu), 0, sidx.to(kGpu), gsrc), scatter_add(x, 0, sidx, src));
    const Tensor tidx = randint(0, 3, {d, 64}, g), y = zeros({d, 3}, dtype);
    const Tensor part = src.narrow(0, 0, 64).t();  // [d, 64], strided
    check_sums(scatter_add(y.to(kGpu), 1, tidx.to(kGpu), gsrc.narrow(0, 0, 64).t()), scatter_add(y, 1, tidx, part));
  }
}

TEST_CASE("gpu embedding: values and the gradient of repeated tokens") {
  Generator g(11);
  const Tensor w = randn({50, 32}, g, DType::Float32), idx = randint(0, 50, {8, 100}, g);
  const Tensor u = randn({8, 100, 32}, g, DType::Float32);
  const Tensor cw = w.detach().requires_grad_(), gw = w.to(kGpu).requires_grad_();
  const Tensor ce = embedding(cw, idx), ge = embedding(gw, idx.to(kGpu));
  check_equal(ge, ce);
  sum(ce * u).backward();
  sum(ge * u.to(kGpu)).backward();
  check_sums(gw.grad(), cw.grad());
}

TEST_CASE("gpu indexing errors: out-of-range indices name the op, the index and the size") {
  const Tensor x = zeros({3, 4}, Options(DType::Float32, kGpu));
  CHECK_THROWS_WITH_AS(index_select(x, 0, idx_on({0, 5, 1}, {3})),
                       doctest::Contains("[index_select] index 5 out of range for dim 0 of size 3"), Error);
  CHECK_THROWS_WITH_AS(index_select(x, 1, idx_on({-1}, {1})), doctest::Contains("index -1 out of range for dim 1 of size 4"),
                       Error);
  CHECK_THROWS_WITH_AS(gather(x, 1, idx_on({0, 4}, {1, 2})), doctest::Contains("[gather] index 4 out of range"), Error);
  CHECK_THROWS_WITH_AS(embedding(x, idx_on({2, 3}, {2})), doctest::Contains("index 3 out of range"), Error);

  // index_add / scatter_add check before anything moves: the output is left untouched.
  Tensor out = zeros({3, 4}, Options(DType::Float64, kGpu));
  const Tensor src = ones({2, 4}, Options(DType::Float64, kGpu));
  CHECK_THROWS_WITH_AS(backend(kGpu).index_add(out, 0, idx_on({1, 3}, {2}), src),
                       doctest::Contains("[index_add] index 3 out of range for dim 0 of size 3"), Error);
  CHECK_THROWS_WITH_AS(backend(kGpu).scatter_add(out, 0, idx_on({0, 1, 2, 7, 0, 0, 0, 0}, {2, 4}), src),
                       doctest::Contains("[scatter_add] index 7 out of range"), Error);
  CHECK(out.to(Device::cpu()).to_vector() == std::vector<double>(12, 0.0));

  // Values of other dtypes are refused like on the CPU.
  const Tensor b = zeros({3}, Options(DType::Bool, kGpu));
  CHECK_THROWS_WITH_AS(backend(kGpu).index_select(b, 0, idx_on({0}, {1}), zeros({1}, Options(DType::Bool, kGpu))),
                       doctest::Contains("values must be float32, float64 or int64"), Error);

  // The errors left the device usable.
  check_equal(index_select(x, 0, idx_on({2}, {1})), zeros({1, 4}, DType::Float32));
}
