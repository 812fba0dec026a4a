#include "linea/tensor/precision.h"

#include <atomic>

namespace linea {

namespace {
std::atomic<MatmulPrecision> g_precision{MatmulPrecision::Highest};
}

void set_matmul_precision(MatmulPrecision p) { g_precision.store(p); }
MatmulPrecision matmul_precision() { return g_precision.load(); }

}  // namespace linea
