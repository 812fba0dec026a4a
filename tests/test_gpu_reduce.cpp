// The reduction, softmax and norm kernels of the CUDA backend (cuda/reduce.cu, cuda/norm.cu)
// against the CPU backend, called through the kernel interface so that every launch path is hit
// on purpose: a warp per row (short rows), a block per row (long rows), rows split over blocks
// (few long rows), one thread per column (inner > 1), columns split over blocks (few columns),
// and the two-pass dweight/dbias sums. Skips (exit 77) without a device: see gpu_main.cpp.
//
// Tolerances: float32 1e-5 relative (both sides accumulate in double; softmax uses expf on the
// GPU and a Cephes polynomial on the CPU); float64 1e-12. Integer results and ArgMax are exact.
#include <cmath>
#include <limits>
#include <vector>

#include "helpers.h"

using namespace linea;
using linea::testing::randn64;

namespace {

const Device kCpu = Device::cpu(), kGpu = Device::cuda();
const double kInf = std::numeric_limits<double>::infinity(), kNaN = std::numeric_limits<double>::quiet_NaN();

double tol(DType d) { return d == DType::Float64 ? 1e-12 : 1e-5; }

// |gpu - cpu| <= atol + rtol |cpu| elementwise (atol defaults to rtol), NaN matching NaN and
// infinities matching exactly; reports the first mismatch.
bool close(const Tensor& gpu, const Tensor& cpu, double rtol, double atol = -1) {
  REQUIRE(gpu.device() == kGpu);
  REQUIRE(gpu.shape() == cpu.shape());
  REQUIRE(gpu.dtype() == cpu.dtype());
  if (atol < 0) atol = rtol;
  const std::vector<double> g = gpu.to(kCpu).to_vector(), c = cpu.to_vector();
  for (size_t i = 0; i < g.size(); ++i) {
    const bool ok = std::isnan(c[i]) ? std::isnan(g[i])
                    : std::isinf(c[i]) ? g[i] == c[i]
                                       : std::abs(g[i] - c[i]) <= atol + rtol * std::abs(c[i]);
    if (!ok) {
      MESSAGE("element " << i << " of " << g.size() << ": gpu " << g[i] << " vs cpu " << c[i]);
      return false;
    }
  }
  return true;
}

// Tolerance of a reduction over n elements: exact for ArgMax/Max/Min; float64 sums of n values
// carry ~sqrt(n) rounding errors that depend on the summation order, so their absolute tolerance
// grows with n (a sum that cancels to ~0 has no relative accuracy to compare).
bool close_reduce(ReduceOp op, const Tensor& gpu, const Tensor& cpu, int64_t n) {
  if (op == ReduceOp::ArgMax || op == ReduceOp::Max || op == ReduceOp::Min) return close(gpu, cpu, 0.0);
  const double t = tol(cpu.dtype());
  return close(gpu, cpu, t, cpu.dtype() == DType::Float64 ? t + 1e-14 * static_cast<double>(n) : t);
}

// Float values from a vector, in dtype, on the CPU.
Tensor values(const std::vector<double>& v, Shape shape, DType dtype) { return from_vector(v, shape).to(dtype); }

// N(0, 1) * scale + shift in dtype, on the CPU.
Tensor normal(Shape shape, uint64_t seed, DType dtype, double scale = 1, double shift = 0) {
  return (randn64(std::move(shape), seed, false) * scale + shift).to(dtype);
}

// reduce(op) of x read as [outer, n, inner] on both backends; returns {gpu, cpu}.
std::pair<Tensor, Tensor> both_reduce(ReduceOp op, const Tensor& x, int64_t outer, int64_t n, int64_t inner) {
  const DType od = op == ReduceOp::ArgMax ? DType::Int64 : x.dtype();
  Tensor oc = empty({outer, inner}, od, kCpu), og = empty({outer, inner}, od, kGpu);
  backend(kCpu).reduce(op, x, oc, outer, n, inner);
  backend(kGpu).reduce(op, x.to(kGpu), og, outer, n, inner);
  return {og, oc};
}

struct Geometry {
  int64_t outer, n, inner;
};

// Every launch path of reduce: tiny rows (a thread each), warp rows, block rows, split rows,
// columns, split columns, and degenerate sizes.
const std::vector<Geometry> kGeometries = {
    {5, 3, 1},    {9, 17, 1},  {7, 1024, 1},   {3, 1025, 1}, {4, 10000, 1}, {1, 1000003, 1}, {64, 2000, 1},
    {2000, 50, 1}, {2, 5000, 3}, {3, 4, 700},   {1, 70001, 2}, {1, 1, 5},    {6, 1, 1},       {2, 3, 100000},
};

const std::vector<ReduceOp> kFloatOps = {ReduceOp::Sum, ReduceOp::Max, ReduceOp::Min, ReduceOp::ArgMax,
                                        ReduceOp::LogSumExp};

}  // namespace

