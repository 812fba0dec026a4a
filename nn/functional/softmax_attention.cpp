// Softmax attention, fused and tiled: the public op. The kernels live behind the backend
// interface (Backend::attention_forward / attention_backward: tensor/cpu/cpu_attention.cpp on the
// CPU, cuda/attention.cu on the GPU). The forward saves the per-row logsumexp, so the backward
// recomputes each probability tile instead of storing the N×N matrix: memory is O(N·d).
#include <cmath>

#include "linea/autograd/function.h"
#include "linea/nn/functional/attention.h"
#include "linea/nn/functional/attention_checks.h"
#include "linea/tensor/backend.h"
#include "linea/tensor/error.h"

namespace linea::nn::functional {

Tensor softmax_attention(const Tensor& q, const Tensor& k, const Tensor& v, SoftmaxAttentionOptions opts) {
  detail::check_qkv("softmax_attention", q, k, v);
  LINEA_CHECK(opts.scale >= 0, "[softmax_attention] scale must be >= 0 (0 means 1/sqrt(d)), got {}", opts.scale);
  const int64_t B = q.size(0), H = q.size(1), N = q.size(2), d = q.size(3), dv = v.size(3);
  LINEA_CHECK(N > 0 && d > 0 && dv > 0, "[softmax_attention] empty sequence or head dim: q {} / v {}",
              shape_str(q.shape()), shape_str(v.shape()));
  const int64_t BH = B * H;
  const double scale = opts.scale > 0 ? opts.scale : 1.0 / std::sqrt(double(d));
  const bool causal = opts.causal;
  auto flat = [&](const Tensor& x) { return x.contiguous().view({BH, N, x.size(3)}); };
  return custom_function(
      "softmax_attention", {q, k, v},
      [&](const std::vector<Tensor>& in) {
        Tensor qc = flat(in[0]), kc = flat(in[1]), vc = flat(in[2]);
        Tensor o = empty({BH, N, dv}, q.dtype(), q.device()), lse = empty({BH, N}, q.dtype(), q.device());
        backend(q.device()).attention_forward(qc, kc, vc, scale, causal, o, lse);
        return Forward{o.view({B, H, N, dv}), {qc, kc, vc, o, lse}};
      },
      [=](const std::vector<Tensor>& s, const Tensor& g) -> std::vector<Tensor> {
        const Tensor& qc = s[0];
        Tensor gq = empty({BH, N, d}, qc.dtype(), qc.device()), gk = empty({BH, N, d}, qc.dtype(), qc.device());
        Tensor gv = empty({BH, N, dv}, qc.dtype(), qc.device()), gc = g.contiguous().view({BH, N, dv});
        backend(qc.device()).attention_backward(qc, s[1], s[2], s[3], s[4], gc, scale, causal, gq, gk, gv);
        return {gq.view({B, H, N, d}), gk.view({B, H, N, d}), gv.view({B, H, N, dv})};
      });
}

}  // namespace linea::nn::functional
