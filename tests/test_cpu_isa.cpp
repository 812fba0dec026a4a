// The ISA choice (tensor/cpu_isa.h): names, the cap and its guard, and what follows it.
#include "helpers.h"
#include "linea/tensor/cpu/gemm_bf16.h"
#include "linea/tensor/cpu/gemm_direct.h"

using namespace linea;

TEST_CASE("cpu_isa: every name parses back to its ISA; an unknown one is an error naming the valid ones") {
  for (CpuIsa isa : {CpuIsa::Generic, CpuIsa::Avx2, CpuIsa::Avx512, CpuIsa::Avx512Bf16})
    CHECK(parse_cpu_isa(cpu_isa_name(isa)) == isa);
  CHECK_THROWS_WITH_AS(parse_cpu_isa("avx3"),
                       doctest::Contains("[cpu_isa] unknown instruction set 'avx3' (LINEA_CPU_ISA or parse_cpu_isa): "
                                         "expected one of generic, avx2, avx512, avx512_bf16"),
                       Error);
  CHECK_THROWS_AS(parse_cpu_isa(""), Error);
}

TEST_CASE("cpu_isa: the cap lowers the ISA, never raises it past the CPU's, and the guard restores it") {
  const CpuIsa before = max_cpu_isa();
  {
    const CpuIsaGuard generic(CpuIsa::Generic);
    CHECK(cpu_isa() == CpuIsa::Generic);
    CHECK(max_cpu_isa() == CpuIsa::Generic);
    // What follows the ISA: no direct GEMM kernel, no bf16 kernel, the generic CpuBackend.
    CHECK_FALSE(cpu::has_direct_gemm());
    CHECK_FALSE(cpu::has_bf16_kernel());
    {
      const CpuIsaGuard widest(CpuIsa::Avx512Bf16);  // a cap above the CPU is no error
      CHECK(cpu_isa() == detected_cpu_isa());
    }
    CHECK(cpu_isa() == CpuIsa::Generic);
  }
  CHECK(max_cpu_isa() == before);
  CHECK(cpu_isa() == std::min(detected_cpu_isa(), before));
}

TEST_CASE("cpu_isa: each ISA's kernels compute the same product to float32 rounding") {
  Generator gen(5);
  const Tensor a = randn({70, 50}, gen), b = randn({50, 90}, gen);
  const Tensor ref = matmul(a.to(DType::Float64), b.to(DType::Float64));
  for (CpuIsa isa : {CpuIsa::Generic, CpuIsa::Avx2, CpuIsa::Avx512}) {
    if (isa > detected_cpu_isa()) continue;
    const CpuIsaGuard cap(isa);
    CAPTURE(std::string(cpu_isa_name(isa)));
    CHECK(testing::allclose(matmul(a, b).to(DType::Float64), ref, 1e-4, 1e-5));
    CHECK(testing::allclose(softmax(a, -1).to(DType::Float64), softmax(a.to(DType::Float64), -1), 1e-6, 1e-5));
  }
}
