// Streaming (recurrent) causal MHLA for generation, spec §3:
//   o_t = s q̂_tᵀ (Σ_{j<c} W_cj S_j + W_cc R_t),   R_t = Σ_{u in chunk c, u ≤ t} k̂_u v_uᵀ.
// This is the same function as the chunkwise form (both expand to the masked quadratic form), so
// the outputs match mhla(..., causal) token for token. Unlike the official code's cached
// generation (spec §3 caveats a, b), every row of W re-weights all finished summaries, so they are
// all kept; the mixed prefix is formed once when a chunk's first token arrives.
//
// Inference only: step() runs under a NoGradGuard and records no graph (train with the chunkwise
// mhla(), which has the hand-written backward).
#include "linea/autograd/function.h"
#include "linea/autograd/ops_matmul.h"
#include "linea/nn/functional/mhla_detail.h"
#include "linea/tensor/error.h"

#include <cmath>

namespace linea::nn::functional {

MHLAStream::MHLAStream(Tensor mix, MHLAOptions opts) : mix_(mix.detach()), opts_(opts) {
  LINEA_CHECK(opts.causal, "[MHLAStream] streaming is the causal form: set opts.causal = true");
  LINEA_CHECK(opts.block_len > 0, "[MHLAStream] block_len must be positive, got {}", opts.block_len);
  detail::check_scale_eps("MHLAStream", opts);
  LINEA_CHECK(mix.dim() == 2 && mix.size(0) == mix.size(1) && mix.size(0) > 0,
              "[MHLAStream] mix must be a square [M, M] matrix, got shape {}", shape_str(mix.shape()));
  LINEA_CHECK(is_floating(mix.dtype()), "[MHLAStream] mix must be float32 or float64, got {}", mix.dtype());
}

Tensor MHLAStream::step(const Tensor& q, const Tensor& k, const Tensor& v) {
  NoGradGuard no_grad;
  const int64_t C = opts_.block_len, M = mix_.size(0);
  LINEA_CHECK(q.dim() == 3 && k.shape() == q.shape() && v.dim() == 3 && v.size(0) == q.size(0) &&
                  v.size(1) == q.size(1),
              "[MHLAStream] expected q, k [B, H, d] and v [B, H, dv], got q {}, k {}, v {}", shape_str(q.shape()),
              shape_str(k.shape()), shape_str(v.shape()));
  LINEA_CHECK(q.dtype() == mix_.dtype() && k.dtype() == mix_.dtype() && v.dtype() == mix_.dtype(),
              "[MHLAStream] dtypes differ: q {}, k {}, v {}, mix {}", q.dtype(), k.dtype(), v.dtype(), mix_.dtype());
  LINEA_CHECK(q.device() == mix_.device() && k.device() == mix_.device() && v.device() == mix_.device(),
              "[MHLAStream] q, k, v and mix must be on one device");
  const Shape state{q.size(0), q.size(1), q.size(2), v.size(2)};
  LINEA_CHECK(!running_.defined() || running_.shape() == state,
              "[MHLAStream] shapes changed mid-stream: the state is {}, this step needs {}",
              shape_str(running_.shape()), shape_str(state));
  LINEA_CHECK(pos_ < M * C,
              "[MHLAStream] position {} exceeds the mixing matrix's M*block_len = {}*{} = {} tokens",
              pos_, M, C, M * C);

  const double s = opts_.scale != 0 ? opts_.scale : 1.0 / std::sqrt(static_cast<double>(q.size(2)));
  const int64_t c = pos_ / C;
  if (pos_ % C == 0) {  // the first token of chunk c: close chunk c-1, mix the prefix once
    if (c > 0) summaries_.push_back(running_);
    running_ = zeros(state, Options(q.dtype(), q.device()));
    if (c == 0) {
      prefix_ = running_;
    } else {  // s Σ_{j<c} W_cj S_j as one [1, c] @ [c, B·H·d·dv] product
      Tensor row = mix_.select(0, c).narrow(0, 0, c).unsqueeze(0) * s;
      prefix_ = matmul(row, stack(summaries_).view({c, -1})).view(state);
    }
  }
  Tensor qh = detail::feature_map(q, opts_.feature_map, opts_.eps);
  Tensor kh = detail::feature_map(k, opts_.feature_map, opts_.eps);
  running_ = running_ + kh.unsqueeze(-1) * v.unsqueeze(-2);  // R_t = R_{t-1} + k̂_t v_tᵀ
  Tensor mixed = prefix_ + running_ * (mix_.at({c, c}) * s);
  ++pos_;
  return matmul(qh.unsqueeze(-2), mixed).squeeze(-2);  // [B, H, 1, d] @ [B, H, d, dv]
}

}  // namespace linea::nn::functional
