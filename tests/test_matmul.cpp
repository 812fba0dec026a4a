// matmul: values against a plain triple loop, NumPy shape rules, BLAS-friendly views, gradients,
// errors.
#include "helpers.h"

using namespace linea;
using linea::testing::allclose;
using linea::testing::randn64;

namespace {

// Plain-loop matmul with NumPy semantics, computed in double from the operands' values.
Tensor ref_matmul(const Tensor& a, const Tensor& b) {
  Tensor A = a.dim() == 1 ? a.unsqueeze(0) : a, B = b.dim() == 1 ? b.unsqueeze(1) : b;
  const int64_t M = A.size(-2), K = A.size(-1), N = B.size(-1);
  Shape batch = broadcast_shapes("ref", Shape(A.shape().begin(), A.shape().end() - 2),
                                 Shape(B.shape().begin(), B.shape().end() - 2));
  Shape as = batch, bs = batch;
  as.insert(as.end(), {M, K});
  bs.insert(bs.end(), {K, N});
  std::vector<double> av = A.expand(as).to_vector(), bv = B.expand(bs).to_vector();
  const int64_t nb = numel(batch);
  std::vector<double> out(nb * M * N, 0.0);
  for (int64_t p = 0; p < nb; ++p)
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = 0; j < N; ++j) {
        double s = 0;
        for (int64_t k = 0; k < K; ++k) s += av[(p * M + i) * K + k] * bv[(p * K + k) * N + j];
        out[(p * M + i) * N + j] = s;
      }
  Shape out_shape = batch;
  if (a.dim() > 1) out_shape.push_back(M);
  if (b.dim() > 1) out_shape.push_back(N);
  return from_vector(out, out_shape);
}

Tensor randn32(Shape shape, uint64_t seed) {
  Generator g(seed);
  return randn(std::move(shape), g, DType::Float32);
}

bool overlaps(const Tensor& t) {
  for (int64_t d = 0; d < t.dim(); ++d)
    if (t.strides()[d] == 0 && t.shape()[d] > 1) return true;
  return false;
}

auto mm = [](const std::vector<Tensor>& in) { return matmul(in[0], in[1]); };

// Checks values (float32 and float64) and the float64 gradient for one pair of shapes;
// `view` turns a fresh tensor into the operand actually passed (e.g. a transpose).
void check_case(Shape sa, Shape sb, Shape expect,
                const std::function<Tensor(const Tensor&)>& va = [](const Tensor& t) { return t; },
                const std::function<Tensor(const Tensor&)>& vb = [](const Tensor& t) { return t; }) {
  CAPTURE(shape_str(sa));
  CAPTURE(shape_str(sb));
  Tensor a32 = va(randn32(sa, 1)), b32 = vb(randn32(sb, 2));
  Tensor out = matmul(a32, b32);
  CHECK(out.shape() == expect);
  CHECK(out.dtype() == DType::Float32);
  CHECK(allclose(out, ref_matmul(a32, b32), 1e-4, 1e-4));
  // float64: the views taken inside f, and (unless a view repeats elements, which gradcheck's
  // per-element perturbation cannot handle) the views themselves made leaves.
  Tensor a0 = randn64(sa, 3), b0 = randn64(sb, 4);
  CHECK(allclose(matmul(va(a0), vb(b0)), ref_matmul(va(a0), vb(b0)), 1e-12, 1e-12));
  CHECK_GRADCHECK([&](const std::vector<Tensor>& in) { return matmul(va(in[0]), vb(in[1])); }, {a0, b0});
  Tensor a = va(a0).detach().requires_grad_(), b = vb(b0).detach().requires_grad_();
  if (!overlaps(a) && !overlaps(b)) CHECK_GRADCHECK(mm, {a, b});
}

Tensor t_last(const Tensor& t) { return t.transpose(-1, -2); }

}  // namespace

TEST_CASE("matmul: 2-d and 1-d operands follow NumPy") {
  check_case({3, 4}, {4, 5}, {3, 5});
  check_case({4}, {4, 5}, {5});   // vector @ matrix
  check_case({3, 4}, {4}, {3});   // matrix @ vector
  check_case({4}, {4}, {});       // dot product: 0-d
  check_case({2, 3, 4}, {4}, {2, 3});
  check_case({4}, {2, 4, 5}, {2, 5});
  check_case({1, 1}, {1, 1}, {1, 1});
}

