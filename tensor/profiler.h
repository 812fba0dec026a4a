// linea::Profiler: where a step's time goes, kernel by kernel, like torch.profiler's
// key_averages() table.
//
// Every op reaches its device through a Backend method (tensor/backend.h), and each method
// passes through one place (tensor/backend.cpp): while the profiler records, it times the
// kernel's call and counts the FLOPs (matrix products, attention) or the bytes it reads and
// writes (everything else). While it does not, a kernel call pays one predictable branch on a
// global flag and nothing else.
//
//   Profiler::start();
//   { Profiler::Scope s("forward"); loss = model(x); }     // kernels are grouped by phase
//   { Profiler::Scope s("backward"); loss.backward(); }
//   Profiler::stop();
//   fmt::print("{}", profile_table(Profiler::rows(), step_seconds, measure_cpu_ceilings()));
//
// Times are wall-clock around each kernel, so they are exact on the CPU; CUDA kernels run
// asynchronously, and there a row only measures the launch.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace linea {

// One line of the table: every call of one kernel in one phase.
struct ProfileRow {
  std::string phase;  // the innermost Profiler::Scope active at the call ("step" outside any)
  std::string op;     // the kernel: "gemm", "binary.add", "unary.gelu_tanh", "layernorm_backward", ...
  int64_t calls = 0;
  double seconds = 0;
  double flops = 0;   // floating-point operations (gemm, attention); 0 for memory-bound kernels
  double bytes = 0;   // bytes read + written, counting a broadcast (stride-0) operand once
};

class Profiler {
 public:
  // Forgets earlier records and starts recording. by_shape: one gemm row per operand shape and
  // layout ("gemm 4x[64x16]·[16x16]^T"), like torch.profiler's group_by_input_shape.
  static void start(bool by_shape = false);
  static void stop();
  static bool active() { return active_; }
  static bool by_shape() { return by_shape_; }

  // Labels the kernels called while it lives (on this thread) with `phase`; scopes nest.
  class Scope {
   public:
    explicit Scope(const char* phase);
    ~Scope();
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;

   private:
    const char* prev_;
  };

  // What was recorded, in first-call order within each phase.
  static std::vector<ProfileRow> rows();

  // Called by each Backend method (backend.cpp) for each kernel call.
  static void record(std::string_view op, double seconds, double flops, double bytes);

 private:
  static inline bool active_ = false;
  static inline bool by_shape_ = false;
};

// The machine's two rates that the table compares against: float32 GEMM (linea's matmul of two
// 1024 x 1024 matrices) and memory bandwidth (a 64 MiB copy, bytes read + written), each the
// median of a few runs. Takes well under a second; its 128 MiB of buffers go to the host cache.
struct Ceilings {
  double gflops = 0;
  double gbps = 0;
};
Ceilings measure_cpu_ceilings();

// The table, phase by phase, the most expensive kernels first: op, calls, total ms, % of the
// step, the work (GFLOP or MB moved), and the rate reached (GFLOP/s or GB/s) as a share of the ceiling. step_seconds is the
// whole step's wall time; what the kernels do not account for (allocation bookkeeping, building
// the graph, the host code between kernels) is printed as its own line.
std::string profile_table(const std::vector<ProfileRow>& rows, double step_seconds, const Ceilings& ceilings);

}  // namespace linea
