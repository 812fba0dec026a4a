// `--bench N` in the examples: time N training steps after 3 warm-ups and print one table row per
// attention kind (median ms per step and per phase, items/s, peak memory, and the blocks of
// tensor storage taken from the C library per timed step: 0 once the host caching allocator,
// tensor/cpu/cpu_allocator.h, holds every size the step uses). With `--profile on`, one more
// step runs under linea::Profiler and its per-op table is printed before the kind's row (its peak
// RSS then includes the 128 MiB that measure_cpu_ceilings touches first).
//
// On the CPU, with `--attn all` each kind runs in a child process of its own, so each peak RSS
// (getrusage) belongs to that kind alone; that must start before this process runs any OpenMP
// code (libgomp does not survive fork). On CUDA the kinds run one after another in this process
// (a CUDA context does not survive fork either; nor does MPI, so under mpirun too), and the peak
// is the caching allocator's peak of live device memory (linea::cuda::memory_stats), reset
// before each kind. GPU work is asynchronous: the clock is read only after linea::cuda::synchronize(), so a step's time is
// its GPU time too. (The per-phase split comes from the trainer's own clocks, which only wait
// where the step reads a value back, e.g. loss.item(): on the GPU it is indicative.)
#pragma once
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <initializer_list>
#include <string>
#include <vector>

#include <fmt/core.h>
#include <linea/dist/data_parallel.h>
#include <linea/linea.h>

struct BenchRow {
  double step_ms, forward_ms, backward_ms, update_ms, items_per_s, peak_mb;  // peak RSS, or GPU memory on CUDA
  double mallocs_per_step;  // host storage blocks from the C library per timed step (CPU)
  int64_t params = 0;       // the model's parameter count (set by the caller)
};

// One more step under linea::Profiler: its per-op table against the machine's ceilings, and what
// the step asked of the host allocator.
template <class Step>
void print_profile(const std::string& attn, const linea::Ceilings& ceilings, bool by_shape, Step step) {
  const auto before = linea::cpu::host_memory_stats();
  linea::Profiler::start(by_shape);
  const auto t = std::chrono::steady_clock::now();
  step();
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
  linea::Profiler::stop();
  const auto after = linea::cpu::host_memory_stats();
  fmt::print("\nprofile of one {} training step (steady state, after the timed steps):\n{}", attn,
             linea::profile_table(linea::Profiler::rows(), seconds, ceilings));
  fmt::print("host tensor storage this step: {} blocks from the C library, {} freed to it, {} reused from the cache; "
             "{:.1f} MiB live at the peak, {:.1f} MiB cached\n\n",
             after.system_allocs - before.system_allocs, after.system_frees - before.system_frees,
             after.cache_hits - before.cache_hits, double(after.peak_allocated) / (1 << 20),
             double(after.cached) / (1 << 20));
  std::fflush(stdout);
}

// step() runs one training step on `device` and returns its per-phase times (.forward_s, ...).
// A non-empty profile_attn names the kind whose profile (print_profile) follows the timed steps;
// profile_shapes splits its gemm rows by operand shape.
template <class Step>
BenchRow time_steps(int64_t n, double items_per_step, linea::Device device, Step step,
                    const std::string& profile_attn = "", bool profile_shapes = false) {
  auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  };
  const bool gpu = device.is_cuda();
  if (gpu) linea::cuda::reset_peak_stats();
  linea::Ceilings ceilings;
  if (!profile_attn.empty()) {  // before the steps, its buffers handed back at once
    ceilings = linea::measure_cpu_ceilings();
    linea::cpu::empty_host_cache();
  }
  for (int i = 0; i < 3; ++i) step();
  const int64_t mallocs_before = linea::cpu::host_memory_stats().system_allocs;
  std::vector<double> total, fwd, bwd, upd;
  for (int64_t i = 0; i < n; ++i) {
    if (gpu) linea::cuda::synchronize();  // nothing of the previous step still running
    const auto t = std::chrono::steady_clock::now();
    const auto s = step();
    if (gpu) linea::cuda::synchronize();  // the step's kernels have finished
    total.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t).count());
    fwd.push_back(s.forward_s * 1e3);
    bwd.push_back(s.backward_s * 1e3);
    upd.push_back(s.update_s * 1e3);
  }
  const double mallocs = double(linea::cpu::host_memory_stats().system_allocs - mallocs_before) / double(n);
  if (!profile_attn.empty()) print_profile(profile_attn, ceilings, profile_shapes, step);
  double peak_mb = 0;
  if (gpu) {
    peak_mb = double(linea::cuda::memory_stats().peak_allocated) / (1 << 20);
  } else {
    rusage ru{};
    getrusage(RUSAGE_SELF, &ru);
    peak_mb = ru.ru_maxrss / 1024.0;
  }
  const double ms = median(total);
  return {ms, median(fwd), median(bwd), median(upd), items_per_step * 1e3 / ms, peak_mb, mallocs};
}

inline void print_bench_header(const char* items, linea::Device device) {
  fmt::print("{:<8} {:>9} {:>8} {:>9} {:>7} {:>9} {:>9} {:>8} {:>9}\n", "attn", "step ms", "forward", "backward",
             "update", items, device.is_cuda() ? "GPU MB" : "peak MB", "mallocs", "params");
  std::fflush(stdout);
}

inline void print_bench_row(const std::string& attn, const BenchRow& r) {
  fmt::print("{:<8} {:>9.2f} {:>8.2f} {:>9.2f} {:>7.2f} {:>9.0f} {:>9.0f} {:>8.1f} {:>9}\n", attn, r.step_ms,
             r.forward_ms, r.backward_ms, r.update_ms, r.items_per_s, r.peak_mb, r.mallocs_per_step, r.params);
  std::fflush(stdout);
}

// Runs row(attn) for `attn`, or for each kind when attn is "all" (on the CPU each in a child of
// its own, on CUDA in turn, returning the cached device memory between kinds).
// Under mpirun: what the gradient all-reduce cost each step, from DataParallel's clocks (averaged
// over the warm-up and timed steps): waiting in synchronize() after backward, and the hooks'
// copies and launches during backward, as a share of the median step.
inline void print_comm_share(const linea::dist::DataParallel& dp, const BenchRow& row) {
  const auto& s = dp.stats();
  const double steps = double(std::max<int64_t>(s.steps, 1));
  const double wait_ms = 1e3 * s.wait_s / steps, hooks_ms = 1e3 * s.hooks_s / steps;
  fmt::print("  comm ({} ranks): {:.2f} ms/step waiting for all-reduces + {:.2f} ms in grad hooks = {:.1f}% of the "
             "step; {:.2f} MB per step in {} bucket(s)\n",
             linea::dist::world().size, wait_ms, hooks_ms, 100 * (wait_ms + hooks_ms) / row.step_ms,
             double(s.bytes) / steps / (1 << 20), dp.num_buckets());
}

inline int run_bench_rows(const std::string& attn, linea::Device device,
                          const std::function<BenchRow(const std::string&)>& row) {
  if (attn != "all") {
    print_bench_row(attn, row(attn));
    return 0;
  }
  for (const char* kind : {"softmax", "linear", "mhla"}) {
    if (device.is_cuda() || linea::dist::world().size > 1) {  // no fork under CUDA or MPI
      print_bench_row(kind, row(kind));
      linea::cuda::empty_cache();
      continue;
    }
    const pid_t pid = fork();
    if (pid < 0) return 1;
    if (pid == 0) {
      print_bench_row(kind, row(kind));
      _exit(0);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) return 1;
  }
  return 0;
}