TEST_CASE("matmul: batched and broadcast batch dims") {
  check_case({2, 3, 4}, {2, 4, 5}, {2, 3, 5});
  check_case({2, 3, 4}, {4, 5}, {2, 3, 5});        // shared weight (folded into one gemm)
  check_case({3, 4}, {2, 4, 5}, {2, 3, 5});        // shared left operand
  check_case({2, 1, 3, 4}, {5, 4, 2}, {2, 5, 3, 2});  // partial broadcast: a loop over dim 0
  check_case({1, 3, 4}, {6, 4, 2}, {6, 3, 2});
  check_case({2, 2, 3, 4}, {2, 2, 4, 5}, {2, 2, 3, 5});
}

TEST_CASE("matmul: transposed and strided views") {
  // Column-major operands go to BLAS as transposes; the rest are copied first.
  check_case({4, 3}, {4, 5}, {3, 5}, t_last);
  check_case({3, 4}, {5, 4}, {3, 5}, [](const Tensor& t) { return t; }, t_last);
  check_case({4, 3}, {5, 4}, {3, 5}, t_last, t_last);
  check_case({2, 4, 3}, {2, 5, 4}, {2, 3, 5}, t_last, t_last);   // batched transposes
  check_case({4, 2, 3}, {4, 5}, {2, 3, 5}, [](const Tensor& t) { return t.permute({1, 2, 0}); });
  check_case({3, 8}, {4, 5}, {3, 5}, [](const Tensor& t) { return t.slice(1, 0, 8, 2); });  // column stride 2
  check_case({3, 4}, {4, 10}, {3, 5}, [](const Tensor& t) { return t; },
             [](const Tensor& t) { return t.slice(1, 1, 10, 2); });
  check_case({5, 3, 4}, {3, 4, 2}, {3, 3, 2}, [](const Tensor& t) { return t.slice(0, 0, 5, 2); });  // batch stride
  // Broadcast rows (stride 0 inside the matrix) need a copy too.
  check_case({1, 4}, {4, 5}, {3, 5}, [](const Tensor& t) { return t.expand({3, 4}); });
}

TEST_CASE("matmul: larger float32 products and empty dims") {
  Tensor a = randn32({64, 128}, 5), b = randn32({128, 96}, 6);
  CHECK(allclose(matmul(a, b), ref_matmul(a, b), 1e-4, 1e-4));
  Tensor x = randn32({4, 16, 32}, 7), w = randn32({32, 8}, 8);
  CHECK(allclose(matmul(x, w), ref_matmul(x, w), 1e-4, 1e-4));
  // K = 0: a sum over nothing is 0. M = 0: an empty result.
  CHECK(matmul(zeros({2, 0}), zeros({0, 3})).to_vector() == std::vector<double>(6, 0.0));
  CHECK(matmul(zeros({0, 4}), zeros({4, 3})).shape() == Shape{0, 3});
}

TEST_CASE("matmul: gradient of a shared weight used across a batch") {
  Tensor x = randn64({3, 4, 5}, 9), w = randn64({5, 2}, 10);
  matmul(x, w).backward(ones({3, 4, 2}, DType::Float64));
  // dW = sum over batch and rows of x^T @ 1, i.e. column sums of x for every output column.
  Tensor colsum = sum(x.detach(), {0, 1});
  for (int64_t j = 0; j < 2; ++j) CHECK(allclose(w.grad().select(1, j), colsum, 1e-12, 1e-12));
  CHECK(x.grad().shape() == x.shape());
  // Only the input that requires grad gets one.
  Tensor c = randn64({5, 2}, 11, false);
  Tensor y = randn64({4, 5}, 12);
  matmul(y, c).backward(ones({4, 2}, DType::Float64));
  CHECK(y.grad().defined());
  CHECK(!c.grad().defined());
}

TEST_CASE("matmul errors name the op and the shapes") {
  Tensor a = randn32({3, 4}, 13), b = randn32({5, 6}, 14);
  CHECK_THROWS_WITH_AS(matmul(a, b), doctest::Contains("[matmul] shape mismatch: (3, 4) @ (5, 6)"), linea::Error);
  CHECK_THROWS_WITH_AS(matmul(randn32({3}, 1), randn32({4}, 2)), doctest::Contains("(3,) @ (4,)"), linea::Error);
  CHECK_THROWS_WITH_AS(matmul(randn32({2, 3, 4}, 1), randn32({3, 4, 5}, 2)),
                       doctest::Contains("[matmul] batch dims of (2, 3, 4) and (3, 4, 5)"), linea::Error);
  CHECK_THROWS_WITH_AS(matmul(a, randn64({4, 2}, 1, false)), doctest::Contains("[matmul] dtype mismatch"),
                       linea::Error);
  Tensor i = from_vector<int64_t>({1, 2, 3, 4}, {2, 2});
  CHECK_THROWS_WITH_AS(matmul(i, i), doctest::Contains("[matmul]"), linea::Error);
  CHECK_THROWS_WITH_AS(matmul(scalar(2.0), a), doctest::Contains("[matmul]"), linea::Error);
}