TEST_CASE("gpu reduce matches the CPU: every op, float32 and float64, every launch path") {
  uint64_t seed = 1;
  for (DType dtype : {DType::Float32, DType::Float64}) {
    for (Geometry g : kGeometries) {
      Tensor x = normal({g.outer, g.n, g.inner}, seed++, dtype, 3);
      for (ReduceOp op : kFloatOps) {
        CAPTURE(dtype);
        CAPTURE(static_cast<int>(op));
        CAPTURE(fmt::format("[{}, {}, {}]", g.outer, g.n, g.inner));
        auto [gpu, cpu] = both_reduce(op, x, g.outer, g.n, g.inner);
        CHECK(close_reduce(op, gpu, cpu, g.n));
      }
    }
  }
}

TEST_CASE("gpu reduce of int64, uint8 and bool is exact, like the CPU") {
  Generator gen(7);
  for (Geometry g : {Geometry{5, 3, 1}, Geometry{40, 100, 1}, Geometry{3, 5000, 1}, Geometry{1, 300000, 1}, Geometry{4, 9, 33},
                     Geometry{1, 20000, 3}}) {
    const Shape shape{g.outer, g.n, g.inner};
    Tensor r = randn(shape, gen);
    const std::vector<Tensor> xs = {randint(-1000, 1000, shape, gen), randint(0, 256, shape, gen, DType::UInt8),
                                    gt(r, full(shape, 0.5))};
    for (const Tensor& x : xs) {
      for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Max, ReduceOp::Min, ReduceOp::ArgMax}) {
        CAPTURE(x.dtype());
        CAPTURE(static_cast<int>(op));
        CAPTURE(fmt::format("[{}, {}, {}]", g.outer, g.n, g.inner));
        auto [gpu, cpu] = both_reduce(op, x, g.outer, g.n, g.inner);
        CHECK(close(gpu, cpu, 0.0));
      }
    }
  }
}

TEST_CASE("gpu argmax returns the first index of the max, and the first NaN, across split pieces") {
  for (Geometry g : {Geometry{1, 100000, 1}, Geometry{2, 100, 1}, Geometry{1, 100000, 2}, Geometry{3, 40, 50}}) {
    for (DType dtype : {DType::Float32, DType::Float64}) {
      CAPTURE(dtype);
      CAPTURE(fmt::format("[{}, {}, {}]", g.outer, g.n, g.inner));
      std::vector<double> v = normal({g.outer * g.n * g.inner}, 11, dtype).to(DType::Float64).to_vector();
      auto at = [&](int64_t o, int64_t i, int64_t j) -> double& { return v[static_cast<size_t>((o * g.n + i) * g.inner + j)]; };
      // Ties of the max at three places, far apart (different pieces of a split row).
      for (int64_t o = 0; o < g.outer; ++o)
        for (int64_t j = 0; j < g.inner; ++j)
          for (int64_t i : {g.n * 9 / 10, g.n * 3 / 10 + 1, g.n * 7 / 10}) at(o, i, j) = 50;
      Tensor ties = values(v, {g.outer, g.n, g.inner}, dtype);
      auto [gt_, ct] = both_reduce(ReduceOp::ArgMax, ties, g.outer, g.n, g.inner);
      CHECK(close(gt_, ct, 0.0));
      CHECK(gt_.to(kCpu).to_vector()[0] == static_cast<double>(g.n * 3 / 10 + 1));
      // NaNs beat the max; the first NaN wins. Max/Min propagate the NaN.
      for (int64_t o = 0; o < g.outer; ++o)
        for (int64_t j = 0; j < g.inner; ++j)
          for (int64_t i : {g.n * 4 / 5, g.n / 2}) at(o, i, j) = kNaN;
      Tensor nans = values(v, {g.outer, g.n, g.inner}, dtype);
      for (ReduceOp op : {ReduceOp::ArgMax, ReduceOp::Max, ReduceOp::Min, ReduceOp::Sum}) {
        CAPTURE(static_cast<int>(op));
        auto [gn, cn] = both_reduce(op, nans, g.outer, g.n, g.inner);
        CHECK(close_reduce(op, gn, cn, g.n));
      }
    }
  }
}

