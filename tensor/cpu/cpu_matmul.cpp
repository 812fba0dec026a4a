// Batched matrix multiply on OpenBLAS (or, for float32, gemm_direct.h where it is faster and
// gemm_bf16.h under MatmulPrecision::BF16).
//
// BLAS takes a matrix as (pointer, leading dimension, transposed?), so any view whose last two
// dims are row-major (stride[-1] == 1) or column-major (stride[-2] == 1, e.g. a .t() view) goes
// straight to cblas_?gemm; only other layouts are copied. Batches are either folded into M (one
// big gemm: the x[B,T,C] @ W[C,N] of every linear layer) or looped over.
#include <omp.h>
#include <algorithm>
#include <type_traits>
#include <vector>

#include "linea/tensor/cpu/blas.h"
#include "linea/tensor/cpu/gemm_bf16.h"
#include "linea/tensor/cpu/gemm_direct.h"
#include "linea/tensor/kernel_checks.h"
#include "linea/tensor/precision.h"

#include "linea/tensor/cpu/isa_begin.h"
#include "linea/tensor/cpu/cpu_backend.h"

namespace linea::cpu::inline LINEA_ISA_NS {

namespace {

// Below kSmallGemm multiply-adds per matrix, batches run in parallel (one BLAS thread each); above
// it each gemm is big enough for BLAS to use every thread by itself. Under kMinParallelWork in
// all, waking a thread team costs more than the work (and on a loaded machine far more).
constexpr int64_t kSmallGemm = 256 * 256 * 256;
constexpr int64_t kMinParallelWork = 64 * 64 * 64;

// c's rows set to zero before a product that adds into them (and to r + bias by gemm_direct.h's
// write_addend, where the product has a start). OpenBLAS with beta = 0 first zeroes c in a pass of
// its own (sgemm_beta), which costs more than these stores just ahead of the product; a bias written
// here costs less than a separate add after it (measured: docs/benchmarks.md, "The CPU GEMM around
// BLAS").
template <class T>
void zero_rows(int64_t M, int64_t N, T* c, int64_t ldc) {
  for (int64_t i = 0; i < M; ++i, c += ldc) std::fill(c, c + N, T(0));
}

// The fill is for the layers' products; small ones (attention and MHLA tiles) keep beta = 0.
constexpr int64_t kFillFirst = 64 * 64;

// c = a·b + start on this thread: BLAS, or for float32 bf16 dot products when asked for, or the
// direct kernel where it beats BLAS (gemm_direct.h), which adds the start as it stores c.
template <class T>
void gemm_serial(bool bf16, bool ta, bool tb, int64_t M, int64_t N, int64_t K, const T* a, int64_t lda, const T* b,
                 int64_t ldb, T* c, int64_t ldc, const GemmAddend<T>& s) {
  if constexpr (std::is_same_v<T, float>) {
    if (bf16) return gemm_bf16(ta, tb, M, N, K, a, lda, b, ldb, c, ldc, s);
    if (direct_gemm_pays(ta, tb, M, N, K)) return gemm_direct(ta, tb, M, N, K, a, lda, b, ldb, c, ldc, s);
  }
  const bool add = write_addend<T>(M, N, s, c, ldc);
  const bool zero_first = !add && M * N >= kFillFirst;
  if (zero_first) zero_rows<T>(M, N, c, ldc);
  blas_gemm<T>(ta, tb, M, N, K, a, lda, b, ldb, add || zero_first ? T(1) : T(0), c, ldc);
}

// c = aᵀ·b + start with K split over nt threads, float32 on the direct kernel (or gemm_bf16's with
// bf16): thread 0 writes c (adding the start), the others their partial products, added into c in
// thread order. With a_sums (M floats; direct kernel only), also a_sums[i] = Σ_k a(i, k), each
// thread summing its slice in double as it reads it.
void gemm_split_k(int nt, bool bf16, bool tb, int64_t M, int64_t N, int64_t K, const float* a, int64_t lda,
                  const float* b, int64_t ldb, float* c, int64_t ldc, const GemmAddend<float>& s,
                  float* a_sums = nullptr) {
  std::vector<float> part(static_cast<size_t>(nt - 1) * M * N);
  std::vector<double> sums(a_sums ? static_cast<size_t>(nt) * M : 0, 0.0);
#pragma omp parallel num_threads(nt)
  {
    const int t = omp_get_thread_num();
    const int64_t k0 = K * t / nt, k1 = K * (t + 1) / nt;
    float* dst = t == 0 ? c : part.data() + (t - 1) * M * N;
    double* my_sums = a_sums ? sums.data() + t * M : nullptr;
    const int64_t ldd = t == 0 ? ldc : N;
    const GemmAddend<float> mine = t == 0 ? s : GemmAddend<float>{};
    const float *ak = a + k0 * lda, *bk = b + (tb ? k0 : k0 * ldb);
    if (k1 > k0 && bf16)
      gemm_bf16(true, tb, M, N, k1 - k0, ak, lda, bk, ldb, dst, ldd, mine);
    else if (k1 > k0)
      gemm_direct(true, tb, M, N, k1 - k0, ak, lda, bk, ldb, dst, ldd, mine, direct_gemm_isa(), my_sums);
    else if (!write_addend<float>(M, N, mine, dst, ldd))
      zero_rows<float>(M, N, dst, ldd);
  }
  for (int t = 1; t < nt; ++t)
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = 0; j < N; ++j) c[i * ldc + j] += part[((t - 1) * M + i) * N + j];
  if (a_sums)
    for (int64_t i = 0; i < M; ++i) {
      double s = 0;
      for (int t = 0; t < nt; ++t) s += sums[t * M + i];
      a_sums[i] = static_cast<float>(s);
    }
}

// Whether a weight gradient [M, N] over K rows splits over K (gemm_split): float32 where the direct
// kernel takes each thread's slice, bf16 where K is much the longest side (shorter bf16 ones, like
// the char-GPT's, run faster split by rows). Measured: docs/benchmarks.md, "The CPU GEMM around BLAS".
bool splits_over_k(bool bf16, bool tb, int64_t M, int64_t N, int64_t K) {
  const int nt = omp_get_max_threads();
  if (nt == 1 || omp_in_parallel() || M * N * K < kMinParallelWork) return false;
  return bf16 ? K >= 8 * std::max(M, N) : direct_gemm_pays(true, tb, M, N, K / nt);
}

// One gemm on every thread: each thread multiplies its own block of rows of a (or, for a short
// wide product, columns of b) with single-threaded BLAS (OpenBLAS runs serially inside a parallel
// region). OpenBLAS's own threading splits the skinny products of small models badly (measured:
// docs/benchmarks.md, "The CPU GEMM around BLAS").
template <class T>
void gemm_split(bool bf16, bool ta, bool tb, int64_t M, int64_t N, int64_t K, const T* a, int64_t lda, const T* b,
                int64_t ldb, T* c, int64_t ldc, const GemmAddend<T>& s) {
  const int nt = omp_get_max_threads();
  if (nt == 1 || omp_in_parallel() || M * N * K < kMinParallelWork)
    return gemm_serial<T>(bf16, ta, tb, M, N, K, a, lda, b, ldb, c, ldc, s);
  const bool rows = M >= N;
  // A weight gradient (a read transposed, K long, a small output). Where the direct kernel takes
  // each thread's slice of K, the threads split K: each reads only its rows of a and b (a row split
  // reads all of b on every thread) into its own partial product, and the partials are added in
  // thread order; this beats OpenBLAS's own threads. Otherwise OpenBLAS's own threads split it
  // better than rows of C do, since each row block repacks all of b (measured: docs/benchmarks.md,
  // "The CPU GEMM around BLAS").
  // With bf16 the same split, each thread packing only its slice of both operands.
  if constexpr (std::is_same_v<T, float>)
    if (ta && splits_over_k(bf16, tb, M, N, K)) return gemm_split_k(nt, bf16, tb, M, N, K, a, lda, b, ldb, c, ldc, s);
  if (ta && !bf16) {
    const bool add = write_addend<T>(M, N, s, c, ldc);
    return blas_gemm<T>(ta, tb, M, N, K, a, lda, b, ldb, add ? T(1) : T(0), c, ldc);
  }
#pragma omp parallel num_threads(nt)
  {
    const int64_t t = omp_get_thread_num(), len = rows ? M : N;
    const int64_t i0 = len * t / nt, i1 = len * (t + 1) / nt;
    if (i1 > i0) {
      if (rows)  // rows i0..i1 of a: a row offset, or a column offset when a is stored transposed
        gemm_serial<T>(bf16, ta, tb, i1 - i0, N, K, a + (ta ? i0 : i0 * lda), lda, b, ldb, c + i0 * ldc, ldc,
                       s.rows(i0));
      else  // columns i0..i1 of b and c
        gemm_serial<T>(bf16, ta, tb, M, i1 - i0, K, a, lda, b + (tb ? i0 * ldb : i0), ldb, c + i0, ldc, s.cols(i0));
    }
  }
}
}  // namespace

