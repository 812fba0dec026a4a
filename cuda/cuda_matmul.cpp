// Batched matrix multiply on cuBLAS: one cublasGemmStridedBatchedEx call per gemm.
//
// cuBLAS is column-major, linea row-major. A row-major [M, N] matrix is, to cuBLAS, the
// column-major [N, M] matrix of its transpose, so we ask cuBLAS for outᵀ = bᵀ aᵀ: operands
// swapped, (m, n) = (N, M). An operand stored row-major then already *is* the transpose that
// product needs (CUBLAS_OP_N); one stored column-major (a .t() view) needs CUBLAS_OP_T. Views are
// never copied unless neither layout fits. A broadcast batch has stride 0, which cuBLAS accepts.
#include <algorithm>
#include <climits>

#include "linea/cuda/cublas.h"
#include "linea/cuda/cuda_backend.h"
#include "linea/tensor/precision.h"

namespace linea::cuda {

namespace {

// How BLAS sees one [rows, cols] matrix with row stride rs and column stride cs; the same rules
// as the CPU's gemm (tensor/cpu/cpu_matmul.cpp), and the leading dimensions they give are valid
// for cuBLAS too (ld >= cols row-major, ld >= rows column-major).
struct BlasView {
  bool ok = false;     // false: BLAS cannot read this layout, copy first
  bool trans = false;  // stored column-major
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

// A contiguous copy of t on the GPU (a broadcast batch stays a single copy with batch stride 0).
Tensor contiguous_copy(const Tensor& t) {
  const bool broadcast = t.strides()[0] == 0;
  Tensor src = broadcast ? t.as_strided({1, t.shape()[1], t.shape()[2]}, t.strides(), t.offset()) : t;
  Tensor c = empty(src.shape(), src.dtype(), src.device());
  instance().copy(src, c);
  if (!broadcast) return c;
  return c.as_strided(t.shape(), {0, c.strides()[1], c.strides()[2]}, 0);
}

// cuBLAS takes sizes, leading dimensions and the batch count as int.
int as_int(int64_t v, const char* what, const Tensor& a, const Tensor& b) {
  LINEA_CHECK(v <= INT_MAX, "[gemm] {} = {} exceeds cuBLAS's int limit for {} @ {}", what, v, shape_str(a.shape()),
              shape_str(b.shape()));
  return static_cast<int>(v);
}

// float32's compute type follows the process-wide precision switch (tensor/precision.h).
cublasComputeType_t float32_compute() {
  switch (matmul_precision()) {
    case MatmulPrecision::TF32: return CUBLAS_COMPUTE_32F_FAST_TF32;
    case MatmulPrecision::BF16: return CUBLAS_COMPUTE_32F_FAST_16BF;  // bf16 autocast: bf16 products, fp32 sums
    case MatmulPrecision::Highest: break;
  }
  return CUBLAS_COMPUTE_32F;
}

}  // namespace

void CudaBackend::gemm(const Tensor& a_in, const Tensor& b_in, const Tensor& out) {
  LINEA_CHECK(a_in.dim() == 3 && b_in.dim() == 3 && out.dim() == 3, "[gemm] expected 3-d operands, got {} @ {} -> {}",
              shape_str(a_in.shape()), shape_str(b_in.shape()), shape_str(out.shape()));
  const int64_t batch = out.shape()[0], M = out.shape()[1], N = out.shape()[2], K = a_in.shape()[2];
  LINEA_CHECK(a_in.shape() == Shape({batch, M, K}) && b_in.shape() == Shape({batch, K, N}) && out.is_contiguous(),
              "[gemm] shapes {} @ {} -> {} do not match [batch, M, K] @ [batch, K, N] -> [batch, M, N]",
              shape_str(a_in.shape()), shape_str(b_in.shape()), shape_str(out.shape()));
  LINEA_CHECK(a_in.dtype() == b_in.dtype() && a_in.dtype() == out.dtype(), "[gemm] dtype mismatch: {} @ {} -> {}",
              a_in.dtype(), b_in.dtype(), out.dtype());
  LINEA_CHECK(out.dtype() == DType::Float32 || out.dtype() == DType::Float64,
              "[gemm] expected a floating dtype (float32 or float64), got {}", out.dtype());
  LINEA_CHECK(a_in.device().is_cuda() && b_in.device().is_cuda() && out.device().is_cuda(),
              "[gemm] expected CUDA tensors, got {} @ {} -> {}", a_in.device(), b_in.device(), out.device());
  if (out.numel() == 0) return;
  if (K == 0) {  // an empty sum: zeros (cuBLAS would be asked for a leading dimension of 0)
    fill(out, 0.0);
    return;
  }
  const Tensor a = matrix_view(a_in).ok ? a_in : contiguous_copy(a_in);
  const Tensor b = matrix_view(b_in).ok ? b_in : contiguous_copy(b_in);
  const BlasView va = matrix_view(a), vb = matrix_view(b);
  const int64_t sa = batch == 1 ? 0 : a.strides()[0], sb = batch == 1 ? 0 : b.strides()[0];

  // b shared by all batches and a's batches stacked row-major (x[B,T,C] @ W[C,N], every linear
  // layer): one [batch*M, K] @ [K, N] product, which cuBLAS tiles better than many small ones.
  int64_t rows = M, count = batch;
  if (batch > 1 && sb == 0 && !va.trans && sa == M * va.ld && batch * M <= INT_MAX) {
    rows = batch * M;
    count = 1;
  }

  const bool f64 = out.dtype() == DType::Float64;
  const cudaDataType_t type = f64 ? CUDA_R_64F : CUDA_R_32F;
  const cublasComputeType_t compute = f64 ? CUBLAS_COMPUTE_64F : float32_compute();
  // alpha and beta have the compute type's scalar type: double for 64F, float for all 32F kinds.
  const double alpha64 = 1.0, beta64 = 0.0;
  const float alpha32 = 1.0f, beta32 = 0.0f;
  const void* alpha = f64 ? static_cast<const void*>(&alpha64) : &alpha32;
  const void* beta = f64 ? static_cast<const void*>(&beta64) : &beta32;

  LINEA_CUBLAS_CHECK(cublasGemmStridedBatchedEx(
      cublas(), vb.trans ? CUBLAS_OP_T : CUBLAS_OP_N, va.trans ? CUBLAS_OP_T : CUBLAS_OP_N,
      as_int(N, "N", a_in, b_in), as_int(rows, "M", a_in, b_in), as_int(K, "K", a_in, b_in), alpha,
      b.data_ptr(), type, as_int(vb.ld, "b's leading dimension", a_in, b_in), sb,
      a.data_ptr(), type, as_int(va.ld, "a's leading dimension", a_in, b_in), sa, beta,
      out.data_ptr(), type, as_int(N, "N", a_in, b_in), M * N, as_int(count, "the batch count", a_in, b_in), compute,
      CUBLAS_GEMM_DEFAULT));
}

}  // namespace linea::cuda
