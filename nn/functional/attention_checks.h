// Input validation shared by softmax_attention, linear_attention and attention_matrix (not part
// of the public API): one message format for every attention op.
#pragma once
#include "linea/tensor/error.h"
#include "linea/tensor/tensor.h"

namespace linea::nn::functional::detail {

// q, k: [B, H, N, d]; v: [B, H, N, dv] (skipped when undefined); one floating dtype, one device.
inline void check_qkv(const char* op, const Tensor& q, const Tensor& k, const Tensor& v = Tensor()) {
  LINEA_CHECK(q.defined() && k.defined(), "[{}] q and k must be defined tensors", op);
  LINEA_CHECK(q.dim() == 4 && k.dim() == 4, "[{}] expected q, k shaped [B, H, N, d], got q {} and k {}", op,
              shape_str(q.shape()), shape_str(k.shape()));
  LINEA_CHECK(q.shape() == k.shape(), "[{}] q {} and k {} must have the same shape", op, shape_str(q.shape()),
              shape_str(k.shape()));
  if (v.defined())
    LINEA_CHECK(v.dim() == 4 && v.size(0) == q.size(0) && v.size(1) == q.size(1) && v.size(2) == q.size(2),
                "[{}] v {} must be [B, H, N, dv] with B, H, N of q {}", op, shape_str(v.shape()),
                shape_str(q.shape()));
  LINEA_CHECK(is_floating(q.dtype()) && k.dtype() == q.dtype() && (!v.defined() || v.dtype() == q.dtype()),
              "[{}] q, k, v must share one floating dtype, got {} / {} / {}", op, q.dtype(), k.dtype(),
              v.defined() ? v.dtype() : q.dtype());
  LINEA_CHECK(k.device() == q.device() && (!v.defined() || v.device() == q.device()),
              "[{}] q, k, v must be on one device, got {} / {} / {}", op, q.device(), k.device(),
              v.defined() ? v.device() : q.device());
}

}  // namespace linea::nn::functional::detail