// Where the weight gradient splits over K on the direct kernel, the bias gradient's column sums of
// g come out of the same pass over g; otherwise gemm, then reduce.
void CpuBackend::do_linear_weight_grad(const Tensor& g, const Tensor& x, const Tensor& dw, const Tensor& db) {
  const int64_t rows = g.size(0), out = g.size(1), in = x.size(1);
  if (!db.defined() || g.dtype() != DType::Float32 || matmul_precision() == MatmulPrecision::BF16 ||
      !splits_over_k(false, false, out, in, rows))
    return Backend::do_linear_weight_grad(g, x, dw, db);
  gemm_split_k(omp_get_max_threads(), false, false, out, in, rows, g.data<float>(), out, x.data<float>(), in,
               dw.data<float>(), in, {}, db.data<float>());
}

void CpuBackend::do_gemm(const Tensor& a_in, const Tensor& b_in, const Tensor& out, const Tensor& bias,
                         const Tensor& residual) {
  const int64_t batch = out.size(0), M = out.size(1), N = out.size(2), K = a_in.size(2);
  if (out.numel() == 0) return;
  if (K == 0) {  // an empty sum: the residual, the bias, both or zeros (BLAS would be asked for lda = 0)
    if (residual.defined() && bias.defined()) do_binary(BinaryOp::Add, residual, bias.expand(out.shape()), out);
    else if (residual.defined()) do_copy(residual, out);
    else if (bias.defined()) do_copy(bias.expand(out.shape()), out);
    else do_fill(out, 0.0);
    return;
  }
  const Tensor a = kernel_checks::blas_operand(a_in), b = kernel_checks::blas_operand(b_in);
  const kernel_checks::BlasView va = kernel_checks::matrix_view(a), vb = kernel_checks::matrix_view(b);
  const int64_t sa = batch == 1 ? 0 : a.strides()[0], sb = batch == 1 ? 0 : b.strides()[0];
  // b shared by all batches and a's batches stacked row-major: one [batch*M, K] @ [K, N] gemm.
  const bool fold = sb == 0 && !va.trans && (sa == M * va.ld || batch == 1);
  // TF32 has no CPU kernel: full float32. BF16 rounds the products big enough to gain (gemm_bf16.h).
  const bool bf16 = matmul_precision() == MatmulPrecision::BF16 && N > kBf16MinColumns &&
                    (fold ? batch : 1) * M * N * K >= kBf16MinProduct;

  dispatch_floating(out.dtype(), "gemm", [&]<class T>() {
    const T *pa = a.data<T>(), *pb = b.data<T>(), *pbias = bias.defined() ? bias.data<T>() : nullptr;
    const T* pr = residual.defined() ? residual.data<T>() : nullptr;  // contiguous like out (kernel_checks)
    T* pc = out.data<T>();
    if (fold) {
      gemm_split<T>(bf16, false, vb.trans, batch * M, N, K, pa, va.ld, pb, vb.ld, pc, N, GemmAddend<T>{pr, N, pbias});
      return;
    }
    parallel_if(batch > 1 && M * N * K <= kSmallGemm && batch * M * N * K >= kMinParallelWork, [&] {
#pragma omp for schedule(static)
      for (int64_t i = 0; i < batch; ++i)
        gemm_split<T>(bf16, va.trans, vb.trans, M, N, K, pa + i * sa, va.ld, pb + i * sb, vb.ld, pc + i * M * N, N,
                      GemmAddend<T>{pr ? pr + i * M * N : nullptr, N, pbias});
    });
  });
}

}  // namespace linea::cpu::inline LINEA_ISA_NS

#include "linea/tensor/cpu/isa_end.h"
