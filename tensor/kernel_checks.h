// Argument checks and host-side geometry of the core kernels (backend.h: gemm, norms, reductions
// and softmax, elementwise, attention, indexing). Each Backend method runs its checks once
// (backend.cpp) before the device's kernel, so every device rejects the same inputs with the
// same message. Each backend adds only what is its own (the CUDA limits of its kernels, where
// indices are range-checked). The fused nn/ kernels have theirs in fused_checks.h. The checks are
// defined in kernel_checks.cpp, so this header is fmt-free and the .cu files call the reporting
// helpers (index_in_range, *_unsupported) too.
#pragma once
#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <utility>

#include "linea/tensor/backend.h"

namespace linea::kernel_checks {

// ---- gemm ----

// a [batch, M, K] @ b [batch, K, N] (+ bias [N]) (+ residual) -> out [batch, M, N] contiguous, all
// float32 or all float64, bias and residual (if defined) contiguous on out's device, the residual
// out's shape and either out itself or in another storage.
void gemm(const Tensor& a, const Tensor& b, const Tensor& out, const Tensor& bias, const Tensor& residual);
// Backend::linear_weight_grad's operands: g [rows, out], x [rows, in], dw [out, in], db [out].
void linear_weight_grad(const Tensor& g, const Tensor& x, const Tensor& dw, const Tensor& db);

// How BLAS (OpenBLAS or cuBLAS) sees one [rows, cols] matrix with row stride rs and column
// stride cs. The leading dimensions it gives are valid for both (ld >= cols row-major, ld >= rows
// column-major).
struct BlasView {
  bool ok = false;     // false: BLAS cannot read this layout, copy first
  bool trans = false;  // stored column-major: BLAS reads it transposed
  int64_t ld = 0;      // leading dimension
};

inline BlasView blas_view(int64_t rows, int64_t cols, int64_t rs, int64_t cs) {
  // A single row or column has one meaningful stride; the other may be anything (even 0).
  if ((cs == 1 || cols == 1) && (rows == 1 || rs >= std::max<int64_t>(cols, 1)))
    return {true, false, rows == 1 ? std::max<int64_t>(cols, 1) : rs};
  if ((rs == 1 || rows == 1) && (cols == 1 || cs >= std::max<int64_t>(rows, 1)))
    return {true, true, cols == 1 ? std::max<int64_t>(rows, 1) : cs};
  return {};
}

// The view of one matrix of a [batch, rows, cols] operand.
inline BlasView matrix_view(const Tensor& t) {
  return blas_view(t.shape()[1], t.shape()[2], t.strides()[1], t.strides()[2]);
}

// t itself when BLAS can read it, else a contiguous copy on its device (a broadcast batch stays a
// single copy with batch stride 0).
inline Tensor blas_operand(const Tensor& t) {
  if (matrix_view(t).ok) return t;
  const bool broadcast = t.strides()[0] == 0;
  Tensor src = broadcast ? t.as_strided({1, t.shape()[1], t.shape()[2]}, t.strides(), t.offset()) : t;
  Tensor c = empty(src.shape(), src.dtype(), src.device());
  backend(t.device()).copy(src, c);
  if (!broadcast) return c;
  return c.as_strided(t.shape(), {0, c.strides()[1], c.strides()[2]}, 0);
}

// ---- LayerNorm / RMSNorm ----

using Operands = std::initializer_list<std::pair<const char*, const Tensor*>>;

// x contiguous with at least 1 dim, read as [rows, n] over its last dim, and every defined operand
// checked against it: same dtype, contiguous, and the shape of x (rowwise), [rows] (per_row) or
// [n] (per_feature).
void row_geometry(const char* op, const Tensor& x, Operands rowwise, Operands per_row, Operands per_feature);

// weight, bias, dweight and dbias are optional; the kernels read x as last_dim_rows(x).
void layernorm_forward(const Tensor& x, const Tensor& weight, const Tensor& bias, const Tensor& out,
                       const Tensor& mean, const Tensor& rstd);

void layernorm_backward(const Tensor& dy, const Tensor& x, const Tensor& weight, const Tensor& mean,
                        const Tensor& rstd, const Tensor& dx, const Tensor& dweight, const Tensor& dbias);

void rmsnorm_forward(const Tensor& x, const Tensor& weight, const Tensor& out, const Tensor& rstd);

void rmsnorm_backward(const Tensor& dy, const Tensor& x, const Tensor& weight, const Tensor& rstd, const Tensor& dx,
                      const Tensor& dweight);

// ---- reduce and softmax ----

// x read as [outer, n, inner] -> out [outer, inner]. Returns false when there is no output to
// compute (outer * inner == 0); the dtypes are checked only when there is.
bool reduce(ReduceOp op, const Tensor& x, const Tensor& out, int64_t outer, int64_t n, int64_t inner);

// Rows and row length of a softmax over the last dim (a 0-d tensor is one row of one element).
inline std::pair<int64_t, int64_t> last_dim_rows(const Tensor& t) {
  const int64_t n = t.dim() == 0 ? 1 : t.shape().back();
  return {n == 0 ? 0 : t.numel() / n, n};
}

void softmax(const Tensor& x, const Tensor& out);

void softmax_backward(const Tensor& y, const Tensor& dy, const Tensor& dx);

// ---- elementwise ----

void elementwise_out(const char* op, const Tensor& out, const Tensor& in);

void unary(UnaryOp op, const Tensor& x, const Tensor& out);

void binary(BinaryOp op, const Tensor& a, const Tensor& b, const Tensor& out);

void where(const Tensor& cond, const Tensor& a, const Tensor& b, const Tensor& out);

// Backend::activation_with_grad: an op with a derivative pass, x floating, y and dydx contiguous
// and like x (shape, dtype, device).
void activation_with_grad(UnaryOp op, const Tensor& x, const Tensor& y, const Tensor& dydx);

// The errors for a dtype an op has no kernel for: most unary ops are floating-only, and bool has
// no arithmetic.
[[noreturn]] void unary_unsupported(UnaryOp op, DType t);

[[noreturn]] void binary_unsupported(BinaryOp op, DType t);

// ---- softmax attention ----

// q, k [B, H, N, d], v [B, H, N, dv], the tensors in like_q / like_v shaped like q / v, all with
// unit stride along the last dim (any other strides); lse [B·H, N] contiguous; float32 or float64,
// all of q's dtype.
void attention(const char* op, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& lse,
               std::initializer_list<const Tensor*> like_q, std::initializer_list<const Tensor*> like_v);
// The saved probabilities (Backend::attention_probs_size): with size 0 probs must be undefined;
// otherwise a contiguous [B·H, size] of q's dtype, or undefined where `required` is false.
void attention_probs(const char* op, const Tensor& q, const Tensor& probs, int64_t size, bool required);

// ---- indexing (values float32/float64/int64, indices int64) ----
// These check everything but the index values; each backend range-checks those on its device
// and reports a bad one with index_in_range.

void index_in_range(const char* op, bool in_range, int64_t bad_value, int64_t dim, int64_t size);

// dim lies in `values` (the tensor whose dtype the kernel moves), which has a supported dtype;
// idx is int64.
void index_common(const char* op, const Tensor& values, int64_t dim, const Tensor& idx);

// `a` has `b`'s shape except along `dim`, where it has n entries (a 1-d index's length).
void shape_but_dim(const char* op, const Tensor& a, const Tensor& b, int64_t dim, int64_t n);

// gather/scatter_add: idx may be smaller than x, but never larger off `dim`.
void index_fits(const char* op, const Tensor& idx, const Tensor& x, int64_t dim);

// out[.., i, ..] = x[.., idx[i], ..] along dim; idx is 1-d (or 0-d: one index).
void index_select(const Tensor& x, int64_t dim, const Tensor& idx, const Tensor& out);

// out[.., idx[i], ..] += src[.., i, ..] along dim.
void index_add(const Tensor& out, int64_t dim, const Tensor& idx, const Tensor& src);

// out = x[.., idx[..], ..] along dim, out shaped like idx.
void gather(const Tensor& x, int64_t dim, const Tensor& idx, const Tensor& out);

// out[.., idx[..], ..] += src along dim, src shaped like idx.
void scatter_add(const Tensor& out, int64_t dim, const Tensor& idx, const Tensor& src);

}  // namespace linea::kernel_checks
