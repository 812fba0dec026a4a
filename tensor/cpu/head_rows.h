// A per-token tensor [B, H, N, e] seen as rows: the fused attention kernels (cpu_mhla.cpp,
// cpu_attention.cpp) read and write the heads of a [B, N, H·e] (or packed [B, N, 3·H·e])
// projection where they lie, through the strides, instead of copying them into [B·H, N, e] blocks.
// The last dim must have unit stride (the backend contract, tensor/backend.h).
#pragma once
#ifndef LINEA_ISA_NS
#error "a kernel header: include linea/tensor/cpu/isa_begin.h first"
#endif
#include <cstdint>
#include <type_traits>

#include "linea/tensor/tensor.h"

namespace linea::cpu::inline LINEA_ISA_NS {

// Pair bh = (b, h)'s token t starts at pair(bh) + t * ld. P is T or const T.
template <class P>
struct Rows {
  P* p;
  int64_t sb, sh, ld, H, e;
  bool contiguous;
  Rows(const Tensor& t)
      : p(t.data<std::remove_const_t<P>>()), sb(t.strides()[0]), sh(t.strides()[1]), ld(t.strides()[2]),
        H(t.size(1)), e(t.size(3)), contiguous(t.is_contiguous()) {}
  P* pair(int64_t bh) const { return p + (bh / H) * sb + (bh % H) * sh; }
  P* row(int64_t bh, int64_t t) const { return pair(bh) + t * ld; }
};

}  // namespace linea::cpu::inline LINEA_ISA_NS
