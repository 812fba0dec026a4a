// Softmax attention, fused and tiled: the public op. The kernels live behind the backend
// interface (Backend::attention_forward / attention_backward: tensor/cpu/cpu_attention.cpp on the
// CPU, cuda/attention.cu on the GPU). The forward saves the per-row logsumexp, so the backward
// recomputes each probability tile instead of storing the N×N matrix: memory is O(N·d). Short
// sequences are the exception where the backend keeps their probabilities (the CPU, N <= 128 in
// float32): O(N²) per head, at most 64 KB, read by the backward instead of recomputed.
#include <cmath>
#include <limits>

#include "linea/autograd/function.h"
#include "linea/autograd/ops_elementwise.h"
#include "linea/autograd/ops_matmul.h"
#include "linea/autograd/ops_reduce.h"
#include "linea/tensor/creation.h"
#include "linea/nn/functional/attention.h"
#include "linea/nn/functional/attention_checks.h"
#include "linea/nn/functional/packed_qkv.h"
#include "linea/tensor/backend.h"
#include "linea/tensor/error.h"

namespace linea::nn::functional {

namespace {

// `inputs`: {q, k, v}, or with packed = H > 0 the packed projection {qkv} (softmax_attention_qkv,
// detail::qkv_function). The kernels read q, k, v, the output and its gradient through their
// strides (backend.h), so the heads stay where the projection put them; in the packed form dq, dk,
// dv are written straight into the thirds of one gradient, and the output is laid out so that
// merging its heads is a view.
Tensor attend(const std::vector<Tensor>& inputs, int64_t packed, SoftmaxAttentionOptions opts) {
  const char* op = packed ? "softmax_attention_qkv" : "softmax_attention";
  const detail::Heads h = detail::heads_of(op, inputs, packed);
  const Tensor &q = h[0], &v = h[2];
  detail::check_qkv(op, q, h[1], v);
  LINEA_CHECK(std::isfinite(opts.scale) && opts.scale >= 0,
              "[{}] scale must be a finite number > 0, or 0 for 1/sqrt(d); got {}", op, opts.scale);
  const int64_t B = q.size(0), H = q.size(1), N = q.size(2), d = q.size(3), dv = v.size(3);
  LINEA_CHECK(N > 0 && d > 0 && dv > 0, "[{}] empty sequence or head dim: q {} / v {}", op, shape_str(q.shape()),
              shape_str(v.shape()));
  const double scale = opts.scale > 0 ? opts.scale : 1.0 / std::sqrt(double(d));
  const bool causal = opts.causal;
  // The probabilities the backend keeps for the backward (short sequences on the CPU), where
  // there will be one.
  const int64_t probs_size = backend(q.device()).attention_probs_size(N, q.dtype());
  const bool save_probs = probs_size > 0 && autograd::needs_grad(inputs);
  using detail::unit_stride_rows;
  return detail::qkv_function(
      op, inputs, packed,
      [&](const detail::Heads& x, const std::vector<Tensor>&) {
        Tensor q4 = unit_stride_rows(x[0]), k4 = unit_stride_rows(x[1]), v4 = unit_stride_rows(x[2]);
        Tensor o = detail::empty_rows_like(q4, dv), lse = empty({B * H, N}, q.dtype(), q.device());
        Tensor probs = save_probs ? empty({B * H, probs_size}, q.dtype(), q.device()) : Tensor();
        backend(q.device()).attention_forward(q4, k4, v4, scale, causal, o, lse, probs);
        std::vector<Tensor> saved{q4, k4, v4, o, lse};
        if (save_probs) saved.push_back(probs);
        return Forward{o, saved};
      },
      [=](const std::vector<Tensor>& s, const Tensor& g, const detail::Heads& dest) -> std::vector<Tensor> {
        const Tensor &q4 = s[0], &k4 = s[1], &v4 = s[2];
        const detail::Heads gr = dest[0].defined() ? dest
                                                   : detail::Heads{detail::empty_rows_like(q4, q4.size(3)),
                                                                   detail::empty_rows_like(k4, k4.size(3)),
                                                                   detail::empty_rows_like(v4, v4.size(3))};
        backend(q4.device()).attention_backward(q4, k4, v4, s[3], s[4], s.size() > 5 ? s[5] : Tensor(),
                                                unit_stride_rows(g), scale, causal, gr[0], gr[1], gr[2]);
        return {gr[0], gr[1], gr[2]};
      },
      [scale, causal, N](const detail::Heads& x, const std::vector<Tensor>&) {  // softmax(s q kᵀ, masked) v
        const Options o(x[0].dtype(), x[0].device());
        Tensor logits = matmul(x[0], x[1].transpose(-2, -1)) * scale;
        if (causal)
          logits = where(tril_mask(N, N, 0, o.device), logits, scalar(-std::numeric_limits<double>::infinity(), o));
        return matmul(softmax(logits, -1), x[2]);
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
