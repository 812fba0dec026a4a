// Softmax attention, fused and tiled: the public op. The kernels live behind the backend
// interface (Backend::attention_forward / attention_backward: tensor/cpu/cpu_attention.cpp on the
// CPU, cuda/attention.cu on the GPU). The forward saves the per-row logsumexp, so the backward
// recomputes each probability tile instead of storing the N×N matrix: memory is O(N·d).
#include <cmath>

#include "linea/autograd/function.h"
#include "linea/nn/functional/attention.h"
#include "linea/nn/functional/attention_checks.h"
#include "linea/nn/functional/packed_qkv.h"
#include "linea/tensor/backend.h"
#include "linea/tensor/error.h"

namespace linea::nn::functional {

namespace {

// `inputs`: {q, k, v}, or with packed = H > 0 the packed projection {qkv} (softmax_attention_qkv,
// detail::qkv_function). The kernels take [B·H, N, e] contiguous operands: q, k, v are copied in,
// and in the packed form their gradients copied out into the thirds of one gradient (where the
// unpacked op's caller would copy them anyway, merging heads).
Tensor attend(const std::vector<Tensor>& inputs, int64_t packed, SoftmaxAttentionOptions opts) {
  const char* op = packed ? "softmax_attention_qkv" : "softmax_attention";
  const detail::Heads h = detail::heads_of(op, inputs, packed);
  const Tensor &q = h[0], &v = h[2];
  detail::check_qkv(op, q, h[1], v);
  LINEA_CHECK(opts.scale >= 0, "[{}] scale must be >= 0 (0 means 1/sqrt(d)), got {}", op, opts.scale);
  const int64_t B = q.size(0), H = q.size(1), N = q.size(2), d = q.size(3), dv = v.size(3);
  LINEA_CHECK(N > 0 && d > 0 && dv > 0, "[{}] empty sequence or head dim: q {} / v {}", op, shape_str(q.shape()),
              shape_str(v.shape()));
  const int64_t BH = B * H;
  const double scale = opts.scale > 0 ? opts.scale : 1.0 / std::sqrt(double(d));
  const bool causal = opts.causal;
  auto flat = [&](const Tensor& x) { return x.contiguous().view({BH, N, x.size(3)}); };
  return detail::qkv_function(
      op, inputs, packed,
      [&](const detail::Heads& x, const std::vector<Tensor>&) {
        Tensor qc = flat(x[0]), kc = flat(x[1]), vc = flat(x[2]);
        Tensor o = empty({BH, N, dv}, q.dtype(), q.device()), lse = empty({BH, N}, q.dtype(), q.device());
        backend(q.device()).attention_forward(qc, kc, vc, scale, causal, o, lse);
        return Forward{o.view({B, H, N, dv}), {qc, kc, vc, o, lse}};
      },
      [=](const std::vector<Tensor>& s, const Tensor& g, const detail::Heads&) -> std::vector<Tensor> {
        const Tensor& qc = s[0];
        Tensor gq = empty({BH, N, d}, qc.dtype(), qc.device()), gk = empty({BH, N, d}, qc.dtype(), qc.device());
        Tensor gv = empty({BH, N, dv}, qc.dtype(), qc.device()), gc = g.contiguous().view({BH, N, dv});
        backend(qc.device()).attention_backward(qc, s[1], s[2], s[3], s[4], gc, scale, causal, gq, gk, gv);
        return {gq.view({B, H, N, d}), gk.view({B, H, N, d}), gv.view({B, H, N, dv})};
      });
}

}  // namespace

Tensor softmax_attention(const Tensor& q, const Tensor& k, const Tensor& v, SoftmaxAttentionOptions opts) {
  return attend({q, k, v}, 0, opts);
}

Tensor softmax_attention_qkv(const Tensor& qkv, int64_t heads, SoftmaxAttentionOptions opts) {
  return attend({qkv}, heads, opts);
}

}  // namespace linea::nn::functional
