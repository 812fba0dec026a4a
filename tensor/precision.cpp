#include "linea/tensor/precision.h"

#include <atomic>

#include "linea/tensor/cpu/gemm_bf16.h"

namespace linea {

namespace {
std::atomic<MatmulPrecision> g_precision{MatmulPrecision::Highest};
}

void set_matmul_precision(MatmulPrecision p) { g_precision.store(p); }
MatmulPrecision matmul_precision() { return g_precision.load(); }
bool cpu_has_bf16_dot() { return cpu::has_bf16_kernel(); }

}  // namespace linea
