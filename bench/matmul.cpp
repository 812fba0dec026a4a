// linea::matmul against a direct cblas_sgemm call on the same OpenBLAS: the overhead of the op
// layer (checks, expand, output allocation) should vanish for all but tiny matrices.
//
// Prints which OpenBLAS is loaded and how it threads, then GFLOP/s (median of N timed runs after
// warm-up) for square float32 products, a batched product, the exact shapes of the ViT's and the
// char-GPT's linear layers (forward and backward), the same under bf16 dot products
// (MatmulPrecision::BF16: AVX512-BF16 where the CPU has it) against float32, and the 1024 product at
// 1 and 2 OpenMP threads. Usage: bench_matmul [runs]   (OMP_NUM_THREADS sets the threads of the main table)
#include <cblas.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include <linea/linea.h>

using namespace linea;

namespace {

double seconds(const std::function<void()>& f) {
  auto t0 = std::chrono::steady_clock::now();
  f();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Median wall times of `runs` calls of f and of g, after two untimed warm-up calls of each. The
// calls alternate, so a change in machine load hits both sides alike.
std::pair<double, double> median_seconds(int runs, const std::function<void()>& f, const std::function<void()>& g) {
  for (int i = 0; i < 2; ++i) f(), g();
  std::vector<double> tf, tg;
  for (int i = 0; i < runs; ++i) {
    tf.push_back(seconds(f));
    tg.push_back(seconds(g));
  }
  return {median(tf), median(tg)};
}

// The path of the libopenblas this process actually mapped (what the dynamic linker picked).
std::string loaded_openblas() {
  std::ifstream maps("/proc/self/maps");
  for (std::string line; std::getline(maps, line);)
    if (auto p = line.find('/'); p != std::string::npos && line.find("libopenblas") != std::string::npos)
      return line.substr(p);
  return "(not found in /proc/self/maps)";
}

bool same_values(const Tensor& x, const Tensor& y) {
  auto a = x.to_vector(), b = y.to_vector();
  for (size_t i = 0; i < a.size(); ++i)
    if (std::abs(a[i] - b[i]) > 1e-3 * (1 + std::abs(b[i]))) return false;
  return true;
}

struct Result {
  double linea_gflops, direct_gflops;
};

// [batch, n, n] @ [batch, n, n] float32 (batch 0 means plain 2-d), linea vs direct cblas_sgemm
// (one call per batch, each free to use every BLAS thread).
Result compare(int64_t batch, int64_t n, int runs) {
  Generator g(42);
  Shape s = batch ? Shape{batch, n, n} : Shape{n, n};
  Tensor a = randn(s, g), b = randn(s, g);
  Tensor c = empty(s);
  const float *pa = a.data<float>(), *pb = b.data<float>();
  float* pc = c.data<float>();
  const int64_t nb = std::max<int64_t>(batch, 1);
  const double flops = 2.0 * nb * n * n * n;

  auto [t_linea, t_direct] = median_seconds(
      runs, [&] { Tensor out = matmul(a, b); },
      [&] {
        for (int64_t i = 0; i < nb; ++i)
          cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, pa + i * n * n, n, pb + i * n * n,
                      n, 0.0f, pc + i * n * n, n);
      });
  // Same numbers from both paths, so the comparison is fair.
  LINEA_CHECK(same_values(matmul(a, b), c), "[bench] linea and direct results differ");
  return {flops / t_linea / 1e9, flops / t_direct / 1e9};
}

// The products the example models run: x [M, K] @ Wᵀ with W [N, K] (a Linear's forward), and
// its two backward products, dX = G [M, N] @ W [N, K] and dW = Gᵀ [N, M] @ x [M, K]. linea's
// matmul (with the transposed views Linear passes) against one direct cblas_sgemm call.
void model_rows(int runs, const std::function<void(const char*, Result)>& row) {
  struct Shape3 {
    const char* name;
    int64_t M, K, N;
  };
  const Shape3 shapes[] = {
      {"ViT qkv", 128 * 64, 64, 192}, {"ViT proj", 128 * 64, 64, 64}, {"ViT fc1", 128 * 64, 64, 128},
      {"ViT fc2", 128 * 64, 128, 64}, {"GPT qkv", 12 * 64, 128, 384}, {"GPT fc1", 12 * 64, 128, 512},
      {"GPT fc2", 12 * 64, 512, 128}, {"GPT head", 12 * 64, 128, 65}};
  Generator g(7);
  for (const Shape3& s : shapes) {
    const Tensor x = randn({s.M, s.K}, g), w = randn({s.N, s.K}, g), gr = randn({s.M, s.N}, g);
    Tensor c = empty({s.M, s.N}), dx = empty({s.M, s.K}), dw = empty({s.N, s.K});
    const float *px = x.data<float>(), *pw = w.data<float>(), *pg = gr.data<float>();
    const double fl = 2.0 * double(s.M * s.K * s.N);
    auto gf = [&](std::pair<double, double> t) { return Result{fl / t.first / 1e9, fl / t.second / 1e9}; };
    row(fmt::format("{} x@Wt {}x{}x{}", s.name, s.M, s.K, s.N).c_str(),
        gf(median_seconds(
            runs, [&] { Tensor o = matmul(x, w.t()); },
            [&] {
              cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, s.M, s.N, s.K, 1.0f, px, s.K, pw, s.K, 0.0f,
                          c.data<float>(), s.N);
            })));
    row(fmt::format("{} dX=G@W", s.name).c_str(),
        gf(median_seconds(
            runs, [&] { Tensor o = matmul(gr, w); },
            [&] {
              cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, s.M, s.K, s.N, 1.0f, pg, s.N, pw, s.K, 0.0f,
                          dx.data<float>(), s.K);
            })));
    row(fmt::format("{} dW=Gt@x", s.name).c_str(),
        gf(median_seconds(
            runs, [&] { Tensor o = matmul(gr.t(), x); },
            [&] {
              cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, s.N, s.K, s.M, 1.0f, pg, s.N, px, s.K, 0.0f,
                          dw.data<float>(), s.K);
            })));
  }
}

