// CPU detection, the ISA cap, and the CPU backend of the ISA that runs (tensor/cpu_isa.h).
#include "linea/tensor/cpu_isa.h"

#include <malloc.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>

#include "linea/tensor/backend.h"
#include "linea/tensor/error.h"

namespace linea {

namespace cpu {
// Each ISA's CpuBackend, compiled from the same sources (cpu_memory.cpp defines them).
namespace avx512 {
Backend& backend();
}
namespace avx2 {
Backend& backend();
}
namespace generic {
Backend& backend();
}
}  // namespace cpu

namespace {

constexpr std::string_view kNames[] = {"generic", "avx2", "avx512", "avx512_bf16"};

CpuIsa detect() {
#if defined(__x86_64__) && defined(LINEA_MULTI_ISA)
  // libgcc's checks include the OS's: AVX-512 counts only where XCR0 enables the zmm state.
  __builtin_cpu_init();
  const bool avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                      __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl") &&
                      __builtin_cpu_supports("avx512cd");
  if (avx512 && __builtin_cpu_supports("avx512bf16")) return CpuIsa::Avx512Bf16;
  if (avx512) return CpuIsa::Avx512;
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("bmi") && __builtin_cpu_supports("bmi2"))
    return CpuIsa::Avx2;
#endif
  return CpuIsa::Generic;
}

CpuIsa env_cap() {
  const char* s = std::getenv("LINEA_CPU_ISA");
  if (s == nullptr || *s == '\0') return CpuIsa::Avx512Bf16;
  return parse_cpu_isa(s);
}

// The cap: read from the environment on first use, replaced by set_max_cpu_isa.
std::atomic<CpuIsa>& cap() {
  static std::atomic<CpuIsa> c{env_cap()};
  return c;
}

}  // namespace

CpuIsa detected_cpu_isa() {
  static const CpuIsa isa = detect();
  return isa;
}

CpuIsa cpu_isa() { return std::min(detected_cpu_isa(), cap().load(std::memory_order_relaxed)); }

CpuIsa max_cpu_isa() { return cap().load(); }

void set_max_cpu_isa(CpuIsa isa) { cap().store(isa); }

std::string_view cpu_isa_name(CpuIsa isa) { return kNames[static_cast<int>(isa)]; }

CpuIsa parse_cpu_isa(std::string_view name) {
  for (int i = 0; i < 4; ++i)
    if (name == kNames[i]) return static_cast<CpuIsa>(i);
  throw Error(fmt::format("[cpu_isa] unknown instruction set '{}' (LINEA_CPU_ISA or parse_cpu_isa): expected "
                          "one of generic, avx2, avx512, avx512_bf16",
                          name));
}

namespace cpu {

Backend& instance() {
  static const bool once = [] {
    // Training allocates and frees the same large activation buffers every step. By default
    // glibc serves big blocks with mmap and returns freed memory to the OS, so each step pays
    // page faults again (measured: ~20% of an MHLA fwd+bwd at N=16384). Keep them in the heap.
    mallopt(M_MMAP_THRESHOLD, 256 << 20);
    mallopt(M_TRIM_THRESHOLD, 1 << 30);
    return true;
  }();
  (void)once;
#if defined(LINEA_MULTI_ISA)
  switch (cpu_isa()) {
    case CpuIsa::Avx512Bf16:
    case CpuIsa::Avx512: return avx512::backend();
    case CpuIsa::Avx2: return avx2::backend();
    case CpuIsa::Generic: break;
  }
#endif
  return generic::backend();
}

}  // namespace cpu
}  // namespace linea
