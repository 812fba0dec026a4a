// Fused softmax attention on the GPU (attention.cu): the CudaBackend methods check the backend
// contract of tensor/backend.h and launch the kernels. The backward is three launches: D =
// rowsum(dO ∘ O), then dK/dV and dQ in two separate passes (deterministic, no atomics). The
// kernels take contiguous [B·H, N, e] blocks (packed_rows.h).
#include <initializer_list>
#include <limits>

#include "linea/cuda/cuda_backend.h"
#include "linea/cuda/launch_attention.h"
#include "linea/cuda/packed_rows.h"
#include "linea/tensor/error.h"
#include "linea/tensor/kernel_checks.h"

namespace linea::cuda {

namespace {

// The backend contract (tensor/kernel_checks.h), then what is the GPU's own: every tensor on q's
// CUDA device, head dims within the kernels' limit.
void check_attention(const char* op, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& lse,
                     std::initializer_list<const Tensor*> like_q, std::initializer_list<const Tensor*> like_v) {
  kernel_checks::attention(op, q, k, v, lse, like_q, like_v);
  auto on_device = [&](const Tensor* t) {
    arg(*t, op);  // on a CUDA device
    LINEA_CHECK(t->device() == q.device(), "[{}] expected every tensor on {}, got one on {}", op, q.device(),
                t->device());
  };
  for (const Tensor* t : {&q, &k, &v, &lse}) on_device(t);
  for (const Tensor* t : like_q) on_device(t);
  for (const Tensor* t : like_v) on_device(t);
  const int64_t BH = q.size(0) * q.size(1), N = q.size(2), d = q.size(3), dv = v.size(3);
  LINEA_CHECK(d <= kAttentionMaxHead && dv <= kAttentionMaxHead,
              "[{}] the CUDA kernels take head dims up to {}, got q {} / v {}", op, kAttentionMaxHead,
              shape_str(q.shape()), shape_str(v.shape()));
  // One block per (batch·head, tile): the grid must fit gridDim.x.
  LINEA_CHECK(BH * ((N + kAttentionTile - 1) / kAttentionTile) <= std::numeric_limits<int32_t>::max(),
              "[{}] too many (batch·head, tile) blocks for one launch: q {}", op, shape_str(q.shape()));
}

AttentionShape shape(const Tensor& q, const Tensor& v, double scale, bool causal) {
  return {q.size(0) * q.size(1), q.size(2), static_cast<int>(q.size(3)), static_cast<int>(v.size(3)), scale, causal};
}

}  // namespace

void CudaBackend::attention_forward(const Tensor& q, const Tensor& k, const Tensor& v, double scale, bool causal,
                                    const Tensor& out, const Tensor& lse, const Tensor& probs) {
  check_attention("attention_forward", q, k, v, lse, {}, {&v, &out});
  kernel_checks::attention_probs("attention_forward", q, probs, 0, false);  // the kernels recompute P
  if (lse.numel() == 0) return;  // no rows: an empty grid is not a valid launch
  const Tensor qc = packed(*this, q), kc = packed(*this, k), vc = packed(*this, v), oc = packed_out(out);
  LINEA_CUDA_CHECK(launch_attention_forward(q.dtype(), shape(q, v, scale, causal), qc.data_ptr(), kc.data_ptr(),
                                            vc.data_ptr(), oc.data_ptr(), lse.data_ptr()));
  check_launch("attention_forward");
  unpack(*this, oc, out);
}

void CudaBackend::attention_backward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out,
                                     const Tensor& lse, const Tensor& probs, const Tensor& dout, double scale,
                                     bool causal, const Tensor& dq, const Tensor& dk, const Tensor& dv) {
  check_attention("attention_backward", q, k, v, lse, {&dq, &dk}, {&v, &out, &dout, &dv});
  kernel_checks::attention_probs("attention_backward", q, probs, 0, false);
  if (lse.numel() == 0) return;
  const AttentionShape s = shape(q, v, scale, causal);
  const DType t = q.dtype();
  const Tensor qc = packed(*this, q), kc = packed(*this, k), vc = packed(*this, v);
  const Tensor oc = packed(*this, out), gc = packed(*this, dout);
  const Tensor dqc = packed_out(dq), dkc = packed_out(dk), dvc = packed_out(dv);
  Tensor D = empty(lse.shape(), lse.dtype(), lse.device());
  LINEA_CUDA_CHECK(launch_attention_row_dot(t, s, oc.data_ptr(), gc.data_ptr(), D.data_ptr()));
  check_launch("attention_row_dot");
  LINEA_CUDA_CHECK(launch_attention_dkdv(t, s, qc.data_ptr(), kc.data_ptr(), vc.data_ptr(), gc.data_ptr(),
                                         lse.data_ptr(), D.data_ptr(), dkc.data_ptr(), dvc.data_ptr()));
  check_launch("attention_dkdv");
  LINEA_CUDA_CHECK(launch_attention_dq(t, s, qc.data_ptr(), kc.data_ptr(), vc.data_ptr(), gc.data_ptr(),
                                       lse.data_ptr(), D.data_ptr(), dqc.data_ptr()));
  check_launch("attention_dq");
  unpack(*this, dqc, dq);
  unpack(*this, dkc, dk);
  unpack(*this, dvc, dv);
}

}  // namespace linea::cuda
