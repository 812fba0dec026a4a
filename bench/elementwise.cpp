// How close the elementwise kernels come to memory bandwidth: y = gelu(x * w + b) with
// x [4096, 1024] float32 and w, b [1024] rows broadcast over x (a linear layer's epilogue).
//
// Each op streams its input and output once, so the chain moves 3 x (16 MiB read + 16 MiB write)
// (w and b are 4 KiB each, counted but negligible). Effective GB/s = bytes moved / median time,
// compared against a copy of the same 16 MiB in the same process (memcpy on one thread, and an
// OpenMP copy loop on all threads) as the bandwidth bound. A hand-fused one-pass loop shows what
// fusing the chain would buy (it moves a third of the bytes).
//
// Usage: bench_elementwise [runs]   (OMP_NUM_THREADS sets the threads of the first table; the
// 1- and 2-thread tables follow)
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <vector>

#include <linea/linea.h>
#include <linea/tensor/backend.h>  // the GELU + grad kernel, timed directly

using namespace linea;

namespace {

constexpr int64_t kRows = 4096, kCols = 1024;

// Median wall time of `runs` calls of f, after two untimed warm-up calls.
double median_seconds(int runs, const std::function<void()>& f) {
  f();
  f();
  std::vector<double> t;
  for (int i = 0; i < runs; ++i) {
    auto t0 = std::chrono::steady_clock::now();
    f();
    t.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

struct Row {
  const char* name;
  double bytes;  // read + written
  std::function<void()> f;
};

void table(int threads, int runs, const std::vector<Row>& rows) {
  omp_set_num_threads(threads);
  std::printf("\nthreads = %d\n%-34s %9s %9s %8s\n", threads, "op", "ms", "GB/s", "% bound");
  double bound = 0;
  for (const Row& r : rows) {
    const double s = median_seconds(runs, r.f);
    const double gbs = r.bytes / s / 1e9;
    if (r.name[0] == '=') bound = std::max(bound, gbs);  // rows starting with '=' are the bounds
    std::printf("%-34s %9.3f %9.2f %7.0f%%\n", r.name, s * 1e3, gbs, 100 * gbs / bound);
  }
}

}  // namespace

int main(int argc, char** argv) {
  const int runs = argc > 1 ? std::atoi(argv[1]) : 20;
  Generator gen(0);
  Tensor x = randn({kRows, kCols}, gen);
  Tensor w = randn({kCols}, gen);
  Tensor b = randn({kCols}, gen);
  Tensor xw = x * w, h = xw + b;
  const double n = static_cast<double>(x.numel()), mat = 4 * n, vec = 4.0 * kCols;

  // Bandwidth bounds: copy the same 16 MiB.
  std::vector<float> src(x.numel(), 1.0f), dst(x.numel());
  auto omp_copy = [&] {
    const float* s = src.data();
    float* d = dst.data();
    const int64_t m = static_cast<int64_t>(src.size());
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < m; ++i) d[i] = s[i];
  };
  auto memcpy_copy = [&] { std::memcpy(dst.data(), src.data(), src.size() * sizeof(float)); };

  // The same chain as one hand-written pass (exact gelu), the best an unfused op layer could hope for.
  Tensor fused = empty({kRows, kCols});
  auto fused_loop = [&] {
    const float *px = x.data<float>(), *pw = w.data<float>(), *pb = b.data<float>();
    float* py = fused.data<float>();
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < kRows; ++r)
      for (int64_t c = 0; c < kCols; ++c) {
        const float v = px[r * kCols + c] * pw[c] + pb[c];
        py[r * kCols + c] = 0.5f * v * std::erfc(-v * 0.70710678f);
      }
  };

  Tensor y2 = empty_like(h), d2 = empty_like(h);
  const std::vector<Row> rows = {
      {"= memcpy 16 MiB (1 thread)", 2 * mat, memcpy_copy},
      {"= omp copy 16 MiB", 2 * mat, omp_copy},
      {"mul x*w (row broadcast)", 2 * mat + vec, [&] { (void)(x * w); }},
      {"add xw+b (row broadcast)", 2 * mat + vec, [&] { (void)(xw + b); }},
      {"gelu erf", 2 * mat, [&] { (void)gelu(h); }},
      {"gelu erf backward", 3 * mat, [&] { (void)activation_backward(BinaryOp::GeluErfBackward, x, h); }},
      // What training runs: y and f'(x) in one pass, then the backward's product.
      {"gelu erf + grad", 3 * mat, [&] { backend(Device::cpu()).activation_with_grad(UnaryOp::GeluErf, h, y2, d2); }},
      {"gelu backward g*f'(x)", 3 * mat, [&] { (void)(x * d2); }},
      {"gelu tanh", 2 * mat, [&] { (void)gelu(h, GeluApprox::Tanh); }},
      {"relu", 2 * mat, [&] { (void)relu(h); }},
      {"chain gelu(x*w+b)", 6 * mat + 2 * vec, [&] { (void)gelu(x * w + b); }},
      {"fused one-pass loop (reference)", 2 * mat + 2 * vec, fused_loop},
  };

  std::printf("bench_elementwise: x [%lld, %lld] float32 (%.0f MiB), median of %d runs after 2 warm-ups\n",
              static_cast<long long>(kRows), static_cast<long long>(kCols), mat / (1 << 20), runs);
  std::printf("GB/s = bytes read + written / time; %% bound = against the faster copy of the table\n");
  const int max_threads = omp_get_max_threads();
  table(max_threads, runs, rows);
  for (int t : {1, 2})
    if (t != max_threads) table(t, runs, rows);

  // Sanity: the op chain and the fused loop agree.
  Tensor y = gelu(x * w + b);
  fused_loop();
  auto a = y.to_vector(), c = fused.to_vector();
  double err = 0;
  for (size_t i = 0; i < a.size(); ++i) err = std::max(err, std::abs(a[i] - c[i]));
  std::printf("\nmax |chain - fused| = %.3g\n", err);
  return err < 1e-4 ? 0 : 1;
}
