// An 8x8 float block transposed in registers: 8 row loads, 24 shuffles, 8 row stores, where the
// element-by-element copy made 64 scalar stores into 8 cache lines (it was 60% of the direct
// gemm's own time on softmax attention's K and V tiles, N = 64). Included only by the files
// compiled with AVX2 or AVX-512 enabled (gemm_direct_avx2.cpp, gemm_direct_avx512.cpp).
#pragma once
#ifndef LINEA_ISA_NS
#error "a kernel header: include linea/tensor/cpu/isa_begin.h first"
#endif
#include <immintrin.h>

#include <cstdint>

namespace linea::cpu::inline LINEA_ISA_NS {

// dst[j*ldd + i] = src[i*lds + j] for i, j < 8.
inline void transpose8x8(const float* src, int64_t lds, float* dst, int64_t ldd) {
  __m256 r[8], t[8];
  for (int i = 0; i < 8; ++i) r[i] = _mm256_loadu_ps(src + i * lds);
  for (int i = 0; i < 8; i += 2) {  // interleave pairs of rows: (0 1), (2 3), ...
    t[i] = _mm256_unpacklo_ps(r[i], r[i + 1]);
    t[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);
  }
  for (int i = 0; i < 8; i += 4) {  // then pairs of pairs: 4-element columns in each 128-bit lane
    r[i] = _mm256_shuffle_ps(t[i], t[i + 2], _MM_SHUFFLE(1, 0, 1, 0));
    r[i + 1] = _mm256_shuffle_ps(t[i], t[i + 2], _MM_SHUFFLE(3, 2, 3, 2));
    r[i + 2] = _mm256_shuffle_ps(t[i + 1], t[i + 3], _MM_SHUFFLE(1, 0, 1, 0));
    r[i + 3] = _mm256_shuffle_ps(t[i + 1], t[i + 3], _MM_SHUFFLE(3, 2, 3, 2));
  }
  for (int j = 0; j < 4; ++j) {  // and the lanes of rows 0-3 with those of rows 4-7
    _mm256_storeu_ps(dst + j * ldd, _mm256_permute2f128_ps(r[j], r[j + 4], 0x20));
    _mm256_storeu_ps(dst + (j + 4) * ldd, _mm256_permute2f128_ps(r[j], r[j + 4], 0x31));
  }
}

}  // namespace linea::cpu::inline LINEA_ISA_NS
