// Counter-based uniform numbers (dropout masks): out[i] = u(seed, offset + i) from the hash in
// tensor/counter_rng.h, which cuda/fused.cu compiles too, so both devices give the same bits.
// Each element is computed on its own, so the loop splits over threads with no shared state.
#include <type_traits>

#include "linea/tensor/counter_rng.h"

#include "linea/tensor/cpu/isa_begin.h"
#include "linea/tensor/cpu/cpu_backend.h"

namespace linea::cpu::inline LINEA_ISA_NS {

void CpuBackend::do_random_uniform(const Tensor& out, uint64_t seed, uint64_t offset) {
  const uint64_t key = rng::stream_key(seed);
  const int64_t n = out.numel();
  dispatch_floating(out.dtype(), "random_uniform", [&]<class T>() {
    T* o = out.data<T>();
#pragma omp parallel for simd schedule(static) if (n > (1 << 16))
    for (int64_t i = 0; i < n; ++i) {
      const uint64_t b = rng::bits(key, offset + static_cast<uint64_t>(i));
      if constexpr (std::is_same_v<T, float>) o[i] = rng::unit_float(b);
      else o[i] = rng::unit_double(b);
    }
  });
}

}  // namespace linea::cpu::inline LINEA_ISA_NS

#include "linea/tensor/cpu/isa_end.h"