TEST_CASE("gpu logsumexp is stable: large values, -inf rows, +inf, empty dims") {
  for (DType dtype : {DType::Float32, DType::Float64}) {
    CAPTURE(dtype);
    for (Geometry g : {Geometry{4, 3, 1}, Geometry{3, 10000, 1}, Geometry{1, 200000, 1}, Geometry{3, 500, 4}}) {
      CAPTURE(fmt::format("[{}, {}, {}]", g.outer, g.n, g.inner));
      Tensor big = normal({g.outer, g.n, g.inner}, 21, dtype, 1e4);
      auto [gb, cb] = both_reduce(ReduceOp::LogSumExp, big, g.outer, g.n, g.inner);
      CHECK(close_reduce(ReduceOp::LogSumExp, gb, cb, g.n));
      // Row 0 all -inf (gives -inf), row 1 with a +inf (gives +inf), the rest partly -inf.
      std::vector<double> v = normal({g.outer * g.n * g.inner}, 22, dtype, 100).to(DType::Float64).to_vector();
      for (size_t e = 0; e < v.size(); ++e) {
        const int64_t o = static_cast<int64_t>(e) / (g.n * g.inner);
        if (o == 0 || e % 3 == 0) v[e] = -kInf;
      }
      if (g.outer > 1) v[static_cast<size_t>(g.n * g.inner)] = kInf;
      Tensor special = values(v, {g.outer, g.n, g.inner}, dtype);
      for (ReduceOp op : kFloatOps) {
        CAPTURE(static_cast<int>(op));
        auto [gs, cs] = both_reduce(op, special, g.outer, g.n, g.inner);
        CHECK(close_reduce(op, gs, cs, g.n));
      }
    }
    // An empty reduced dim: sum 0, logsumexp -inf.
    Tensor empty_x = empty({3, 0, 2}, dtype, kCpu);
    for (ReduceOp op : {ReduceOp::Sum, ReduceOp::LogSumExp}) {
      auto [ge, ce] = both_reduce(op, empty_x, 3, 0, 2);
      CHECK(close(ge, ce, 0.0));
    }
  }
}

TEST_CASE("gpu reductions are bit-identical run to run (split rows, split columns)") {
  Tensor x = normal({1, 3000001, 1}, 31, DType::Float32).to(kGpu);
  Tensor c = normal({2, 100000, 3}, 32, DType::Float32).to(kGpu);
  auto run = [&](const Tensor& t, int64_t outer, int64_t n, int64_t inner) {
    Tensor out = empty({outer, inner}, DType::Float32, kGpu);
    backend(kGpu).reduce(ReduceOp::Sum, t, out, outer, n, inner);
    return out.to(kCpu).to_vector();
  };
  CHECK(run(x, 1, 3000001, 1) == run(x, 1, 3000001, 1));
  CHECK(run(c, 2, 100000, 3) == run(c, 2, 100000, 3));
}