TEST_CASE("matmul: products split across threads, every transpose combination") {
  // Big enough (>= 64^3 multiply-adds) that the CPU gemm splits rows (tall) or columns (wide)
  // over threads; the transposed operands are .t() views, which reach BLAS as CblasTrans.
  Generator gen(11);
  for (const std::array<int64_t, 3>& mkn : {std::array<int64_t, 3>{200, 70, 30}, std::array<int64_t, 3>{30, 70, 200}}) {
    const int64_t M = mkn[0], K = mkn[1], N = mkn[2];  // not [M, K, N]: clang < 16 cannot CAPTURE a binding
    for (bool ta : {false, true})
      for (bool tb : {false, true}) {
        Tensor a = ta ? randn({K, M}, gen, float64).t() : randn({M, K}, gen, float64);
        Tensor b = tb ? randn({N, K}, gen, float64).t() : randn({K, N}, gen, float64);
        CAPTURE(M);
        CAPTURE(ta);
        CAPTURE(tb);
        CHECK(allclose(matmul(a, b), ref_matmul(a, b), 1e-10, 1e-10));
        CHECK(allclose(matmul(a.to(float32), b.to(float32)), ref_matmul(a, b), 1e-3, 1e-4));
      }
  }
}

// ---- linear: x·Wᵀ + b with the bias as the gemm's epilogue ----

TEST_CASE("linear: x·Wᵀ + b on every gemm path, float64 and float32") {
  // A small product (the direct kernel where the CPU has one), products split across threads by
  // rows and by columns (BLAS adding to c filled with the bias), an x stored transposed (each
  // matrix read as a transpose: the batch loop), a 1-d x, and a weight that is a row slice.
  Generator gen(21);
  struct Case {
    Shape x;
    int64_t out;
    bool transposed_x;
  };
  for (const Case& c : {Case{{3, 4, 5}, 6, false}, Case{{2, 150, 40}, 60, false}, Case{{20, 40}, 600, false},
                        Case{{3, 7, 5}, 6, true}, Case{{5}, 3, false}}) {
    CAPTURE(shape_str(c.x));
    CAPTURE(c.transposed_x);
    Shape stored = c.x;
    if (c.transposed_x) std::swap(stored[stored.size() - 1], stored[stored.size() - 2]);
    Tensor x = randn(stored, gen, float64);
    if (c.transposed_x) x = x.transpose(-1, -2);
    const int64_t in = c.x.back();
    const Tensor w = randn({c.out + 2, in}, gen, float64).narrow(0, 1, c.out), b = randn({c.out}, gen, float64);
    const Tensor expect = ref_matmul(x, w.t()) + b;
    const Tensor y = linear(x, w, b);
    CHECK(y.shape() == expect.shape());
    CHECK(allclose(y, expect, 1e-12, 1e-12));
    CHECK(allclose(linear(x.to(float32), w.to(float32), b.to(float32)), expect, 1e-4, 1e-4));
    CHECK(allclose(linear(x, w, Tensor()), ref_matmul(x, w.t()), 1e-12, 1e-12));
  }
}

TEST_CASE("linear: float64 gradients of x, weight and bias against finite differences") {
  auto lin = [](const std::vector<Tensor>& in) { return linear(in[0], in[1], in[2]); };
  CHECK_GRADCHECK(lin, {randn64({2, 3, 5}, 1), randn64({4, 5}, 2), randn64({4}, 3)});
  CHECK_GRADCHECK(lin, {randn64({5}, 4), randn64({2, 5}, 5), randn64({2}, 6)});
  // x stored transposed, and only the weight and bias needing gradients.
  const Tensor xt = randn64({2, 5, 3}, 7, false).transpose(1, 2);
  CHECK_GRADCHECK([&](const std::vector<Tensor>& in) { return linear(xt, in[0], in[1]); },
                  {randn64({4, 5}, 8), randn64({4}, 9)});
}

