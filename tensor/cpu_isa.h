// Which instruction set linea's CPU kernels run. One build carries every CPU kernel three times
// (tensor/cpu/isa_begin.h): for AVX-512, for AVX2 + FMA, and for the x86-64 baseline. The widest
// the CPU runs is picked once at start; a cap lowers it, as oneDNN's ONEDNN_MAX_CPU_ISA does:
//
//   LINEA_CPU_ISA=avx2 ./program     the environment variable (generic, avx2, avx512, avx512_bf16);
//                                    it also caps OpenBLAS (OPENBLAS_CORETYPE, unless set), which
//                                    picks its kernels when the program starts
//   linea::set_max_cpu_isa(...)      the same from code, at any time (linea's kernels only)
//
// A cap above what the CPU runs is no error: the CPU's widest runs. Every ISA computes the same
// values to the tolerances the tests state (they run the kernel families under each ISA); the
// wider ones are faster. Non-x86 builds have only Generic.
#pragma once
#include <string_view>

namespace linea {

enum class CpuIsa {
  Generic,    // x86-64 baseline (SSE2), or any non-x86 CPU: what the compiler vectorises portably
  Avx2,       // AVX2 + FMA (x86-64-v3): Haswell and later, Zen 1-3
  Avx512,     // AVX-512 F/BW/DQ/VL/CD (x86-64-v4): Skylake-SP and later, Zen 4
  Avx512Bf16  // AVX-512 with AVX512-BF16 dot products (Zen 4, Sapphire Rapids): MatmulPrecision::BF16's kernel
};

CpuIsa detected_cpu_isa();  // the widest this CPU and OS run
CpuIsa cpu_isa();           // what runs: detected_cpu_isa() capped by LINEA_CPU_ISA and set_max_cpu_isa()
CpuIsa max_cpu_isa();       // the cap in force (Avx512Bf16 when none is set)
void set_max_cpu_isa(CpuIsa cap);  // replaces the environment's cap
std::string_view cpu_isa_name(CpuIsa isa);  // "generic", "avx2", "avx512", "avx512_bf16"
CpuIsa parse_cpu_isa(std::string_view name);  // throws linea::Error naming the valid names

// Scoped cap: { CpuIsaGuard avx2(CpuIsa::Avx2); ... } restores the previous cap on scope exit.
class CpuIsaGuard {
 public:
  explicit CpuIsaGuard(CpuIsa cap) : saved_(max_cpu_isa()) { set_max_cpu_isa(cap); }
  ~CpuIsaGuard() { set_max_cpu_isa(saved_); }
  CpuIsaGuard(const CpuIsaGuard&) = delete;
  CpuIsaGuard& operator=(const CpuIsaGuard&) = delete;

 private:
  CpuIsa saved_;
};

}  // namespace linea