TEST_CASE("gpu softmax / log_softmax and their backward match the CPU: short, warp-sized and long rows") {
  uint64_t seed = 100;
  for (DType dtype : {DType::Float32, DType::Float64}) {
    for (int64_t n : {1, 3, 64, 1024, 1025, 10000, 70000}) {
      const int64_t rows = n >= 10000 ? 3 : 37;
      for (double scale : {1.0, 1e4}) {
        for (bool log : {false, true}) {
          CAPTURE(dtype);
          CAPTURE(n);
          CAPTURE(scale);
          CAPTURE(log);
          Tensor x = normal({rows, n}, seed++, dtype, scale);
          Tensor yc = empty({rows, n}, dtype, kCpu), yg = empty({rows, n}, dtype, kGpu);
          backend(kCpu).softmax(x, yc, log);
          backend(kGpu).softmax(x.to(kGpu), yg, log);
          CHECK(close(yg, yc, tol(dtype)));
          Tensor dy = normal({rows, n}, seed++, dtype);
          Tensor dxc = empty({rows, n}, dtype, kCpu), dxg = empty({rows, n}, dtype, kGpu);
          backend(kCpu).softmax_backward(yc, dy, dxc, log);
          backend(kGpu).softmax_backward(yc.to(kGpu), dy.to(kGpu), dxg, log);
          CHECK(close(dxg, dxc, tol(dtype)));
        }
      }
    }
  }
}

TEST_CASE("gpu softmax with -inf entries: masked entries give 0, an all -inf row gives NaN like the CPU") {
  for (DType dtype : {DType::Float32, DType::Float64}) {
    for (int64_t n : {5, 3000}) {
      CAPTURE(dtype);
      CAPTURE(n);
      std::vector<double> v = normal({4 * n}, 5, dtype, 10).to(DType::Float64).to_vector();
      for (int64_t j = 0; j < n; ++j) {
        v[static_cast<size_t>(j)] = -kInf;                             // row 0: all masked
        if (j % 2) v[static_cast<size_t>(n + j)] = -kInf;              // row 1: every other one
        if (j > 0) v[static_cast<size_t>(2 * n + j)] = -kInf;         // row 2: one left
      }
      Tensor x = values(v, {4, n}, dtype);
      for (bool log : {false, true}) {
        Tensor yc = empty({4, n}, dtype, kCpu), yg = empty({4, n}, dtype, kGpu);
        backend(kCpu).softmax(x, yc, log);
        backend(kGpu).softmax(x.to(kGpu), yg, log);
        CHECK(close(yg, yc, tol(dtype)));
      }
    }
  }
}