TEST_CASE("linear and the gemm's bias: errors name the op, shapes and dtypes") {
  const Tensor x = randn32({3, 4}, 1), w = randn32({5, 4}, 2);
  CHECK_THROWS_WITH_AS(linear(x, w, randn32({4}, 3)), doctest::Contains("[linear] expected x [..., in]"),
                       linea::Error);
  CHECK_THROWS_WITH_AS(linear(x, randn32({5, 3}, 3), randn32({5}, 4)), doctest::Contains("(5, 3)"), linea::Error);
  CHECK_THROWS_WITH_AS(linear(x, w, randn64({5}, 4, false)), doctest::Contains("[linear] x, weight, bias must share"),
                       linea::Error);
  Backend& be = backend(Device::cpu());
  const Tensor a = randn32({1, 3, 4}, 5), b = randn32({1, 4, 5}, 6), out = empty({1, 3, 5});
  CHECK_THROWS_WITH_AS(be.gemm(a, b, out, randn32({3}, 7), Tensor()), doctest::Contains("[gemm] bias must be"),
                       linea::Error);
  CHECK_THROWS_WITH_AS(be.gemm(a, b, out, randn32({5, 2}, 7).select(1, 0), Tensor()),
                       doctest::Contains("[gemm] bias must be"), linea::Error);
}

// ---- the gemm's residual and linear_add: a skip connection added by the product itself ----

TEST_CASE("gemm with a residual: out = a·b + residual (+ bias) on every CPU path, float64 and float32") {
  // The direct kernel (small), rows split across threads with a broadcast b (a linear layer), the
  // batch loop, BLAS split by columns (N > 512), a weight-gradient shape whose K is split across
  // threads, a transposed a on BLAS, and an empty K; the residual out itself (out += a·b) or another
  // tensor.
  Generator gen(31);
  struct Case {
    Shape a, b;
    bool ta, broadcast_b;
  };
  Backend& be = backend(Device::cpu());
  for (const Case& c : {Case{{1, 3, 5}, {1, 5, 6}, false, false}, Case{{2, 150, 40}, {1, 40, 60}, false, true},
                        Case{{3, 7, 5}, {3, 5, 6}, false, false}, Case{{1, 20, 40}, {1, 40, 600}, false, false},
                        Case{{1, 16, 4096}, {1, 4096, 8}, true, false}, Case{{1, 64, 30}, {1, 30, 70}, true, false},
                        Case{{2, 4, 0}, {2, 0, 3}, false, false}})
    for (DType dtype : {float64, float32})
      for (bool with_bias : {false, true})
        for (bool in_place : {true, false}) {
          CAPTURE(shape_str(c.a));
          CAPTURE(shape_str(c.b));
          CAPTURE(dtype);
          CAPTURE(with_bias);
          CAPTURE(in_place);
          // a read transposed: converted first, so that the float32 copy is a transposed view too.
          Tensor a = c.ta ? randn({c.a[0], c.a[2], c.a[1]}, gen, float64).to(dtype).transpose(1, 2)
                          : randn(c.a, gen, float64).to(dtype);
          Tensor b = randn(c.b, gen, float64).to(dtype);
          const int64_t batch = c.a[0], M = c.a[1], N = c.b[2];
          if (c.broadcast_b) b = b.expand({batch, c.b[1], N});
          const Tensor start = randn({batch, M, N}, gen, float64), bias = randn({N}, gen, float64);
          Tensor expect = start + ref_matmul(a.to(float64), b.to(float64));
          if (with_bias) expect = expect + bias;
          const Tensor r = start.to(dtype).contiguous().clone(), r0 = r.clone();
          const Tensor out = in_place ? r : full({batch, M, N}, -5.0, Options(dtype));
          be.gemm(a, b, out, with_bias ? bias.to(dtype) : Tensor(), r);
          if (dtype == float64) CHECK(allclose(out, expect, 1e-11, 1e-11));
          else CHECK(allclose(out, expect, 1e-3, 1e-4));
          if (!in_place) CHECK(allclose(r, r0, 0, 0));  // a separate residual is read, never written
        }
}

