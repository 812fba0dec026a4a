// Elementwise ops: forward values against plain std:: math (float32/float64, contiguous, strided and
// broadcast operands), gradients at kinks and ties, stability at large |x|, comparisons,
// where/tril/triu, integer dtypes, and the error paths. The float64 gradchecks of every op are
// registry cases (check/ops_elementwise.cpp), run by ctest check_gradcheck.
#include <cmath>
#include <functional>
#include <numbers>

#include "helpers.h"

using namespace linea;
using linea::testing::allclose;
using linea::testing::randn64;

namespace {

using Fn = std::function<Tensor(const std::vector<Tensor>&)>;

// Uniform values in [lo, hi) of the given dtype.
Tensor uniform(Shape shape, double lo, double hi, DType dtype, uint64_t seed) {
  Generator g(seed);
  return rand(std::move(shape), g, dtype) * (hi - lo) + lo;
}

// Three layouts of the same [5, 6] values domain: contiguous, transposed, and a strided slice.
std::vector<Tensor> layouts(double lo, double hi, DType dtype) {
  return {uniform({5, 6}, lo, hi, dtype, 1), uniform({6, 5}, lo, hi, dtype, 2).t(),
          uniform({5, 12}, lo, hi, dtype, 3).slice(1, 0, 12, 2)};
}

// f applied elementwise in double, as the reference.
Tensor map_ref(const Tensor& x, const std::function<double(double)>& f) {
  std::vector<double> v = x.to_vector();
  for (double& e : v) e = f(e);
  return from_vector(v, x.shape());
}

// f(a, b) with a and b broadcast to a common shape, in double, as the reference.
Tensor map_ref(const Tensor& a, const Tensor& b, const std::function<double(double, double)>& f) {
  Shape s = broadcast_shapes("ref", a.shape(), b.shape());
  std::vector<double> va = a.expand(s).contiguous().to_vector(), vb = b.expand(s).contiguous().to_vector();
  for (size_t i = 0; i < va.size(); ++i) va[i] = f(va[i], vb[i]);
  return from_vector(va, s);
}

double tol(DType t) { return t == float32 ? 2e-6 : 1e-12; }

double sigmoid_ref(double x) { return 1 / (1 + std::exp(-x)); }
double gelu_erf_ref(double x) { return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0))); }
double gelu_tanh_ref(double x) {
  return 0.5 * x * (1 + std::tanh(std::sqrt(2 / std::numbers::pi) * (x + 0.044715 * x * x * x)));
}

struct UnaryCase {
  const char* name;
  std::function<Tensor(const Tensor&)> op;
  std::function<double(double)> ref;
  double lo, hi;  // forward inputs are drawn from [lo, hi)
};