namespace {

// LayerNorm (center) or RMSNorm forward + backward on both backends, with optional weight/bias
// and optional dweight/dbias, comparing every output.
void check_norm(bool center, int64_t rows, int64_t n, DType dtype, bool affine, double shift, uint64_t seed) {
  CAPTURE(center);
  CAPTURE(rows);
  CAPTURE(n);
  CAPTURE(dtype);
  CAPTURE(affine);
  CAPTURE(shift);
  // A row mean of values ~1e4 carries ~1e-12 of rounding that depends on the summation order,
  // and every xhat inherits it: float64 rows shifted by 1e4 are compared at 1e-9.
  const double t = dtype == DType::Float64 && shift != 0 ? 1e-9 : tol(dtype);
  Tensor x = normal({rows, n}, seed, dtype, 2, shift), dy = normal({rows, n}, seed + 1, dtype);
  Tensor w = affine ? normal({n}, seed + 2, dtype, 1, 1) : Tensor(), b = affine && center ? normal({n}, seed + 3, dtype) : Tensor();
  auto on = [](const Tensor& v, Device d) { return v.defined() ? v.to(d) : Tensor(); };
  auto fresh = [&](Shape s, Device d) { return empty(std::move(s), dtype, d); };
  // forward
  Tensor yc = fresh({rows, n}, kCpu), mc = fresh({rows}, kCpu), rc = fresh({rows}, kCpu);
  Tensor yg = fresh({rows, n}, kGpu), mg = fresh({rows}, kGpu), rg = fresh({rows}, kGpu);
  if (center) {
    backend(kCpu).layernorm_forward(x, w, b, 1e-5, yc, mc, rc);
    backend(kGpu).layernorm_forward(x.to(kGpu), on(w, kGpu), on(b, kGpu), 1e-5, yg, mg, rg);
    CHECK(close(mg, mc, t));
  } else {
    backend(kCpu).rmsnorm_forward(x, w, 1e-5, yc, rc);
    backend(kGpu).rmsnorm_forward(x.to(kGpu), on(w, kGpu), 1e-5, yg, rg);
  }
  CHECK(close(yg, yc, t));
  CHECK(close(rg, rc, t));
  // backward, from the CPU's saved statistics so both sides start from the same bits
  Tensor dxc = fresh({rows, n}, kCpu), dwc = fresh({n}, kCpu), dbc = center ? fresh({n}, kCpu) : Tensor();
  Tensor dxg = fresh({rows, n}, kGpu), dwg = fresh({n}, kGpu), dbg = center ? fresh({n}, kGpu) : Tensor();
  if (center) {
    backend(kCpu).layernorm_backward(dy, x, w, mc, rc, dxc, dwc, dbc);
    backend(kGpu).layernorm_backward(dy.to(kGpu), x.to(kGpu), on(w, kGpu), mc.to(kGpu), rc.to(kGpu), dxg, dwg, dbg);
    CHECK(close(dbg, dbc, t));
  } else {
    backend(kCpu).rmsnorm_backward(dy, x, w, rc, dxc, dwc);
    backend(kGpu).rmsnorm_backward(dy.to(kGpu), x.to(kGpu), on(w, kGpu), rc.to(kGpu), dxg, dwg);
  }
  CHECK(close(dxg, dxc, t));
  CHECK(close(dwg, dwc, t));
  // dx alone (no parameter gradients wanted)
  Tensor dx_only = fresh({rows, n}, kGpu);
  if (center)
    backend(kGpu).layernorm_backward(dy.to(kGpu), x.to(kGpu), on(w, kGpu), mc.to(kGpu), rc.to(kGpu), dx_only, Tensor(),
                                     Tensor());
  else
    backend(kGpu).rmsnorm_backward(dy.to(kGpu), x.to(kGpu), on(w, kGpu), rc.to(kGpu), dx_only, Tensor());
  CHECK(close(dx_only, dxc, t));
  // dx written over dy itself (backend.h allows it; autograd does it with a gradient nobody else
  // holds): the parameter sums must read dy before the rows pass overwrites it.
  Tensor dy_in_place = dy.to(kGpu), dw_in_place = fresh({n}, kGpu), db_in_place = center ? fresh({n}, kGpu) : Tensor();
  if (center)
    backend(kGpu).layernorm_backward(dy_in_place, x.to(kGpu), on(w, kGpu), mc.to(kGpu), rc.to(kGpu), dy_in_place,
                                     dw_in_place, db_in_place);
  else
    backend(kGpu).rmsnorm_backward(dy_in_place, x.to(kGpu), on(w, kGpu), rc.to(kGpu), dy_in_place, dw_in_place);
  CHECK(close(dy_in_place, dxg.to(kCpu), 0));
  CHECK(close(dw_in_place, dwg.to(kCpu), 0));
  if (center) CHECK(close(db_in_place, dbg.to(kCpu), 0));
}

}  // namespace

TEST_CASE("gpu layernorm / rmsnorm forward and backward match the CPU: row lengths, affine or not") {
  uint64_t seed = 200;
  for (DType dtype : {DType::Float32, DType::Float64})
    for (bool center : {true, false})
      for (auto [rows, n] : std::vector<std::pair<int64_t, int64_t>>{{5, 3}, {33, 768}, {7, 1025}, {4, 10000}, {5000, 3}, {1, 1}})
        for (bool affine : {true, false}) check_norm(center, rows, n, dtype, affine, 0.0, seed += 10);
}