TEST_CASE("gemm with a residual: errors name its shape, layout and storage") {
  Backend& be = backend(Device::cpu());
  const Tensor a = randn32({1, 3, 4}, 5), b = randn32({1, 4, 5}, 6), out = empty({1, 3, 5});
  CHECK_THROWS_WITH_AS(be.gemm(a, b, out, Tensor(), randn32({1, 3, 4}, 7)),
                       doctest::Contains("[gemm] residual must be a contiguous float32 (1, 3, 5)"), linea::Error);
  CHECK_THROWS_WITH_AS(be.gemm(a, b, out, Tensor(), randn32({1, 5, 3}, 7).transpose(1, 2)),
                       doctest::Contains("[gemm] residual must be a contiguous"), linea::Error);
  CHECK_THROWS_WITH_AS(be.gemm(a, b, out, Tensor(), randn64({1, 3, 5}, 7, false)),
                       doctest::Contains("got float64"), linea::Error);
  // Another view of out's storage: the product would read rows it has already written.
  const Tensor buf = zeros({2, 3, 5}, Options(float32));
  CHECK_THROWS_WITH_AS(be.gemm(a, b, buf.narrow(0, 1, 1), Tensor(), buf.narrow(0, 0, 1)),
                       doctest::Contains("[gemm] residual must be out itself or not overlap it"), linea::Error);
}

TEST_CASE("linear_add: residual + x·Wᵀ + b, values and float64 gradients") {
  Generator gen(32);
  for (const Shape& xs : {Shape{3, 4, 5}, Shape{2, 150, 40}, Shape{5}}) {
    CAPTURE(shape_str(xs));
    const int64_t out_f = xs.back() == 40 ? 60 : 3;
    const Tensor x = randn(xs, gen, float64), w = randn({out_f, xs.back()}, gen, float64);
    const Tensor b = randn({out_f}, gen, float64);
    Shape rs = xs;
    rs.back() = out_f;
    const Tensor r = randn(rs, gen, float64), r0 = r.clone(), expect = ref_matmul(x, w.t()) + b + r;
    CHECK(allclose(linear_add(x, w, b, r), expect, 1e-12, 1e-12));
    CHECK(allclose(linear_add(x, w, Tensor(), r), expect - b, 1e-12, 1e-12));
    CHECK(allclose(linear_add(x.to(float32), w.to(float32), b.to(float32), r.to(float32)), expect, 1e-4, 1e-4));
    CHECK(allclose(r, r0, 0, 0));  // the residual is read, never written
  }
  auto lin = [](const std::vector<Tensor>& in) { return linear_add(in[0], in[1], in[2], in[3]); };
  CHECK_GRADCHECK(lin, {randn64({2, 3, 5}, 11), randn64({4, 5}, 12), randn64({4}, 13), randn64({2, 3, 4}, 14)});
  CHECK_GRADCHECK([](const std::vector<Tensor>& in) { return linear_add(in[0], in[1], Tensor(), in[2]); },
                  {randn64({3, 6}, 15), randn64({2, 6}, 16), randn64({3, 2}, 17)});
  // A residual that needs no gradient, and x stored transposed.
  const Tensor xt = randn64({2, 5, 3}, 18, false).transpose(1, 2), rc = randn64({2, 3, 4}, 19, false);
  CHECK_GRADCHECK([&](const std::vector<Tensor>& in) { return linear_add(xt, in[0], in[1], rc); },
                  {randn64({4, 5}, 20), randn64({4}, 21)});
}

TEST_CASE("linear_add: errors name the op and the residual's shape, dtype and device") {
  const Tensor x = randn32({3, 4}, 1), w = randn32({5, 4}, 2), b = randn32({5}, 3);
  CHECK_THROWS_WITH_AS(
      linear_add(x, w, b, randn32({3, 4}, 4)),
      doctest::Contains("[linear_add] residual must be the output's (3, 5) float32 on cpu, got (3, 4)"), linea::Error);
  CHECK_THROWS_WITH_AS(linear_add(x, w, b, randn64({3, 5}, 5, false)),
                       doctest::Contains("[linear_add] residual must be the output's"), linea::Error);
  CHECK_THROWS_WITH_AS(linear_add(x, w, b, Tensor()), doctest::Contains("[linear_add] needs a residual"),
                       linea::Error);
  CHECK_THROWS_WITH_AS(linear_add(x, randn32({5, 3}, 6), b, randn32({3, 5}, 7)),
                       doctest::Contains("[linear_add] expected x [..., in]"), linea::Error);
  CHECK_THROWS_WITH_AS(linear_add(x, w, randn64({5}, 8, false), randn32({3, 5}, 9)),
                       doctest::Contains("[linear_add] x, weight, bias must share"), linea::Error);
}
