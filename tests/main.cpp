// The doctest main of every CPU test family. tests/CMakeLists.txt runs the kernel families once
// more per narrower instruction set, with LINEA_CPU_ISA set and LINEA_TEST_ISA_COPY=1; such a copy
// skips (exit 77) on a CPU that cannot run that ISA, or whose widest it is (the family's own run
// tests it), rather than testing another ISA under its name.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cstdio>
#include <cstdlib>

#include "linea/tensor/cpu_isa.h"
#include "linea/tensor/error.h"

int main(int argc, char** argv) try {
  const char* asked = std::getenv("LINEA_CPU_ISA");
  if (asked != nullptr && std::getenv("LINEA_TEST_ISA_COPY") != nullptr) {
    const linea::CpuIsa isa = linea::parse_cpu_isa(asked), widest = linea::detected_cpu_isa();
    if (isa >= widest) {
      std::printf("skipped: LINEA_CPU_ISA=%s, and this CPU's widest ISA is %s (%s)\n", asked,
                  linea::cpu_isa_name(widest).data(),
                  isa == widest ? "the family's own run tests it" : "it cannot run the one asked");
      return 77;
    }
  }
  std::printf("CPU kernels: %s\n", linea::cpu_isa_name(linea::cpu_isa()).data());
  std::fflush(stdout);  // before anything can crash
  doctest::Context context(argc, argv);
  return context.run();
} catch (const linea::Error& e) {  // e.g. an unknown LINEA_CPU_ISA
  std::fprintf(stderr, "%s\n", e.what());
  return 1;
}
