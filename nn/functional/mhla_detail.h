// Internals shared by MHLA's op (mhla.cpp) and its streaming form (mhla_stream.cpp): option
// checks, the causal scale, φ and its derivative, token padding.
// Not part of the public API (not in linea.h).
#pragma once
#include <cmath>

#include "linea/autograd/ops_elementwise.h"
#include "linea/autograd/ops_index.h"
#include "linea/nn/functional/attention.h"
#include "linea/tensor/backend.h"
#include "linea/tensor/creation.h"
#include "linea/tensor/error.h"

namespace linea::nn::functional::detail {

// What MHLAOptions allows of scale and eps: finite, scale > 0 (or 0 for d^-1/2), eps >= 0. A NaN
// or infinite scale would turn every output NaN. (The non-causal form divides the scale out.)
inline void check_scale_eps(const char* op, const MHLAOptions& opts) {
  LINEA_CHECK(std::isfinite(opts.scale) && opts.scale >= 0,
              "[{}] scale must be a finite number > 0, or 0 for d^-1/2; got {}", op, opts.scale);
  LINEA_CHECK(std::isfinite(opts.eps) && opts.eps >= 0, "[{}] eps must be a finite number >= 0, got {}", op,
              opts.eps);
}

// The causal form's scale s: opts.scale, or d^-1/2 when it is 0.
inline double causal_scale(const Tensor& q, const MHLAOptions& opts) {
  return opts.scale != 0 ? opts.scale : 1.0 / std::sqrt(static_cast<double>(q.size(-1)));
}

// φ(x) from public differentiable ops, so the composite forms get its gradient from autograd and
// the fused forwards (which run without recording) use the same code.
// elu(x) + 1 = relu(x) + exp(-relu(-x)): x + 1 for x > 0, e^x for x <= 0, and exp never sees a
// positive argument (no overflow for large x).
inline Tensor feature_map(const Tensor& x, FeatureMap fm, double eps) {
  switch (fm) {
    case FeatureMap::ReluEps: return relu(x) + eps;
    case FeatureMap::Elu1: return relu(x) + exp(-relu(-x));
    case FeatureMap::Relu: return relu(x);
    case FeatureMap::Identity: return x;
  }
  throw Error("[mhla] unknown feature map");
}

// dL/dx = dL/dφ · φ'(x) for the hand-written backwards (no graph is recorded from here):
// φ' = 1[x > 0] for relu(+eps); 1 for x > 0 and e^x for x <= 0 (= exp(-relu(-x))) for elu+1.
inline Tensor feature_map_backward(const Tensor& dphi, const Tensor& x, FeatureMap fm) {
  switch (fm) {
    case FeatureMap::ReluEps:
    case FeatureMap::Relu: return activation_backward(BinaryOp::ReluBackward, dphi, x);
    case FeatureMap::Elu1: return dphi * exp(-relu(-x));
    case FeatureMap::Identity: return dphi;
  }
  throw Error("[mhla] unknown feature map");
}

// Zero rows appended along the token axis (dim 2) up to `rows`: [B,H,N,c] -> [B,H,rows,c]
// (differentiable; returns x itself when nothing is missing). Pad AFTER φ: φ(0) = eps ≠ 0 for
// ReluEps, and padded keys must contribute nothing to the summaries.
inline Tensor pad_tokens(const Tensor& x, int64_t rows) {
  const int64_t n = x.size(2);
  if (rows == n) return x;
  Tensor pad = zeros({x.size(0), x.size(1), rows - n, x.size(3)}, Options(x.dtype(), x.device()));
  return cat({x, pad}, 2);
}

}  // namespace linea::nn::functional::detail
