// Forward + backward of one attention layer's functional op (B=1, H=4, d=dv=32, float32) for
// N = 256 .. 16384: softmax (fused, tiled), linear (non-causal and causal), MHLA non-causal
// (M = 16 blocks) and MHLA causal (64-token chunks).
//
// Time: median wall time of a forward + backward (sum(o·g) with a fixed g) over several runs
// after a warm-up. Memory: each (kind, N) runs in its own forked process; the peak resident set
// (getrusage ru_maxrss) minus the resident set at the start of that process is the peak extra
// memory of inputs, outputs, saved tensors, gradients and workspace together; the start is taken
// after one forward + backward at N = 256, so thread pools and BLAS's own buffers are already
// there (the BLAS buffers are fixed-size, not N-dependent). The parent does
// no OpenMP/BLAS work before forking (libgomp's thread pool does not survive a fork).
// Usage: bench_attention [max_N]   (OMP_NUM_THREADS sets the threads; default: all cores)
//
// GPU mode, bench_attention --device cuda [--max-seconds S]: the configuration, B=8, H=16,
// d=dv=64, float32, N = 4096, 16384, 65536, for MHLA (non-causal M=16 blocks; causal 64-token
// chunks) and softmax attention (non-causal, causal): median time of a forward + backward (the
// device synchronised around it, after a warm-up), achieved TFLOP/s and GB/s, and MHLA's
// speed-up over softmax at the same N and causality. A run predicted (from the previous N) to
// need more than S seconds (default 60) for its warm-up + repeats is skipped, and so is one that
// runs out of device memory; both say so.
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <linea/linea.h>

using namespace linea;
namespace F = linea::nn::functional;

namespace {

const char* kKinds[] = {"softmax", "linear", "linear causal", "mhla (M=16)", "mhla causal (C=64)"};
constexpr int kNumKinds = 5;

double rss_mb() {
  std::ifstream statm("/proc/self/statm");
  long pages = 0, resident = 0;
  statm >> pages >> resident;
  return resident * double(sysconf(_SC_PAGESIZE)) / (1 << 20);
}

double peak_rss_mb() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_maxrss / 1024.0;  // Linux reports KiB
}

Tensor run_kind(int kind, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& mix) {
  F::MHLAOptions mo;
  switch (kind) {
    case 0: return F::softmax_attention(q, k, v);
    case 1: return F::linear_attention(q, k, v);
    case 2: return F::linear_attention(q, k, v, {true});
    case 3: mo.block_len = q.size(2) / 16; return F::mhla(q, k, v, mix, mo);
    default: mo.causal = true, mo.block_len = 64, mo.feature_map = F::FeatureMap::Relu; return F::mhla(q, k, v, mix, mo);
  }
}

struct Result {
  double ms, mb;
};

// One (kind, N) measurement; runs in a child process.
Result measure(int kind, int64_t N) {
  if (N > 256) measure(kind, 256);
  const double rss0 = rss_mb();
  Generator gen(7);
  const Shape s{1, 4, N, 32};
  Tensor q = randn(s, gen).requires_grad_(), k = randn(s, gen).requires_grad_(), v = randn(s, gen).requires_grad_();
  Tensor g = randn(s, gen);
  Tensor mix;
  if (kind == 3) mix = nn::block_distance_mix(4).requires_grad_();
  if (kind == 4) mix = nn::causal_mix(N / 64).requires_grad_();
  auto step = [&] {
    auto t0 = std::chrono::steady_clock::now();
    run_kind(kind, q, k, v, mix).backward(g);
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  };
  double first = step();  // warm-up (allocator, thread pool, BLAS buffers)
  std::vector<double> times;
  double total = 0;
  const int max_runs = first > 2000 ? 2 : 15;
  while (times.size() < 3 || (total < 3000 && int(times.size()) < max_runs)) {
    if (int(times.size()) >= max_runs) break;
    times.push_back(step());
    total += times.back();
  }
  std::sort(times.begin(), times.end());
  return {times[times.size() / 2], peak_rss_mb() - rss0};
}

// Runs measure() in a fresh process and reads its result back through a pipe.
Result measure_forked(int kind, int64_t N) {
  int fd[2];
  if (pipe(fd) != 0) std::exit(1);
  pid_t pid = fork();
  if (pid == 0) {
    close(fd[0]);
    Result r = measure(kind, N);
    if (write(fd[1], &r, sizeof r) != sizeof r) _exit(1);
    _exit(0);
  }
  close(fd[1]);
  Result r{-1, -1};
  if (read(fd[0], &r, sizeof r) != sizeof r) r = {-1, -1};
  close(fd[0]);
  waitpid(pid, nullptr, 0);
  return r;
}