TEST_CASE("gpu layernorm is stable for rows like 1e4 + noise, and a constant row stays finite") {
  for (DType dtype : {DType::Float32, DType::Float64}) {
    check_norm(true, 16, 512, dtype, true, 1e4, 300);
    check_norm(false, 16, 512, dtype, true, 1e4, 310);
    Tensor x = full({2, 300}, 7.0, dtype), y = empty({2, 300}, dtype, kGpu);
    Tensor m = empty({2}, dtype, kGpu), r = empty({2}, dtype, kGpu);
    backend(kGpu).layernorm_forward(x.to(kGpu), Tensor(), Tensor(), 1e-5, y, m, r);
    CHECK(close(y, zeros({2, 300}, dtype), 0.0));
  }
}

TEST_CASE("gpu layernorm backward: no rows gives zero dweight / dbias; sums are bit-identical run to run") {
  Tensor x = empty({0, 6}, DType::Float32, kGpu), dx = empty({0, 6}, DType::Float32, kGpu);
  Tensor m = empty({0}, DType::Float32, kGpu), r = empty({0}, DType::Float32, kGpu);
  Tensor dw = full({6}, 5.0, Options(DType::Float32, kGpu)), db = full({6}, 5.0, Options(DType::Float32, kGpu));
  backend(kGpu).layernorm_backward(x, x, Tensor(), m, r, dx, dw, db);
  CHECK(close(dw, zeros({6}), 0.0));
  CHECK(close(db, zeros({6}), 0.0));

  Tensor xg = normal({8192, 768}, 400, DType::Float32).to(kGpu), dy = normal({8192, 768}, 401, DType::Float32).to(kGpu);
  Tensor mg = empty({8192}, DType::Float32, kGpu), rg = empty({8192}, DType::Float32, kGpu);
  Tensor yg = empty({8192, 768}, DType::Float32, kGpu);
  backend(kGpu).layernorm_forward(xg, Tensor(), Tensor(), 1e-5, yg, mg, rg);
  auto dweight = [&] {
    Tensor dxg = empty({8192, 768}, DType::Float32, kGpu), dwg = empty({768}, DType::Float32, kGpu);
    backend(kGpu).layernorm_backward(dy, xg, Tensor(), mg, rg, dxg, dwg, Tensor());
    return dwg.to(kCpu).to_vector();
  };
  CHECK(dweight() == dweight());
}

TEST_CASE("gpu reduce / softmax / norm errors match the CPU's") {
  Tensor i = arange(12).reshape({3, 4}).to(kGpu);
  Tensor out = empty({3}, DType::Int64, kGpu);
  CHECK_THROWS_WITH_AS(backend(kGpu).reduce(ReduceOp::LogSumExp, i, out, 3, 4, 1),
                       doctest::Contains("[logsumexp] expected a floating dtype"), Error);
  CHECK_THROWS_WITH_AS(backend(kGpu).reduce(ReduceOp::ArgMax, i.to(DType::Float32), empty({3}, DType::Float32, kGpu), 3, 4, 1),
                       doctest::Contains("output dtype"), Error);
  CHECK_THROWS_WITH_AS(backend(kGpu).reduce(ReduceOp::Max, empty({3, 0}, DType::Float32, kGpu), empty({3}, DType::Float32, kGpu), 3, 0, 1),
                       doctest::Contains("empty dim"), Error);
  CHECK_THROWS_WITH_AS(backend(kGpu).softmax(i, empty({3, 4}, DType::Int64, kGpu), false),
                       doctest::Contains("[softmax] expected a floating dtype"), Error);
  Tensor x = empty({3, 4}, DType::Float32, kGpu);
  CHECK_THROWS_WITH_AS(backend(kGpu).layernorm_forward(x, empty({5}, DType::Float32, kGpu), Tensor(), 1e-5,
                                                       empty({3, 4}, DType::Float32, kGpu),
                                                       empty({3}, DType::Float32, kGpu), empty({3}, DType::Float32, kGpu)),
                       doctest::Contains("weight must be contiguous"), Error);
  // A CPU operand handed to the CUDA backend names the op and the device.
  CHECK_THROWS_WITH_AS(backend(kGpu).softmax(x.to(kCpu), x, false), doctest::Contains("expected a CUDA tensor"), Error);
}
