// The one N-d loop every CPU kernel uses for strided operands. It walks the output's shape in
// row-major order and hands the kernel runs along the innermost dim: (offsets of each operand at
// the run's start, run length, each operand's inner stride). Contiguous operands come through as
// one long run, so kernels keep a tight inner loop; long loops are split over OpenMP threads.
#pragma once
#ifndef LINEA_ISA_NS
#error "a kernel header: include linea/tensor/cpu/isa_begin.h first"
#endif
#include <omp.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <vector>

#include "linea/tensor/shape.h"

namespace linea::cpu::inline LINEA_ISA_NS {

// Elementwise work below this many elements stays on one thread: spawning costs more than it saves.
inline constexpr int64_t kParallelGrain = 32768;

template <std::size_t K>
struct Runs {
  Shape shape;                     // coalesced shape
  std::array<Strides, K> strides;  // coalesced strides per operand
};

// Merge adjacent dims that are contiguous with each other in every operand (and drop size-1 dims).
template <std::size_t K>
Runs<K> coalesce(const Shape& shape, const std::array<const Strides*, K>& st) {
  Runs<K> r;
  for (std::size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == 1) continue;
    bool merge = !r.shape.empty();
    for (std::size_t k = 0; merge && k < K; ++k)
      merge = r.strides[k].back() == (*st[k])[d] * shape[d];
    if (merge) {
      r.shape.back() *= shape[d];
      for (std::size_t k = 0; k < K; ++k) r.strides[k].back() = (*st[k])[d];
    } else {
      r.shape.push_back(shape[d]);
      for (std::size_t k = 0; k < K; ++k) r.strides[k].push_back((*st[k])[d]);
    }
  }
  if (r.shape.empty()) {  // a scalar or all-ones shape: one run of length 1
    r.shape.push_back(1);
    for (std::size_t k = 0; k < K; ++k) r.strides[k].push_back(1);
  }
  return r;
}

// f(const std::array<int64_t,K>& offsets, int64_t n, const std::array<int64_t,K>& inner_strides)
template <std::size_t K, class F>
void for_each_run(const Shape& shape, const std::array<const Strides*, K>& st, F&& f) {
  int64_t total = numel(shape);
  if (total == 0) return;
  Runs<K> r = coalesce<K>(shape, st);
  const int64_t nd = static_cast<int64_t>(r.shape.size());
  const int64_t inner = r.shape.back();
  const int64_t rows = total / inner;
  std::array<int64_t, K> inner_st;
  for (std::size_t k = 0; k < K; ++k) inner_st[k] = r.strides[k].back();

  auto row_offsets = [&](int64_t row) {
    std::array<int64_t, K> off{};
    for (int64_t d = nd - 2; d >= 0; --d) {
      int64_t i = row % r.shape[d];
      row /= r.shape[d];
      for (std::size_t k = 0; k < K; ++k) off[k] += i * r.strides[k][d];
    }
    return off;
  };

  if (rows == 1) {
    // One long run: split it into chunks so big contiguous loops use every thread.
    const int64_t chunk = kParallelGrain;
    const int64_t nchunks = (inner + chunk - 1) / chunk;
#pragma omp parallel for schedule(static) if (nchunks > 1)
    for (int64_t c = 0; c < nchunks; ++c) {
      std::array<int64_t, K> off;
      for (std::size_t k = 0; k < K; ++k) off[k] = c * chunk * inner_st[k];
      f(off, std::min(chunk, inner - c * chunk), inner_st);
    }
    return;
  }
  // Each thread takes a contiguous range of rows: the offsets of its first row by division, then
  // an odometer over the outer dims (short runs, e.g. a head permute's 16 floats, made the
  // per-row divisions the copy's main cost).
#pragma omp parallel if (total > kParallelGrain)
  {
    const int64_t nt = omp_get_num_threads(), t = omp_get_thread_num();
    const int64_t r0 = rows * t / nt, r1 = rows * (t + 1) / nt;
    if (r0 < r1) {
      std::array<int64_t, K> off = row_offsets(r0);
      int64_t small[8];
      std::vector<int64_t> big;
      int64_t* idx = nd - 1 <= 8 ? small : (big.resize(nd - 1), big.data());
      for (int64_t d = nd - 2, row = r0; d >= 0; --d) idx[d] = row % r.shape[d], row /= r.shape[d];
      for (int64_t row = r0; row < r1; ++row) {
        f(off, inner, inner_st);
        for (int64_t d = nd - 2; d >= 0; --d) {  // next row: carry through the outer dims
          for (std::size_t k = 0; k < K; ++k) off[k] += r.strides[k][d];
          if (++idx[d] < r.shape[d]) break;
          for (std::size_t k = 0; k < K; ++k) off[k] -= r.strides[k][d] * r.shape[d];
          idx[d] = 0;
        }
      }
    }
  }
}

}  // namespace linea::cpu::inline LINEA_ISA_NS