// ---------------------------------------------------------------- GPU mode
//
// FLOPs per (batch, head) of one forward, from the cost formulas of docs/mhla.md (the spec's §4),
// with d = dv:
//   MHLA non-causal:  4N·d·(dv+1) + 2M²·d·(dv+1)           summaries + outputs, mixing
//   MHLA causal:      4N·d·dv + 2N·C·(d+dv) + M(M−1)·d·dv   state products, intra-chunk, mixing
//   softmax:          4N²·d  (QKᵀ and PV; causal: half)
// A backward does two products for each product of the forward, so forward + backward = 3×
// forward (recomputation, if a kernel does any, is not counted: this is the useful work).
// Bytes: the minimum a fused forward + backward must move, float32: q, k, v and dO read once, O,
// dq, dk and dv written once (8·N·d floats per pair), plus the mixing matrix and its gradient.
struct GpuKind {
  const char* name;
  bool mhla, causal;
};
constexpr GpuKind kGpuKinds[] = {
    {"mhla", true, false}, {"mhla causal", true, true}, {"softmax", false, false}, {"softmax causal", false, true}};
constexpr int64_t kB = 8, kH = 16, kD = 64, kBlocks = 16, kChunk = 64;

int64_t gpu_blocks(const GpuKind& k, int64_t N) { return k.causal ? (N + kChunk - 1) / kChunk : kBlocks; }

double gpu_flops(const GpuKind& k, int64_t N) {
  const double n = double(N), d = double(kD), M = double(gpu_blocks(k, N)), C = double(kChunk);
  double fwd = 0;
  if (k.mhla && !k.causal) fwd = 4 * n * d * (d + 1) + 2 * M * M * d * (d + 1);
  else if (k.mhla) fwd = 4 * n * d * d + 2 * n * C * (d + d) + M * (M - 1) * d * d;
  else fwd = 4 * n * n * d * (k.causal ? 0.5 : 1.0);
  return 3 * fwd * double(kB * kH);
}

double gpu_bytes(const GpuKind& k, int64_t N) {
  const double M = k.mhla ? double(gpu_blocks(k, N)) : 0;
  return 4.0 * (8.0 * double(kB * kH * N * kD) + 2 * M * M);
}

// Median seconds of a forward + backward of one kind at N; negative when skipped (why in `why`).
double gpu_measure(const GpuKind& k, int64_t N, double predicted_s, double max_seconds, std::string& why) {
  constexpr int kRuns = 5;
  if (predicted_s * (1 + kRuns) > max_seconds) {
    why = fmt::format("skipped: ~{:.0f} s predicted for 1 + {} runs (> {} s)", predicted_s * (1 + kRuns), kRuns,
                      max_seconds);
    return -1;
  }
  try {
    Generator gen(7);
    const Device cuda = Device::cuda();
    const Shape s{kB, kH, N, kD};
    Tensor q = randn(s, gen).to(cuda).requires_grad_(), kk = randn(s, gen).to(cuda).requires_grad_();
    Tensor v = randn(s, gen).to(cuda).requires_grad_();
    const Tensor g = randn(s, gen).to(cuda);
    Tensor mix;
    F::MHLAOptions mo{.causal = k.causal, .block_len = k.causal ? kChunk : N / kBlocks};
    if (k.mhla) mix = k.causal ? nn::causal_mix(gpu_blocks(k, N)) : nn::block_distance_mix(4);  // 4x4 = kBlocks
    if (k.mhla) mix = mix.to(cuda).requires_grad_();
    if (k.mhla && k.causal) mo.feature_map = F::FeatureMap::Relu;
    auto step = [&] {
      for (Tensor* t : {&q, &kk, &v, &mix})
        if (t->defined()) t->zero_grad();
      cuda::synchronize();
      const auto t0 = std::chrono::steady_clock::now();
      Tensor o = k.mhla ? F::mhla(q, kk, v, mix, mo) : F::softmax_attention(q, kk, v, {.causal = k.causal});
      o.backward(g);
      cuda::synchronize();
      return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    };
    step();  // warm-up: the allocator's first blocks, cuBLAS handles and workspaces
    std::vector<double> times;
    for (int i = 0; i < kRuns; ++i) times.push_back(step());
    std::sort(times.begin(), times.end());
    return times[times.size() / 2];
  } catch (const Error& e) {  // out of device memory, most likely: say so and go on
    why = fmt::format("skipped: {}", std::string(e.what()).substr(0, 100));
    cuda::empty_cache();
    return -1;
  }
}

