// The profiler's records and its table (profiler.h). The kernels are timed by the Backend
// methods (backend.cpp), which call Profiler::record once per kernel call.
#include "linea/tensor/profiler.h"

#include <algorithm>
#include <chrono>
#include <mutex>

#include <fmt/format.h>

#include "linea/tensor/backend.h"
#include "linea/tensor/cpu_isa.h"
#include "linea/tensor/creation.h"
#include "linea/tensor/precision.h"
#include "linea/tensor/random.h"

namespace linea {

namespace {

thread_local const char* g_phase = "step";

struct Records {
  std::mutex mu;  // kernels may be called from several threads (a data loader, say)
  std::vector<ProfileRow> rows;
};

Records& records() {
  static Records r;
  return r;
}

template <class F>
double median_seconds(int runs, F&& f) {
  f();  // warm-up: first-touch page faults, BLAS buffers
  std::vector<double> s;
  for (int i = 0; i < runs; ++i) {
    const auto t = std::chrono::steady_clock::now();
    f();
    s.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count());
  }
  std::sort(s.begin(), s.end());
  return s[s.size() / 2];
}

}  // namespace

void Profiler::start(bool by_shape) {
  Records& r = records();
  std::lock_guard<std::mutex> lock(r.mu);
  r.rows.clear();
  by_shape_ = by_shape;
  active_ = true;
}

void Profiler::stop() { active_ = false; }

Profiler::Scope::Scope(const char* phase) : prev_(g_phase) { g_phase = phase; }
Profiler::Scope::~Scope() { g_phase = prev_; }

std::vector<ProfileRow> Profiler::rows() {
  Records& r = records();
  std::lock_guard<std::mutex> lock(r.mu);
  return r.rows;
}

void Profiler::record(std::string_view op, double seconds, double flops, double bytes) {
  Records& r = records();
  std::lock_guard<std::mutex> lock(r.mu);
  auto it = std::find_if(r.rows.begin(), r.rows.end(),
                         [&](const ProfileRow& row) { return row.op == op && row.phase == g_phase; });
  if (it == r.rows.end()) it = r.rows.insert(r.rows.end(), ProfileRow{g_phase, std::string(op)});
  ++it->calls;
  it->seconds += seconds;
  it->flops += flops;
  it->bytes += bytes;
}

Ceilings measure_cpu_ceilings() {
  Ceilings c;
  Generator gen(0);
  const int64_t n = 1024;
  // Straight to the kernels: tensor/ knows nothing of autograd's matmul.
  Backend& cpu = backend(Device::cpu());
  const Tensor a = randn({1, n, n}, gen), b = randn({1, n, n}, gen), ab = empty({1, n, n});
  c.gflops = 2.0 * double(n * n * n) / median_seconds(5, [&] { cpu.gemm(a, b, ab, Tensor(), Tensor()); }) / 1e9;
  const Tensor src = zeros({int64_t(16) << 20}), dst = empty({int64_t(16) << 20});  // 64 MiB of float32 each
  c.gbps = 2.0 * double(src.numel() * 4) / median_seconds(3, [&] { cpu.copy(src, dst); }) / 1e9;
  return c;
}

std::string profile_table(const std::vector<ProfileRow>& rows, double step_seconds, const Ceilings& ceilings) {
  std::size_t w = 26;  // the op column: wider for by-shape gemm rows
  for (const ProfileRow& r : rows) w = std::max(w, r.op.size() + 1);
  std::string out = fmt::format("{:<{}} {:>6} {:>9} {:>7} {:>12} {:>14} {:>7}\n", "op", w, "calls", "total ms",
                                "% step", "work", "rate", "% ceil");
  std::vector<std::string> phases;
  for (const ProfileRow& r : rows)
    if (std::find(phases.begin(), phases.end(), r.phase) == phases.end()) phases.push_back(r.phase);
  double kernels_s = 0;
  for (const std::string& phase : phases) {
    std::vector<ProfileRow> in;
    double phase_s = 0;
    for (const ProfileRow& r : rows)
      if (r.phase == phase) {
        in.push_back(r);
        phase_s += r.seconds;
      }
    std::sort(in.begin(), in.end(), [](const ProfileRow& x, const ProfileRow& y) { return x.seconds > y.seconds; });
    out += fmt::format("-- {}: {:.2f} ms in kernels\n", phase, phase_s * 1e3);
    for (const ProfileRow& r : in) {
      std::string work, rate, ceil;
      if (r.flops > 0) work = fmt::format("{:.3f} GFLOP", r.flops / 1e9);
      else if (r.bytes > 0) work = fmt::format("{:.1f} MB", r.bytes / 1e6);
      if (r.flops > 0 && r.seconds > 0) {
        rate = fmt::format("{:.1f} GFLOP/s", r.flops / r.seconds / 1e9);
        ceil = fmt::format("{:.0f}%", 100 * r.flops / r.seconds / 1e9 / ceilings.gflops);
      } else if (r.bytes > 0 && r.seconds > 0) {
        rate = fmt::format("{:.1f} GB/s", r.bytes / r.seconds / 1e9);
        ceil = fmt::format("{:.0f}%", 100 * r.bytes / r.seconds / 1e9 / ceilings.gbps);
      }
      out += fmt::format("{:<{}} {:>6} {:>9.3f} {:>6.1f}% {:>12} {:>14} {:>7}\n", r.op, w, r.calls, r.seconds * 1e3,
                         100 * r.seconds / step_seconds, work, rate, ceil);
    }
    kernels_s += phase_s;
  }
  out += fmt::format("{:<{}} {:>6} {:>9.3f} {:>6.1f}%\n", "(outside kernels)", w, "", (step_seconds - kernels_s) * 1e3,
                     100 * (step_seconds - kernels_s) / step_seconds);
  // The gemm ceiling is measured at the matmul precision in force (bf16 dot products: ~3x float32's).
  const char* precision = matmul_precision() == MatmulPrecision::BF16 ? "bf16" : "float32";
  out += fmt::format("step {:.2f} ms; ceilings: {:.1f} GFLOP/s ({} matmul 1024^3), {:.1f} GB/s (64 MiB copy); "
                     "CPU kernels: {}\n",
                     step_seconds * 1e3, ceilings.gflops, precision, ceilings.gbps, cpu_isa_name(cpu_isa()));
  return out;
}

}  // namespace linea
