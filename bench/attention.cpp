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

}  // namespace

int main(int argc, char** argv) {
  const int64_t max_n = argc > 1 ? std::atoll(argv[1]) : 16384;
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