int run_gpu(double max_seconds) {
  if (!cuda::is_available()) {
    std::printf("bench_attention --device cuda: SKIPPED (no CUDA device)\n");
    return 0;
  }
  const std::vector<int64_t> Ns = {4096, 16384, 65536};
  std::printf("attention forward+backward on the GPU, B=%lld H=%lld d=dv=%lld float32; MHLA M=%lld blocks "
              "(non-causal), %lld-token chunks (causal); median of 5 after a warm-up\n",
              (long long)kB, (long long)kH, (long long)kD, (long long)kBlocks, (long long)kChunk);
  std::printf("%-15s %7s %11s %9s %9s  %s\n", "kind", "N", "ms", "TFLOP/s", "GB/s", "");
  double secs[4][3];
  for (int ki = 0; ki < 4; ++ki) {
    const GpuKind& k = kGpuKinds[ki];
    double prev = 0;
    for (size_t i = 0; i < Ns.size(); ++i) {
      // Predict from the previous N: softmax grows as N², MHLA (about) as N.
      const double r = i ? double(Ns[i]) / double(Ns[i - 1]) : 0;
      const double predicted = i ? prev * (k.mhla ? r : r * r) : 0;
      std::string why;
      const double t = secs[ki][i] = gpu_measure(k, Ns[i], predicted, max_seconds, why);
      if (t < 0) {
        std::printf("%-15s %7lld  %s\n", k.name, (long long)Ns[i], why.c_str());
        prev = predicted > 0 ? predicted : 1e9;  // larger N would be skipped too
      } else {
        std::printf("%-15s %7lld %11.3f %9.2f %9.1f\n", k.name, (long long)Ns[i], t * 1e3,
                    gpu_flops(k, Ns[i]) / t / 1e12, gpu_bytes(k, Ns[i]) / t / 1e9);
        prev = t;
      }
      std::fflush(stdout);
    }
  }
  std::printf("\nspeed-up of MHLA over softmax attention (time softmax / time MHLA)\n");
  for (int c = 0; c < 2; ++c) {
    std::printf("%-15s", c ? "causal" : "non-causal");
    for (size_t i = 0; i < Ns.size(); ++i) {
      const double m = secs[c][i], sm = secs[2 + c][i];
      if (m > 0 && sm > 0) std::printf("  N=%lld: %.1fx", (long long)Ns[i], sm / m);
      else std::printf("  N=%lld: -", (long long)Ns[i]);
    }
    std::printf("\n");
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::vector<std::string> args(argv + 1, argv + argc);
  if (!args.empty() && args[0] == "--device") {
    if (args.size() < 2 || (args[1] != "cuda" && args[1] != "cpu")) {
      std::fprintf(stderr, "usage: bench_attention [max_N] | --device cuda [--max-seconds S]\n");
      return 2;
    }
    const bool budget = args.size() >= 4 && args[2] == "--max-seconds";
    if (args[1] == "cuda") return run_gpu(budget ? std::atof(args[3].c_str()) : 60);
  }
  const int64_t max_n = argc > 1 && args[0] != "--device" ? std::atoll(argv[1]) : 16384;
  std::vector<int64_t> Ns;
  for (int64_t n : {256, 1024, 4096, 16384})
    if (n <= max_n) Ns.push_back(n);
  const char* threads = std::getenv("OMP_NUM_THREADS");
  std::printf("attention forward+backward, B=1 H=4 d=dv=32 float32, OMP_NUM_THREADS=%s\n", threads ? threads : "(all)");
  std::printf("median ms / peak extra RSS MB\n\n");
  std::vector<std::vector<Result>> res(kNumKinds);
  for (int kind = 0; kind < kNumKinds; ++kind)
    for (int64_t n : Ns) {
      res[kind].push_back(measure_forked(kind, n));
      std::fprintf(stderr, "  %s N=%lld: %.2f ms %.1f MB\n", kKinds[kind], (long long)n, res[kind].back().ms,
                   res[kind].back().mb);
    }
  std::printf("%-20s", "kind");
  for (int64_t n : Ns) std::printf("  %18s", ("N=" + std::to_string(n)).c_str());
  std::printf("  t(16384)/t(1024)\n");
  auto idx = [&](int64_t n) { return int(std::find(Ns.begin(), Ns.end(), n) - Ns.begin()); };
  for (int kind = 0; kind < kNumKinds; ++kind) {
    std::printf("%-20s", kKinds[kind]);
    for (const Result& r : res[kind]) std::printf("  %9.2f ms %5.0f MB", r.ms, r.mb);
    if (idx(1024) < int(Ns.size()) && idx(16384) < int(Ns.size()))
      std::printf("  %8.1f", res[kind][idx(16384)].ms / res[kind][idx(1024)].ms);
    std::printf("\n");
  }
  for (auto [kind, base, label] : {std::tuple{3, 1, "mhla / linear"}, std::tuple{4, 2, "mhla causal / lin c."}}) {
    std::printf("%-20s", label);
    for (size_t i = 0; i < Ns.size(); ++i) std::printf("  %16.2fx", res[kind][i].ms / res[base][i].ms);
    std::printf("\n");
  }
  return 0;
}