// linea's matmul under AutocastGuard(BF16) (bf16 dot products, float32 sums) against the same
// call in float32, for square products and the models' shapes (forward and both backward products).
void bf16_rows(int runs, const std::function<void(const char*, Result)>& row) {
  auto time_pair = [&](const char* name, double flops, const std::function<void()>& f) {
    auto [t16, t32] = median_seconds(
        runs,
        [&] {
          AutocastGuard bf16;
          f();
        },
        f);
    row(name, {flops / t16 / 1e9, flops / t32 / 1e9});
  };
  Generator g(11);
  for (int64_t n : {256, 512, 1024, 2048}) {
    const Tensor a = randn({n, n}, g), b = randn({n, n}, g);
    time_pair(fmt::format("{0}x{0} @ {0}x{0}", n).c_str(), 2.0 * n * n * n, [&] { Tensor o = matmul(a, b); });
  }
  struct Shape3 {
    const char* name;
    int64_t M, K, N;
  };
  const Shape3 shapes[] = {{"ViT qkv", 128 * 64, 64, 192}, {"ViT fc1", 128 * 64, 64, 128},
                           {"ViT fc2", 128 * 64, 128, 64}, {"GPT qkv", 12 * 64, 128, 384},
                           {"GPT fc2", 12 * 64, 512, 128}, {"GPT head", 12 * 64, 128, 65}};
  for (const Shape3& s : shapes) {
    const Tensor x = randn({s.M, s.K}, g), w = randn({s.N, s.K}, g), gr = randn({s.M, s.N}, g);
    const double fl = 2.0 * double(s.M * s.K * s.N);
    time_pair(fmt::format("{} x@Wt {}x{}x{}", s.name, s.M, s.K, s.N).c_str(), fl, [&] { Tensor o = matmul(x, w.t()); });
    time_pair(fmt::format("{} dX=G@W", s.name).c_str(), fl, [&] { Tensor o = matmul(gr, w); });
    time_pair(fmt::format("{} dW=Gt@x", s.name).c_str(), fl, [&] { Tensor o = matmul(gr.t(), x); });
  }
}

}  // namespace

int main(int argc, char** argv) {
  const int runs = argc > 1 ? std::atoi(argv[1]) : 10;
  const int par = openblas_get_parallel();
  std::printf("OpenBLAS loaded: %s\n", loaded_openblas().c_str());
  std::printf("openblas_get_config(): %s\n", openblas_get_config());
  std::printf("openblas_get_parallel(): %d (%s)\n", par,
              par == 2 ? "OpenMP: shares linea's libgomp pool" : par == 1 ? "pthreads: its own thread pool" : "serial");
  std::printf("omp_get_max_threads(): %d   openblas_get_num_threads(): %d   runs per point: %d (median)\n\n",
              omp_get_max_threads(), openblas_get_num_threads(), runs);

  std::printf("%-34s %12s %12s %8s\n", "float32 matmul", "linea GF/s", "direct GF/s", "ratio");
  auto row = [&](const char* name, Result r) {
    std::printf("%-34s %12.1f %12.1f %8.3f\n", name, r.linea_gflops, r.direct_gflops, r.linea_gflops / r.direct_gflops);
  };
  for (int64_t n : {256, 512, 1024, 2048}) {
    const int r = n >= 2048 ? std::max(3, runs / 2) : runs;
    row(fmt::format("{0}x{0} @ {0}x{0}", n).c_str(), compare(0, n, r));
  }
  row("[32,256,256] batched", compare(32, 256, runs));

  std::printf("\nthe example models' products (a Linear's forward and its two backward products):\n");
  model_rows(runs, row);

  std::printf("\n%-34s %12s %12s %8s\n", "bf16 dot products (AutocastGuard)", "bf16 GF/s", "fp32 GF/s", "ratio");
  bf16_rows(runs, row);

  std::printf("\nthreads (omp_set_num_threads; OpenMP OpenBLAS follows it), 1024x1024:\n");
  const int max_threads = omp_get_max_threads();
  for (int t : {1, 2}) {
    omp_set_num_threads(t);
    row(fmt::format("  {} thread{}", t, t > 1 ? "s" : "").c_str(), compare(0, 1024, runs));
  }
  omp_set_num_threads(max_threads);
  return 0;
}
