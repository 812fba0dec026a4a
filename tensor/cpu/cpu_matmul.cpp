// Batched matrix multiply on OpenBLAS.
//
// BLAS takes a matrix as (pointer, leading dimension, transposed?), so any view whose last two
// dims are row-major (stride[-1] == 1) or column-major (stride[-2] == 1, e.g. a .t() view) goes
// straight to cblas_?gemm; only other layouts are copied. Batches are either folded into M (one
// big gemm: the x[B,T,C] @ W[C,N] of every linear layer) or looped over.
#include <cblas.h>
#include <omp.h>

#include <algorithm>
#include <type_traits>

#include "linea/tensor/cpu/cpu_backend.h"

namespace linea::cpu {

namespace {

// How BLAS sees one [rows, cols] matrix with row stride rs and column stride cs.
struct BlasView {
  bool ok = false;     // false: BLAS cannot read this layout, copy first
  bool trans = false;  // stored column-major: pass CblasTrans
  int64_t ld = 0;      // leading dimension
};

BlasView blas_view(int64_t rows, int64_t cols, int64_t rs, int64_t cs) {
  // A single row or column has one meaningful stride; the other may be anything (even 0).
  if ((cs == 1 || cols == 1) && (rows == 1 || rs >= std::max<int64_t>(cols, 1)))
    return {true, false, rows == 1 ? std::max<int64_t>(cols, 1) : rs};
  if ((rs == 1 || rows == 1) && (cols == 1 || cs >= std::max<int64_t>(rows, 1)))
    return {true, true, cols == 1 ? std::max<int64_t>(rows, 1) : cs};
  return {};
}

BlasView matrix_view(const Tensor& t) { return blas_view(t.shape()[1], t.shape()[2], t.strides()[1], t.strides()[2]); }

// A contiguous copy of t (a broadcast batch stays a single copy with batch stride 0).
Tensor contiguous_copy(const Tensor& t) {
  const bool broadcast = t.strides()[0] == 0;
  Tensor src = broadcast ? t.as_strided({1, t.shape()[1], t.shape()[2]}, t.strides(), t.offset()) : t;
  Tensor c = empty(src.shape(), src.dtype(), src.device());
  instance().copy(src, c);
  if (!broadcast) return c;
  return c.as_strided(t.shape(), {0, c.strides()[1], c.strides()[2]}, 0);
}

template <class T>
void gemm_call(bool ta, bool tb, int64_t M, int64_t N, int64_t K, const T* a, int64_t lda, const T* b, int64_t ldb,
               T* c, int64_t ldc) {
  const auto TA = ta ? CblasTrans : CblasNoTrans, TB = tb ? CblasTrans : CblasNoTrans;
  if constexpr (std::is_same_v<T, float>)
    cblas_sgemm(CblasRowMajor, TA, TB, M, N, K, 1.0f, a, lda, b, ldb, 0.0f, c, ldc);
  else
    cblas_dgemm(CblasRowMajor, TA, TB, M, N, K, 1.0, a, lda, b, ldb, 0.0, c, ldc);
}

// Below kSmallGemm multiply-adds per matrix, batches run in parallel (one BLAS thread each); above
// it each gemm is big enough for BLAS to use every thread by itself. Under kMinParallelWork in
// all, waking a thread team costs more than the work (and on a loaded machine far more).
constexpr int64_t kSmallGemm = 256 * 256 * 256;
constexpr int64_t kMinParallelWork = 64 * 64 * 64;


// One gemm on every thread: each thread multiplies its own block of rows of a (or, for a short
// wide product, columns of b) with single-threaded BLAS (OpenBLAS runs serially inside a parallel
// region). OpenBLAS's own threading splits the skinny products of small models badly: measured
// here, [8192,64]@[64,192] took 2.6 ms with its 2 threads and 1.05 ms split by rows.
template <class T>
void gemm_split(bool ta, bool tb, int64_t M, int64_t N, int64_t K, const T* a, int64_t lda, const T* b, int64_t ldb,
                T* c, int64_t ldc) {
  const int nt = omp_get_max_threads();
  if (nt == 1 || omp_in_parallel() || M * N * K < kMinParallelWork)
    return gemm_call<T>(ta, tb, M, N, K, a, lda, b, ldb, c, ldc);
  const bool rows = M >= N;
#pragma omp parallel num_threads(nt)
  {
    const int64_t t = omp_get_thread_num(), len = rows ? M : N;
    const int64_t i0 = len * t / nt, i1 = len * (t + 1) / nt;
    if (i1 > i0) {
      if (rows)  // rows i0..i1 of a: a row offset, or a column offset when a is stored transposed
        gemm_call<T>(ta, tb, i1 - i0, N, K, a + (ta ? i0 : i0 * lda), lda, b, ldb, c + i0 * ldc, ldc);
      else  // columns i0..i1 of b and c
        gemm_call<T>(ta, tb, M, i1 - i0, K, a, lda, b + (tb ? i0 * ldb : i0), ldb, c + i0, ldc);
    }
  }
}
}  // namespace

void CpuBackend::gemm(const Tensor& a_in, const Tensor& b_in, const Tensor& out) {
  LINEA_CHECK(a_in.dim() == 3 && b_in.dim() == 3 && out.dim() == 3, "[gemm] expected 3-d operands, got {} @ {} -> {}",
              shape_str(a_in.shape()), shape_str(b_in.shape()), shape_str(out.shape()));
  const int64_t batch = out.shape()[0], M = out.shape()[1], N = out.shape()[2], K = a_in.shape()[2];
  LINEA_CHECK(a_in.shape() == Shape({batch, M, K}) && b_in.shape() == Shape({batch, K, N}) && out.is_contiguous(),
              "[gemm] shapes {} @ {} -> {} do not match [batch, M, K] @ [batch, K, N] -> [batch, M, N]",
              shape_str(a_in.shape()), shape_str(b_in.shape()), shape_str(out.shape()));
  LINEA_CHECK(a_in.dtype() == b_in.dtype() && a_in.dtype() == out.dtype(), "[gemm] dtype mismatch: {} @ {} -> {}",
              a_in.dtype(), b_in.dtype(), out.dtype());
  if (out.numel() == 0) return;
  if (K == 0) {  // an empty sum: zeros (BLAS would be asked for lda = 0)
    fill(out, 0.0);
    return;
  }
  Tensor a = matrix_view(a_in).ok ? a_in : contiguous_copy(a_in);
  Tensor b = matrix_view(b_in).ok ? b_in : contiguous_copy(b_in);
  const BlasView va = matrix_view(a), vb = matrix_view(b);
  const int64_t sa = batch == 1 ? 0 : a.strides()[0], sb = batch == 1 ? 0 : b.strides()[0];

  dispatch_floating(out.dtype(), "gemm", [&]<class T>() {
    const T *pa = a.data<T>(), *pb = b.data<T>();
    T* pc = out.data<T>();
    // b shared by all batches and a's batches stacked row-major: one [batch*M, K] @ [K, N] gemm.
    if (sb == 0 && !va.trans && (sa == M * va.ld || batch == 1)) {
      gemm_split<T>(false, vb.trans, batch * M, N, K, pa, va.ld, pb, vb.ld, pc, N);
      return;
    }
#pragma omp parallel for schedule(static) \
    if (batch > 1 && M * N * K <= kSmallGemm && batch * M * N * K >= kMinParallelWork)
    for (int64_t i = 0; i < batch; ++i)
      gemm_split<T>(va.trans, vb.trans, M, N, K, pa + i * sa, va.ld, pb + i * sb, vb.ld, pc + i * M * N, N);
  });
}

}  // namespace linea::cpu
