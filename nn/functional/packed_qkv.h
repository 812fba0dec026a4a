// The packed-projection forms of the attention ops (softmax_attention_qkv, linear_attention_qkv,
// mhla_qkv; not part of the public API). q, k, v are views of the thirds of one [B, N, 3·H·d]
// projection, and the op is one custom_function on that projection, whose backward puts dq, dk, dv
// into the thirds of one gradient. The projection's backward is then one product of each kind
// instead of three, and no zero-filled gradient per slice is added up.
#pragma once
#include <array>
#include <functional>
#include <utility>
#include <vector>

#include "linea/autograd/function.h"
#include "linea/tensor/backend.h"
#include "linea/tensor/creation.h"
#include "linea/tensor/error.h"

namespace linea::nn::functional::detail {

using Heads = std::array<Tensor, 3>;  // q, k, v (or their gradients) as [B, H, N, e]

// q, k, v as [B, H, N, d] views of the thirds of qkv [B, N, 3·heads·d] (the layout QKVAttention's
// qkv Linear writes).
inline Heads packed_heads(const char* op, const Tensor& qkv, int64_t heads) {
  LINEA_CHECK(qkv.dim() == 3 && heads > 0 && qkv.size(2) > 0 && qkv.size(2) % (3 * heads) == 0,
              "[{}] expected qkv [B, N, 3·heads·d] for {} heads, got {}", op, heads, shape_str(qkv.shape()));
  const int64_t B = qkv.size(0), N = qkv.size(1), C = qkv.size(2) / 3;
  Heads t;
  for (int64_t i = 0; i < 3; ++i) t[i] = qkv.narrow(2, i * C, C).view({B, N, heads, C / heads}).transpose(1, 2);
  return t;
}

// x as the fused kernels read [B, H, N, e] operands (backend.h): itself when its last dim has unit
// stride (a projection's heads, in place), else a contiguous copy.
inline Tensor unit_stride_rows(const Tensor& x) { return x.strides()[3] == 1 ? x : x.contiguous(); }

// A fresh [B, H, N, e] result laid out like x: token-major ([B, N, H, e] storage, seen through a
// transpose) when x is the heads of a [B, N, H·e] projection, so that merging the heads after
// attention, and the projection's backward before it, are views rather than copies.
inline Tensor empty_rows_like(const Tensor& x, int64_t e) {
  const int64_t B = x.size(0), H = x.size(1), N = x.size(2);
  if (H > 1 && N > 1 && x.strides()[2] > x.strides()[1])
    return empty({B, N, H, e}, x.dtype(), x.device()).transpose(1, 2);
  return empty({B, H, N, e}, x.dtype(), x.device());
}

// q, k, v of an attention's inputs: {q, k, v, ...}, or with packed = H > 0 {qkv, ...}.
inline Heads heads_of(const char* op, const std::vector<Tensor>& inputs, int64_t packed) {
  return packed ? packed_heads(op, inputs[0], packed) : Heads{inputs[0], inputs[1], inputs[2]};
}

// Hands an attention's forward and backward q, k, v. `inputs` is {q, k, v, extra...}, or with
// packed = H > 0 {qkv, extra...}. backward(saved, g, dest) returns dq, dk, dv and the extra inputs'
// gradients; dest holds where the packed form wants dq, dk, dv (undefined tensors when not
// packed): a backward may write them there itself, or return its own, which are copied in.
// composite(q, k, v, extra) is the op in recorded ops, what create_graph differentiates
// (custom_function).
using QkvForward = std::function<Forward(const Heads& qkv, const std::vector<Tensor>& extra)>;
using QkvBackward = std::function<std::vector<Tensor>(const std::vector<Tensor>& saved, const Tensor& grad,
                                                      const Heads& dest)>;

using QkvComposite = std::function<Tensor(const Heads& qkv, const std::vector<Tensor>& extra)>;

inline Tensor qkv_function(const char* name, const std::vector<Tensor>& inputs, int64_t packed,
                           const QkvForward& forward, QkvBackward backward, QkvComposite composite = nullptr) {
  auto split = [name, packed](const std::vector<Tensor>& in) {
    return std::pair{heads_of(name, in, packed), std::vector<Tensor>(in.begin() + (packed ? 1 : 3), in.end())};
  };
  return custom_function(
      name, inputs,
      [&](const std::vector<Tensor>& in) {
        const auto [h, extra] = split(in);
        return forward(h, extra);
      },
      [name, packed, shape = inputs[0].shape(), backward = std::move(backward)](
          const std::vector<Tensor>& saved, const Tensor& g) -> std::vector<Tensor> {
        if (!packed) return backward(saved, g, Heads{});
        Tensor dqkv = empty(shape, g.dtype(), g.device());
        const Heads dest = packed_heads(name, dqkv, packed);
        std::vector<Tensor> d = backward(saved, g, dest);
        for (size_t i = 0; i < 3; ++i)
          if (d[i].impl_ptr() != dest[i].impl_ptr()) backend(g.device()).copy(d[i], dest[i]);
        std::vector<Tensor> out{dqkv};
        out.insert(out.end(), d.begin() + 3, d.end());
        return out;
      },
      composite ? CustomComposite([split, composite = std::move(composite)](const std::vector<Tensor>& in) {
        const auto [h, extra] = split(in);
        return composite(h, extra);
      })
                : CustomComposite());
}

}  // namespace linea::nn::functional::detail
