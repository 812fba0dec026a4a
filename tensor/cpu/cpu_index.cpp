// Indexing kernels: index_select, index_add, gather, scatter_add (values float32/float64/int64,
// indices int64). Operands may be strided; the outputs written to are contiguous.
//
// Every index is range-checked before any element moves: a throw from inside an OpenMP loop
// would abort the program. index_add and scatter_add accumulate repeated indices, so they only
// parallelise over the dims that are not indexed: two threads never add into the same element.
#include <omp.h>
#include <algorithm>

#include "linea/tensor/kernel_checks.h"

#include "linea/tensor/cpu/isa_begin.h"
#include "linea/tensor/cpu/cpu_backend.h"
#include "linea/tensor/cpu/strided.h"

namespace linea::cpu::inline LINEA_ISA_NS {

namespace {

// The value types of the indexing kernels (kernel_checks:: has rejected any other).
template <class F>
void dispatch_values(DType t, F&& f) {
  if (t == DType::Float32) return f.template operator()<float>();
  if (t == DType::Float64) return f.template operator()<double>();
  return f.template operator()<int64_t>();
}

// Throws unless every element of the int64 idx lies in [0, size).
void check_indices(const char* op, const Tensor& idx, int64_t dim, int64_t size) {
  const int64_t* p = idx.data<int64_t>();
  bool bad = false;
  int64_t bad_value = 0;
  for_each_run<1>(idx.shape(), {&idx.strides()}, [&](const auto& off, int64_t n, const auto& st) {
    for (int64_t j = 0; j < n; ++j) {
      const int64_t v = p[off[0] + j * st[0]];
      if (v < 0 || v >= size) {
#pragma omp critical(linea_bad_index)
        {
          bad = true;
          bad_value = v;
        }
        return;
      }
    }
  });
  kernel_checks::index_in_range(op, !bad, bad_value, dim, size);
}

std::vector<int64_t> without(std::vector<int64_t> v, int64_t dim) {
  v.erase(v.begin() + dim);
  return v;
}

// Walks the "slice" (two operands with the indexed dim removed) in runs; f(offsets, len, strides)
// handles one run for all n indices. A slice that is one single run (a row of a contiguous table,
// as in an embedding) is cut into column blocks, so threads share it without writing the same
// element; otherwise for_each_run spreads the runs over threads.
template <class F>
void for_each_slice_run(const Shape& slice, const Strides& a, const Strides& b, int64_t n, F&& f) {
  if (numel(slice) == 0 || n == 0) return;
  Runs<2> r = coalesce<2>(slice, {&a, &b});
  if (r.shape.size() > 1) {
    for_each_run<2>(slice, {&a, &b}, f);
    return;
  }
  const int64_t len = r.shape[0];
  const std::array<int64_t, 2> st{r.strides[0][0], r.strides[1][0]};
  const int64_t blocks = std::clamp<int64_t>(len / 16, 1, omp_get_max_threads());
  const int64_t block = (len + blocks - 1) / blocks;
#pragma omp parallel for schedule(static) if (n * len > kParallelGrain && blocks > 1)
  for (int64_t c = 0; c < blocks; ++c) {
    const int64_t j0 = c * block;
    if (j0 < len) f(std::array<int64_t, 2>{j0 * st[0], j0 * st[1]}, std::min(block, len - j0), st);
  }
}

// idx of index_select/index_add is 1-d (or 0-d: one index).
int64_t index_stride(const Tensor& idx) { return idx.dim() == 0 ? 0 : idx.strides()[0]; }

}  // namespace

void CpuBackend::do_index_select(const Tensor& x, int64_t dim, const Tensor& idx, const Tensor& out) {
  check_indices("index_select", idx, dim, x.shape()[dim]);
  const int64_t n = idx.numel();
  const int64_t* pi = idx.data<int64_t>();
  const int64_t is = index_stride(idx), xs = x.strides()[dim], os = out.strides()[dim];
  const Strides ost = without(out.strides(), dim), xst = without(x.strides(), dim);
  dispatch_values(x.dtype(), [&]<class T>() {
    const T* px = x.data<T>();
    T* po = out.data<T>();
    for_each_slice_run(without(out.shape(), dim), ost, xst, n, [&](const auto& off, int64_t len, const auto& st) {
      for (int64_t i = 0; i < n; ++i) {
        T* o = po + off[0] + i * os;
        const T* s = px + off[1] + pi[i * is] * xs;
        if (st[0] == 1 && st[1] == 1) {
          std::copy(s, s + len, o);
        } else {
          for (int64_t j = 0; j < len; ++j) o[j * st[0]] = s[j * st[1]];
        }
      }
    });
  });
}

void CpuBackend::do_index_add(const Tensor& out, int64_t dim, const Tensor& idx, const Tensor& src) {
  check_indices("index_add", idx, dim, out.shape()[dim]);
  const int64_t n = idx.numel();
  const int64_t* pi = idx.data<int64_t>();
  const int64_t is = index_stride(idx), os = out.strides()[dim], ss = src.strides()[dim];
  const Strides ost = without(out.strides(), dim), sst = without(src.strides(), dim);
  dispatch_values(out.dtype(), [&]<class T>() {
    T* po = out.data<T>();
    const T* ps = src.data<T>();
    // Each run owns its output elements: the loop over indices (repeats included) stays inside it.
    for_each_slice_run(without(src.shape(), dim), ost, sst, n, [&](const auto& off, int64_t len, const auto& st) {
      for (int64_t i = 0; i < n; ++i) {
        T* o = po + off[0] + pi[i * is] * os;
        const T* s = ps + off[1] + i * ss;
        if (st[0] == 1 && st[1] == 1) {
          for (int64_t j = 0; j < len; ++j) o[j] += s[j];
        } else {
          for (int64_t j = 0; j < len; ++j) o[j * st[0]] += s[j * st[1]];
        }
      }
    });
  });
}

void CpuBackend::do_gather(const Tensor& x, int64_t dim, const Tensor& idx, const Tensor& out) {
  check_indices("gather", idx, dim, x.shape()[dim]);
  const int64_t* pi = idx.data<int64_t>();
  const int64_t xs = x.strides()[dim];
  Strides xst = x.strides();
  xst[dim] = 0;  // the position along dim comes from the index, not from the loop
  dispatch_values(x.dtype(), [&]<class T>() {
    const T* px = x.data<T>();
    T* po = out.data<T>();
    for_each_run<3>(idx.shape(), {&out.strides(), &idx.strides(), &xst},
                    [&](const auto& off, int64_t n, const auto& st) {
                      for (int64_t j = 0; j < n; ++j)
                        po[off[0] + j * st[0]] = px[off[2] + j * st[2] + pi[off[1] + j * st[1]] * xs];
                    });
  });
}

void CpuBackend::do_scatter_add(const Tensor& out, int64_t dim, const Tensor& idx, const Tensor& src) {
  check_indices("scatter_add", idx, dim, out.shape()[dim]);
  const int64_t* pi = idx.data<int64_t>();
  const int64_t os = out.strides()[dim], is = idx.strides()[dim], ss = src.strides()[dim];
  const int64_t k_n = idx.shape()[dim];
  const Strides ost = without(out.strides(), dim), ist = without(idx.strides(), dim), sst = without(src.strides(), dim);
  dispatch_values(out.dtype(), [&]<class T>() {
    T* po = out.data<T>();
    const T* ps = src.data<T>();
    // Runs cover distinct positions off `dim`, hence distinct output elements; the loop along dim,
    // where repeated indices collide, stays inside one run.
    for_each_run<3>(without(idx.shape(), dim), {&ost, &ist, &sst}, [&](const auto& off, int64_t n, const auto& st) {
      for (int64_t k = 0; k < k_n; ++k)
        for (int64_t j = 0; j < n; ++j)
          po[off[0] + j * st[0] + pi[off[1] + j * st[1] + k * is] * os] += ps[off[2] + j * st[2] + k * ss];
    });
  });
}

}  // namespace linea::cpu::inline LINEA_ISA_NS

#include "linea/tensor/cpu/isa_end.h"