std::vector<UnaryCase> unary_cases() {
  return {
      {"neg", [](const Tensor& x) { return -x; }, [](double x) { return -x; }, -3, 3},
      {"exp", [](const Tensor& x) { return exp(x); }, [](double x) { return std::exp(x); }, -3, 3},
      {"log", [](const Tensor& x) { return log(x); }, [](double x) { return std::log(x); }, 0.1, 5},
      {"sqrt", [](const Tensor& x) { return sqrt(x); }, [](double x) { return std::sqrt(x); }, 0.1, 5},
      {"rsqrt", [](const Tensor& x) { return rsqrt(x); }, [](double x) { return 1 / std::sqrt(x); }, 0.1, 5},
      {"tanh", [](const Tensor& x) { return tanh(x); }, [](double x) { return std::tanh(x); }, -3, 3},
      {"sin", [](const Tensor& x) { return sin(x); }, [](double x) { return std::sin(x); }, -7, 7},
      {"cos", [](const Tensor& x) { return cos(x); }, [](double x) { return std::cos(x); }, -7, 7},
      {"sigmoid", [](const Tensor& x) { return sigmoid(x); }, sigmoid_ref, -8, 8},
      {"relu", [](const Tensor& x) { return relu(x); }, [](double x) { return x > 0 ? x : 0; }, -2, 2},
      {"gelu_erf", [](const Tensor& x) { return gelu(x); }, gelu_erf_ref, -4, 4},
      {"gelu_tanh", [](const Tensor& x) { return gelu(x, GeluApprox::Tanh); }, gelu_tanh_ref, -4, 4},
      {"silu", [](const Tensor& x) { return silu(x); }, [](double x) { return x * sigmoid_ref(x); }, -6, 6},
      {"softplus", [](const Tensor& x) { return softplus(x); }, [](double x) { return std::log1p(std::exp(x)); },
       -30, 30},
      {"abs", [](const Tensor& x) { return abs(x); }, [](double x) { return std::abs(x); }, -2, 2},
      {"pow2.5", [](const Tensor& x) { return pow(x, 2.5); }, [](double x) { return std::pow(x, 2.5); }, 0.1, 3},
      {"pow-1.5", [](const Tensor& x) { return pow(x, -1.5); }, [](double x) { return std::pow(x, -1.5); }, 0.2, 3},
      {"clamp", [](const Tensor& x) { return clamp(x, -0.5, 0.7); },
       [](double x) { return std::min(std::max(x, -0.5), 0.7); }, -2, 2},
  };
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// unary

TEST_CASE("unary ops match std:: math for float32/float64 and every layout") {
  for (DType dt : {float32, float64}) {
    for (const UnaryCase& c : unary_cases()) {
      for (const Tensor& x : layouts(c.lo, c.hi, dt)) {
        CAPTURE(c.name);
        CAPTURE(dtype_name(dt));
        Tensor y = c.op(x);
        CHECK(y.dtype() == dt);
        CHECK(y.is_contiguous());
        CHECK(allclose(y, map_ref(x, c.ref), tol(dt), 10 * tol(dt)));
      }
    }
  }
}

TEST_CASE("clamp passes the gradient inside [lo, hi] and blocks it outside; abs'(0) = 0") {
  Tensor x = from_vector<double>({-2, -0.5, 0, 0.7, 3}).requires_grad_();
  sum(clamp(x, -0.5, 0.7)).backward();
  CHECK(allclose(x.grad(), from_vector<double>({0, 1, 1, 1, 0})));
  Tensor z = from_vector<double>({-1, 0, 2}).requires_grad_();
  sum(abs(z)).backward();
  CHECK(allclose(z.grad(), from_vector<double>({-1, 0, 1})));
}

TEST_CASE("NaN propagates as in PyTorch: relu, clamp, abs, the activations, maximum / minimum, max / min") {
  // 37 elements: the vector loop and its tail, NaN in both; no other element may turn NaN.
  std::vector<double> v(37);
  for (size_t i = 0; i < v.size(); ++i) v[i] = -3.0 + 6.0 * double(i) / 36;
  v[0] = v[17] = v[36] = NAN;
  const Tensor zero = scalar(0.0);
  const std::vector<std::pair<const char*, std::function<Tensor(const Tensor&)>>> ops = {
      {"relu", [](const Tensor& x) { return relu(x); }},
      {"clamp", [](const Tensor& x) { return clamp(x, -0.5, 0.7); }},
      {"softplus", [](const Tensor& x) { return softplus(x); }},
      {"abs", [](const Tensor& x) { return abs(x); }},
      {"gelu", [](const Tensor& x) { return gelu(x); }},
      {"gelu tanh", [](const Tensor& x) { return gelu(x, GeluApprox::Tanh); }},
      {"silu", [](const Tensor& x) { return silu(x); }},
      {"sigmoid", [](const Tensor& x) { return sigmoid(x); }},
      {"maximum", [](const Tensor& x) { return maximum(x, zeros_like(x)); }},
      {"minimum", [](const Tensor& x) { return minimum(zeros_like(x), x); }},
  };
  for (DType dt : {float32, float64}) {
    const Tensor x = from_vector(v).to(dt);
    for (const auto& [name, op] : ops) {
      CAPTURE(name);
      CAPTURE(dtype_name(dt));
      const std::vector<double> y = op(x).to_vector();
      for (size_t i = 0; i < v.size(); ++i) CHECK(std::isnan(y[i]) == std::isnan(v[i]));
    }
    CHECK(std::isnan(max(x).item()));
    CHECK(std::isnan(max(x.view({1, 37}), {1}).item()));
    CHECK(std::isnan(min(x.narrow(0, 10, 10)).item()));  // the NaN at 17
    CHECK_FALSE(std::isnan(min(x.narrow(0, 1, 10)).item()));
  }
  CHECK_THROWS_WITH_AS(clamp(zero, NAN, 1), doctest::Contains("[clamp] a bound is NaN: [nan, 1]"), Error);
}

TEST_CASE("sigmoid, silu, gelu and softplus stay finite and exact at large |x|") {
  for (DType dt : {float32, float64}) {
    CAPTURE(dtype_name(dt));
    Tensor x = from_vector<double>({-1000, -100, 100, 1000}).to(dt);
    CHECK(allclose(sigmoid(x), from_vector<double>({0, sigmoid_ref(-100), 1, 1}), 1e-30, 1e-7));
    CHECK(allclose(silu(x), from_vector<double>({0, 0, 100, 1000}), 1e-30, 1e-7));
    CHECK(allclose(softplus(x), from_vector<double>({0, std::log1p(std::exp(-100.0)), 100, 1000}), 1e-30, 1e-7));
    CHECK(gelu(x).to_vector() == std::vector<double>{-0.0, -0.0, 100, 1000});
    CHECK(gelu(x, GeluApprox::Tanh).to_vector() == std::vector<double>{-0.0, -0.0, 100, 1000});
    // The derivatives: 0 far left, 1 far right, never NaN (x^2 overflows float32 at 1e20).
    Tensor big = from_vector<double>({-1e20, -1000, 1000, 1e20}).to(dt).requires_grad_();
    const std::vector<double> expect = {0, 0, 1, 1};
    for (int form = 0; form < 5; ++form) {
      big.zero_grad();
      Tensor y = form == 0   ? gelu(big)
                 : form == 1 ? gelu(big, GeluApprox::Tanh)
                 : form == 2 ? silu(big)
                 : form == 3 ? softplus(big)
                             : sigmoid(big);
      sum(y).backward();
      CAPTURE(form);
      CHECK(big.grad().to_vector() == (form == 4 ? std::vector<double>{0, 0, 0, 0} : expect));
    }
  }
}

// Phi(x) far left is a tiny number: 1 + erf(x/sqrt2) would cancel there and lose every digit, the
// erfc tail keeps ~6 (vec_math.h documents < 4e-6 relative in float32 down to where Phi underflows).
TEST_CASE("gelu (erf) and its derivative in float32 match float64 to relative 1e-5, far left tail included") {
  std::vector<double> xs;
  for (double v = -12.5; v <= 6; v += 0.0137) xs.push_back(v);
  const Tensor x64 = from_vector<double>(xs).requires_grad_();
  const Tensor x32 = x64.detach().to(float32).requires_grad_();
  sum(gelu(x64)).backward();
  sum(gelu(x32)).backward();
  const std::vector<double> y64 = gelu(x64).to_vector(), y32 = gelu(x32).to_vector();
  const std::vector<double> d64 = x64.grad().to_vector(), d32 = x32.grad().to_vector();
  const auto ref = [](double v) { return 0.5 * v * std::erfc(-v / std::sqrt(2.0)); };
  const auto dref = [](double v) {
    return 0.5 * std::erfc(-v / std::sqrt(2.0)) + v * std::exp(-0.5 * v * v) / std::sqrt(2 * M_PI);
  };
  int tail = 0;
  for (size_t i = 0; i < xs.size(); ++i) {
    CAPTURE(xs[i]);
    CHECK(std::abs(y64[i] - ref(xs[i])) <= 1e-13 * std::abs(ref(xs[i])));
    CHECK(std::abs(d64[i] - dref(xs[i])) <= 1e-12 * std::abs(dref(xs[i])) + 1e-15);
    const double v = static_cast<float>(xs[i]);  // float32 at its own (rounded) input
    if (std::abs(ref(v)) < 1e-30) continue;      // float32 Phi underflows below x ~ -13
    tail += v < -6;
    CHECK(std::abs(y32[i] - ref(v)) <= 1e-5 * std::abs(ref(v)));
    CHECK(std::abs(d32[i] - dref(v)) <= 1e-5 * std::abs(dref(v)) + 1e-7);  // d crosses 0 near x = -0.75
  }
  CHECK(tail > 300);  // the comparison reached the far tail, where values are below 1e-8
}

// The activations' backward multiplies into the incoming gradient when the engine's copy is the
// only one (autograd::exclusive), and into a new tensor otherwise: a seed the caller still holds is
// left as it was, and both give g·f'(x).
std::vector<double> silu_backward_ref(const std::vector<double>& xs) {
  std::vector<double> d;
  for (double v : xs) d.push_back(sigmoid_ref(v) * (1 + v * (1 - sigmoid_ref(v))));
  return d;
}
Tensor gelu_grad_ref(const Tensor& x) {
  return map_ref(x, [](double v) { return 0.5 * std::erfc(-v / std::sqrt(2.0)) + v * std::exp(-0.5 * v * v) / std::sqrt(2 * M_PI); });
}

TEST_CASE("activation backward: g·f'(x) in place only into a gradient nobody else holds") {
  Generator gen(7);
  const Tensor x0 = randn({5, 7}, gen, float64), w = randn({7, 3}, gen, float64);
  const std::vector<double> seed_values = randn({5, 7}, gen, float64).to_vector();
  for (const bool held : {false, true}) {
    CAPTURE(held);
    const Tensor x = x0.clone().requires_grad_();
    Tensor y = silu(x);
    Tensor seed = from_vector<double>(seed_values).view({5, 7});
    if (held) {
      y.backward(seed);
      CHECK(seed.to_vector() == seed_values);  // the caller's tensor is untouched
    } else {
      y.backward(std::move(seed));  // nobody else holds it: multiplied in place
    }
    const std::vector<double> d = silu_backward_ref(x0.to_vector()), got = x.grad().to_vector();
    for (size_t i = 0; i < d.size(); ++i) CHECK(got[i] == doctest::Approx(seed_values[i] * d[i]).epsilon(1e-14));
  }
  // Inside a graph: dh comes fresh from the product's backward, as in an MLP.
  const Tensor x = x0.clone().requires_grad_();
  sum(matmul(gelu(x), w)).backward();
  const Tensor expect = matmul(ones({5, 3}, float64), w.t()) * gelu_grad_ref(x0);
  CHECK(allclose(x.grad(), expect, 1e-13, 1e-13));
}

// Training evaluates an activation and its derivative in one pass (Backend::activation_with_grad),
// the backward then multiplying by the saved derivative. Its values must be those of the unary op
// and of the op's *Backward, on every layout, at the extremes and at NaN; the CPU's one-pass kernel
// and the backends' default (unary, then the backward op on ones) must agree.
TEST_CASE("activation_with_grad: the unary op and its backward op's values in one pass") {
  Backend& cpu = backend(Device::cpu());
  const double nan = std::numeric_limits<double>::quiet_NaN(), inf = std::numeric_limits<double>::infinity();
  for (DType dt : {float32, float64}) {
    std::vector<Tensor> xs = layouts(-7, 7, dt);
    xs.push_back(from_vector<double>({-1e20, -1000, -40, -13, -0.0, 0, 1e-30, 3, 40, 1e20, inf, -inf, nan}).to(dt));
    for (UnaryOp op : {UnaryOp::GeluErf, UnaryOp::GeluTanh, UnaryOp::Silu}) {
      for (const Tensor& x : xs) {
        CAPTURE(std::string(op_name(op)));
        CAPTURE(dtype_name(dt));
        CAPTURE(shape_str(x.shape()));
        Tensor y = empty(x.shape(), dt), d = empty(x.shape(), dt), y0 = empty(x.shape(), dt),
               d0 = empty(x.shape(), dt), yd = empty(x.shape(), dt), dd = empty(x.shape(), dt);
        cpu.activation_with_grad(op, x, y, d);
        cpu.unary(op, x, y0);
        cpu.binary(activation_backward_op(op), ones(x.shape(), dt), x, d0);
        cpu.Backend::activation_with_grad(op, x, yd, dd);  // the default, as a GPU without its own runs it
        // The same expressions (ops.h) on the same inputs: equal to 4 ulp (the compiler may fuse a
        // multiply-add in one loop and not the other), infinities and NaN included.
        const double ulp = dt == float32 ? 0x1p-23 : 0x1p-52;
        const auto same = [ulp](const Tensor& a, const Tensor& b) {
          const std::vector<double> va = a.to_vector(), vb = b.to_vector();
          for (size_t i = 0; i < va.size(); ++i)
            if (!(va[i] == vb[i] || (std::isnan(va[i]) && std::isnan(vb[i])) ||
                  std::abs(va[i] - vb[i]) <= 4 * ulp * std::abs(vb[i])))
              return false;
          return true;
        };
        CHECK(same(y, y0));
        CHECK(same(d, d0));
        CHECK(same(yd, y0));
        CHECK(same(dd, d0));
      }
    }
  }
  // gelu's and silu's backward is g·f'(x): the gradient of a weighted sum is the weights times f'.
  // The saved f'(x) times g, or g·f'(x) as one expression: two float32 evaluations, which the
  // compiler contracts into multiply-adds differently on each ISA. In gelu's tails f'(x) is the small
  // difference of terms near 1e-4, where the two differ by up to ~2e-9 (3e-4 of f'): hence the atol.
  const Tensor x = uniform({4, 9}, -5, 5, float32, 7).requires_grad_(), w = uniform({4, 9}, -1, 1, float32, 8);
  sum(gelu(x) * w).backward();
  CHECK(allclose(x.grad(), activation_backward(BinaryOp::GeluErfBackward, w, x.detach()), 1e-8, 1e-6));
}

TEST_CASE("activation_with_grad refuses ops without a derivative kernel and mismatched outputs") {
  Backend& cpu = backend(Device::cpu());
  const Tensor x = zeros({3, 4}), y = empty({3, 4}), d = empty({3, 4});
  CHECK_THROWS_WITH_AS(cpu.activation_with_grad(UnaryOp::Exp, x, y, d), doctest::Contains("[activation_with_grad] exp"),
                       Error);
  CHECK_THROWS_WITH_AS(cpu.activation_with_grad(UnaryOp::GeluErf, x, empty({4, 3}), d),
                       doctest::Contains("[gelu] y and dydx must be contiguous float32 tensors shaped like x (3, 4)"),
                       Error);
  CHECK_THROWS_WITH_AS(cpu.activation_with_grad(UnaryOp::GeluErf, x, y, empty({4, 3}).t()),
                       doctest::Contains("(strided)"), Error);
  CHECK_THROWS_WITH_AS(cpu.activation_with_grad(UnaryOp::Silu, x, y, empty({3, 4}, float64)),
                       doctest::Contains("[silu] y and dydx must be contiguous float32"), Error);
  const Tensor xi = zeros({3, 4}, DType::Int64);
  CHECK_THROWS_WITH_AS(cpu.activation_with_grad(UnaryOp::GeluErf, xi, y, d),
                       doctest::Contains("[gelu] expected a floating dtype"), Error);
  // The default runs the same checks before any kernel.
  CHECK_THROWS_WITH_AS(cpu.Backend::activation_with_grad(UnaryOp::Relu, x, y, d),
                       doctest::Contains("[activation_with_grad] relu"), Error);
}

// ---------------------------------------------------------------------------------------------
// binary

struct BinaryCase {
  const char* name;
  std::function<Tensor(const Tensor&, const Tensor&)> op;
  std::function<double(double, double)> ref;
};

static std::vector<BinaryCase> binary_cases() {
  return {
      {"add", [](const Tensor& a, const Tensor& b) { return a + b; }, [](double a, double b) { return a + b; }},
      {"sub", [](const Tensor& a, const Tensor& b) { return a - b; }, [](double a, double b) { return a - b; }},
      {"mul", [](const Tensor& a, const Tensor& b) { return a * b; }, [](double a, double b) { return a * b; }},
      {"div", [](const Tensor& a, const Tensor& b) { return a / b; }, [](double a, double b) { return a / b; }},
      {"pow", [](const Tensor& a, const Tensor& b) { return pow(a, b); },
       [](double a, double b) { return std::pow(a, b); }},
      {"maximum", [](const Tensor& a, const Tensor& b) { return maximum(a, b); },
       [](double a, double b) { return std::max(a, b); }},
      {"minimum", [](const Tensor& a, const Tensor& b) { return minimum(a, b); },
       [](double a, double b) { return std::min(a, b); }},
  };
}

TEST_CASE("binary ops broadcast and match plain loops, for every layout and a scalar operand") {
  for (DType dt : {float32, float64}) {
    // Positive operands keep div and pow well defined; pairs of (a, b) with different layouts.
    const std::vector<std::pair<Tensor, Tensor>> pairs = {
        {uniform({3, 1, 4}, 0.5, 2, dt, 1), uniform({2, 4}, 0.5, 2, dt, 2)},            // broadcast both ways
        {uniform({4, 3}, 0.5, 2, dt, 3).t(), uniform({3, 8}, 0.5, 2, dt, 4).slice(1, 1, 8, 2)},  // strided
        {uniform({2, 3}, 0.5, 2, dt, 5), scalar(1.5, dt)},                                  // 0-d operand
        {scalar(0.75, dt), uniform({2, 3}, 0.5, 2, dt, 6)},
        {uniform({300, 200}, 0.5, 2, dt, 7), uniform({200}, 0.5, 2, dt, 8)},              // big: OpenMP rows
        {uniform({70000}, 0.5, 2, dt, 9), uniform({70000}, 0.5, 2, dt, 10)},             // big: one long run
    };
    for (const BinaryCase& c : binary_cases()) {
      for (const auto& [a, b] : pairs) {
        CAPTURE(c.name);
        CAPTURE(dtype_name(dt));
        Tensor y = c.op(a, b);
        CHECK(y.dtype() == dt);
        CHECK(allclose(y, map_ref(a, b, c.ref), tol(dt), 10 * tol(dt)));
      }
    }
  }
}

TEST_CASE("scalar operators take the tensor's dtype") {
  Tensor x = from_vector<float>({1, 2, 4});
  CHECK((x + 1.0).to_vector() == std::vector<double>{2, 3, 5});
  CHECK((x - 1.0).to_vector() == std::vector<double>{0, 1, 3});
  CHECK((x * 2.0).to_vector() == std::vector<double>{2, 4, 8});
  CHECK((x / 2.0).to_vector() == std::vector<double>{0.5, 1, 2});
  CHECK((1.0 + x).to_vector() == std::vector<double>{2, 3, 5});
  CHECK((1.0 - x).to_vector() == std::vector<double>{0, -1, -3});
  CHECK((2.0 * x).to_vector() == std::vector<double>{2, 4, 8});
  CHECK((8.0 / x).to_vector() == std::vector<double>{8, 4, 2});
  CHECK((x * 2.0).dtype() == float32);
  CHECK((arange(3) * 2.0).dtype() == int64);
}

TEST_CASE("pow's exponent gradient is log(a) * a^b where a > 0 and 0 at a = 0") {
  Tensor a = from_vector<double>({0, 2}).requires_grad_();
  Tensor b = from_vector<double>({2, 3}).requires_grad_();
  sum(pow(a, b)).backward();
  CHECK(allclose(a.grad(), from_vector<double>({0, 12})));
  CHECK(allclose(b.grad(), from_vector<double>({0, 8 * std::log(2.0)})));
}

TEST_CASE("maximum/minimum send the gradient to the winner and split ties half/half") {
  Tensor a = from_vector<double>({1, 5, 3}).requires_grad_();
  Tensor b = from_vector<double>({2, 4, 3}).requires_grad_();
  sum(maximum(a, b)).backward();
  CHECK(a.grad().to_vector() == std::vector<double>{0, 1, 0.5});
  CHECK(b.grad().to_vector() == std::vector<double>{1, 0, 0.5});
  a.zero_grad();
  b.zero_grad();
  sum(minimum(a, b)).backward();
  CHECK(a.grad().to_vector() == std::vector<double>{1, 0, 0.5});
  CHECK(b.grad().to_vector() == std::vector<double>{0, 1, 0.5});
  // NaN propagates through both.
  Tensor n = from_vector<double>({NAN, 1});
  Tensor o = from_vector<double>({0, NAN});
  for (const Tensor& r : {maximum(n, o), minimum(n, o), maximum(o, n)}) {
    auto v = r.to_vector();
    CHECK((std::isnan(v[0]) && std::isnan(v[1])));
  }
}

// ---------------------------------------------------------------------------------------------
// integers and dtype rules

TEST_CASE("integer arithmetic, promotion and conversion to the floating operand") {
  Tensor i = from_vector<int64_t>({-3, 0, 5});
  Tensor j = from_vector<int64_t>({2, 2, -7});
  CHECK((i + j).to_vector() == std::vector<double>{-1, 2, -2});
  CHECK((i - j).to_vector() == std::vector<double>{-5, -2, 12});
  CHECK((i * j).to_vector() == std::vector<double>{-6, 0, -35});
  CHECK(maximum(i, j).to_vector() == std::vector<double>{2, 2, 5});
  CHECK(minimum(i, j).to_vector() == std::vector<double>{-3, 0, -7});
  CHECK((i + j).dtype() == int64);
  CHECK(neg(i).to_vector() == std::vector<double>{3, 0, -5});
  CHECK(abs(i).to_vector() == std::vector<double>{3, 0, 5});
  CHECK(relu(i).to_vector() == std::vector<double>{0, 0, 5});
  CHECK(clamp(i, -1, 2).to_vector() == std::vector<double>{-1, 0, 2});
  CHECK(clamp(i, -INFINITY, 1).to_vector() == std::vector<double>{-3, 0, 1});  // infinite bound saturates
  Tensor u = from_vector<uint8_t>({200, 3, 7});
  CHECK((u + i).dtype() == int64);  // uint8 < int64
  CHECK((u + i).to_vector() == std::vector<double>{197, 3, 12});
  CHECK((u + u).dtype() == uint8);
  Tensor f = from_vector<float>({0.5, 0.25, 2});
  Tensor fi = f * i;  // int64 operand converted to float32
  CHECK(fi.dtype() == float32);
  CHECK(fi.to_vector() == std::vector<double>{-1.5, 0, 10});
  CHECK((i / from_vector<double>({2, 1, 4})).to_vector() == std::vector<double>{-1.5, 0, 1.25});
}

// ---------------------------------------------------------------------------------------------
// comparisons, where, tril/triu

TEST_CASE("comparisons broadcast, return bool, and record nothing") {
  Tensor a = from_vector<double>({1, 2, 3, 4, 5, 6}, {2, 3}).requires_grad_();
  Tensor b = from_vector<double>({2, 2, 7}, {3});
  const std::vector<std::pair<std::function<Tensor(const Tensor&, const Tensor&)>, std::function<bool(double, double)>>>
      cases = {{eq, std::equal_to<double>()}, {ne, std::not_equal_to<double>()}, {lt, std::less<double>()},
               {le, std::less_equal<double>()}, {gt, std::greater<double>()}, {ge, std::greater_equal<double>()}};
  for (const auto& [op, ref] : cases) {
    Tensor r = op(a, b);
    CHECK(r.dtype() == boolean);
    CHECK_FALSE(r.requires_grad());
    CHECK(allclose(r, map_ref(a.detach(), b, [&ref = ref](double x, double y) { return double(ref(x, y)); })));
  }
  // Mixed dtypes compare by value; bools compare too; the float32 path on a transposed view.
  CHECK(lt(from_vector<int64_t>({1, 2}), from_vector<float>({1.5, 1.5})).to_vector() == std::vector<double>{1, 0});
  Tensor m = gt(a.detach(), scalar(3.0, float64));
  CHECK(eq(m, m).to_vector() == std::vector<double>(6, 1));
  Tensor t = from_vector<float>({1, 2, 3, 4}, {2, 2}).t();
  CHECK(ge(t, scalar(2.0)).to_vector() == std::vector<double>{0, 1, 1, 1});
}

TEST_CASE("where: forward with broadcasting, gradients to a and b only") {
  Tensor cond = from_vector<double>({1, 0, 1}, {3, 1}).to(boolean);
  Tensor a = uniform({3, 4}, -1, 1, float64, 1);
  Tensor b = scalar(7.0, float64);
  Tensor expect = map_ref(a, cond.to(float64), [](double x, double c) { return c != 0 ? x : 7.0; });
  CHECK(allclose(where(cond, a, b), expect));
  CHECK(allclose(where(cond, a.to(float32), scalar(7.0)), expect, 1e-6));
  // Non-contiguous cond (a transposed view) and int64 operands.
  Tensor ct = from_vector<double>({1, 1, 0, 1}, {2, 2}).to(boolean).t();  // [[1, 0], [1, 1]]
  CHECK(where(ct, arange(4).view({2, 2}), scalar(-1, int64)).to_vector() == std::vector<double>{0, -1, 2, 3});
  Tensor x = randn64({3, 4}, 6);
  sum(where(cond, x, b)).backward();
  CHECK(x.grad().to_vector() == std::vector<double>{1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 1, 1});
}

TEST_CASE("tril/triu zero the right triangle of the last two dims") {
  Tensor x = uniform({2, 3, 4}, -1, 1, float64, 1);
  std::vector<double> v = x.to_vector();
  for (int64_t k : {-1, 0, 1, 2}) {
    std::vector<double> lo(v.size()), up(v.size());
    for (int64_t i = 0; i < 24; ++i) {
      int64_t r = (i / 4) % 3, c = i % 4;
      lo[i] = c <= r + k ? v[i] : 0;
      up[i] = c >= r + k ? v[i] : 0;
    }
    CAPTURE(k);
    CHECK(tril(x, k).to_vector() == lo);
    CHECK(triu(x, k).to_vector() == up);
  }
}

// ---------------------------------------------------------------------------------------------
// errors

TEST_CASE("bad inputs throw a linea::Error naming the op") {
  Tensor a = zeros({2, 3});
  CHECK_THROWS_WITH_AS(add(a, zeros({4})), doctest::Contains("[add]"), Error);
  CHECK_THROWS_WITH_AS(where(zeros({2}, boolean), a, zeros({3, 3})), doctest::Contains("[where]"), Error);
  CHECK_THROWS_WITH_AS(where(zeros({2, 3}), a, a), doctest::Contains("must be bool"), Error);
  // Two floating dtypes never mix silently; the message names both.
  CHECK_THROWS_WITH_AS(mul(a, zeros({2, 3}, float64)), doctest::Contains("float32 and float64"), Error);
  CHECK_THROWS_WITH_AS(a + zeros({3}, float64), doctest::Contains("[add]"), Error);
  CHECK_THROWS_WITH_AS(lt(a, zeros({3}, float64)), doctest::Contains("[lt]"), Error);
  // Float-only ops refuse integers and bools clearly.
  Tensor i = arange(3);
  CHECK_THROWS_WITH_AS(exp(i), doctest::Contains("[exp] expected a floating dtype"), Error);
  CHECK_THROWS_WITH_AS(gelu(i), doctest::Contains("[gelu]"), Error);
  CHECK_THROWS_WITH_AS(pow(i, 2.0), doctest::Contains("[pow]"), Error);
  CHECK_THROWS_WITH_AS(i / i, doctest::Contains("[div]"), Error);
  CHECK_THROWS_WITH_AS(pow(i, i), doctest::Contains("[pow]"), Error);
  Tensor m = ones({3}, boolean);
  CHECK_THROWS_WITH_AS(m + m, doctest::Contains("[add]"), Error);
  CHECK_THROWS_WITH_AS(neg(m), doctest::Contains("[neg]"), Error);
  CHECK_THROWS_WITH_AS(m.requires_grad_(), doctest::Contains("floating"), Error);
  CHECK_THROWS_WITH_AS(clamp(a, 1, 0), doctest::Contains("[clamp]"), Error);
  CHECK_THROWS_WITH_AS(tril(zeros({3})), doctest::Contains("[tril]"), Error);
  CHECK_THROWS_WITH_AS(triu(zeros({3})), doctest::Contains("[triu]"), Error);
  // The kernel checks its own contract too (a direct call with a mismatched out).
  CHECK_THROWS_AS(backend(Device::cpu()).binary(BinaryOp::Add, a, a, zeros({3, 2})), Error);
  CHECK_THROWS_AS(backend(Device::cpu()).unary(UnaryOp::Exp, i, empty({3}, int64)), Error);
}
