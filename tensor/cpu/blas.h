// One row-major BLAS gemm call, typed: c = a·b + beta·c, with a or b read transposed in place.
// The CPU kernels that multiply raw tiles (matmul's batches, attention's tiles) call BLAS through
// this; OpenBLAS runs it serially inside an OpenMP parallel region.
#pragma once
#include <cblas.h>
#include <omp.h>

#include <cstdint>
#include <type_traits>

namespace linea::cpu {

template <class T>
void blas_gemm(bool ta, bool tb, int64_t M, int64_t N, int64_t K, const T* a, int64_t lda, const T* b, int64_t ldb,
               T beta, T* c, int64_t ldc) {
  const auto TA = ta ? CblasTrans : CblasNoTrans, TB = tb ? CblasTrans : CblasNoTrans;
  if constexpr (std::is_same_v<T, float>)
    cblas_sgemm(CblasRowMajor, TA, TB, M, N, K, 1.0f, a, lda, b, ldb, beta, c, ldc);
  else
    cblas_dgemm(CblasRowMajor, TA, TB, M, N, K, 1.0, a, lda, b, ldb, beta, c, ldc);
}

// body() on a team of threads when parallel, else on this thread without opening a region; body's
// `omp for` loops bind to the team or run whole here. Callers of BLAS use this instead of
// `omp parallel if (parallel)`: a region whose if is false is still a team of one, inside which
// OpenBLAS's own parallel region runs as a nested team whose thread libgomp creates and joins on
// every call (the char-GPT's weight gradients started 137 threads in 8 steps that way).
template <class F>
void parallel_if(bool parallel, F&& body) {
  if (parallel) {
#pragma omp parallel
    body();
  } else {
    body();
  }
}

}  // namespace linea::cpu
