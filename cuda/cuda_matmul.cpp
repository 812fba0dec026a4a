// Batched matrix multiply on cuBLAS: one cublasGemmStridedBatchedEx call per gemm.
//
// cuBLAS is column-major, linea row-major. A row-major [M, N] matrix is, to cuBLAS, the
// column-major [N, M] matrix of its transpose, so we ask cuBLAS for outᵀ = bᵀ aᵀ: operands
// swapped, (m, n) = (N, M). An operand stored row-major then already *is* the transpose that
// product needs (CUBLAS_OP_N); one stored column-major (a .t() view) needs CUBLAS_OP_T. Views are
// never copied unless neither layout fits. A broadcast batch has stride 0, which cuBLAS accepts.
#include <climits>

#include "linea/cuda/cublas.h"
#include "linea/cuda/cuda_backend.h"
#include "linea/tensor/error.h"
#include "linea/tensor/kernel_checks.h"
#include "linea/tensor/precision.h"

namespace linea::cuda {

namespace {

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

void CudaBackend::do_gemm(const Tensor& a_in, const Tensor& b_in, const Tensor& out, const Tensor& bias,
                          const Tensor& residual) {
  const int64_t batch = out.size(0), M = out.size(1), N = out.size(2), K = a_in.size(2);
  LINEA_CHECK(a_in.device().is_cuda() && b_in.device().is_cuda() && out.device().is_cuda(),
              "[gemm] expected CUDA tensors, got {} @ {} -> {}", a_in.device(), b_in.device(), out.device());
  if (out.numel() == 0) return;
  // residual + bias is written into out first (residual: out itself, or copied) and the product
  // added (beta = 1).
  if (residual.defined() && bias.defined()) do_binary(BinaryOp::Add, residual, bias.expand(out.shape()), out);
  else if (residual.defined() && residual.data_ptr() != out.data_ptr()) do_copy(residual, out);
  else if (bias.defined()) do_copy(bias.expand(out.shape()), out);
  const bool add = bias.defined() || residual.defined();
  if (K == 0) {  // an empty sum: out as it was, zeros, or the bias (cuBLAS would be asked for ld = 0)
    if (!add) do_fill(out, 0.0);
    return;
  }
  const Tensor a = kernel_checks::blas_operand(a_in), b = kernel_checks::blas_operand(b_in);
  const kernel_checks::BlasView va = kernel_checks::matrix_view(a), vb = kernel_checks::matrix_view(b);
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
  const double alpha64 = 1.0, beta64 = add ? 1.0 : 0.0;
  const float alpha32 = 1.0f, beta32 = add ? 1.0f : 0.0f;
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
