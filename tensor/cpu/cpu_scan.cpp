// Running sums (cumsum) along the middle dim of [outer, n, inner]: each (outer, inner) column is
// one sequential chain, so the work splits over outer rows and blocks of inner columns; within a
// block the inner loop runs over contiguous memory and vectorises. Every column is summed in j
// order by exactly one thread, so the result does not depend on the thread count.
#include <algorithm>
#include <type_traits>
#include <vector>


#include "linea/tensor/cpu/isa_begin.h"
#include "linea/tensor/cpu/cpu_backend.h"

namespace linea::cpu::inline LINEA_ISA_NS {

namespace {

constexpr int64_t kInnerBlock = 1024;  // columns per task: a running row of them stays in L1

template <class T>
void scan(const T* x, T* out, int64_t outer, int64_t n, int64_t inner, bool exclusive, bool reverse) {
  const int64_t nblocks = (inner + kInnerBlock - 1) / kInnerBlock;
#pragma omp parallel for schedule(static) if (outer * n * inner >= (1 << 16))
  for (int64_t task = 0; task < outer * nblocks; ++task) {
    const int64_t o = task / nblocks, e0 = (task % nblocks) * kInnerBlock, e1 = std::min(inner, e0 + kInnerBlock);
    std::vector<T> run(static_cast<size_t>(e1 - e0), T(0));
    for (int64_t step = 0; step < n; ++step) {
      const int64_t i = reverse ? n - 1 - step : step, base = (o * n + i) * inner;
      for (int64_t e = e0; e < e1; ++e) {
        T& r = run[static_cast<size_t>(e - e0)];
        if (exclusive) {
          out[base + e] = r;
          r += x[base + e];
        } else {
          r += x[base + e];
          out[base + e] = r;
        }
      }
    }
  }
}

}  // namespace

void CpuBackend::do_cumsum(const Tensor& x, const Tensor& out, int64_t outer, int64_t n, int64_t inner, bool exclusive,
                           bool reverse) {
  dispatch(x.dtype(), [&]<class T>() {
    if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double> || std::is_same_v<T, int64_t>)
      scan<T>(x.data<T>(), out.data<T>(), outer, n, inner, exclusive, reverse);
  });
}

}  // namespace linea::cpu::inline LINEA_ISA_NS

#include "linea/tensor/cpu/isa_end.h"
