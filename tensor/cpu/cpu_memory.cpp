#include <cstdlib>
#include <cstring>

#include "linea/tensor/cpu/cpu_allocator.h"

#include "linea/tensor/cpu/isa_begin.h"
#include "linea/tensor/cpu/cpu_backend.h"
#include "linea/tensor/cpu/strided.h"

namespace linea::cpu::inline LINEA_ISA_NS {

// This ISA's backend; cpu::instance() (cpu_isa.cpp) picks the one that runs.
Backend& backend() {
  static CpuBackend b;
  return b;
}

std::shared_ptr<Storage> CpuBackend::do_allocate(std::size_t nbytes) {
  if (nbytes == 0) return std::make_shared<Storage>(nullptr, 0, Device::cpu(), nullptr);
  // From the caching allocator (cpu_allocator.h): a steady training step reuses last step's blocks.
  const HostBlock block = host_allocate(nbytes);
  return std::make_shared<Storage>(block.ptr, nbytes, Device::cpu(), [block](void*) { host_release(block); });
}

void CpuBackend::do_copy_from_host(Storage& dst, std::size_t off, const void* src, std::size_t nbytes) {
  if (nbytes) std::memcpy(static_cast<char*>(dst.data) + off, src, nbytes);
}

void CpuBackend::do_copy_to_host(void* dst, const Storage& src, std::size_t off, std::size_t nbytes) {
  if (nbytes) std::memcpy(dst, static_cast<const char*>(src.data) + off, nbytes);
}

void CpuBackend::do_copy(const Tensor& src, const Tensor& dst) {
  dispatch(src.dtype(), [&]<class S>() {
    dispatch(dst.dtype(), [&]<class D>() {
      const S* s = src.data<S>();
      D* d = dst.data<D>();
      for_each_run<2>(dst.shape(), {&dst.strides(), &src.strides()},
                      [&](const std::array<int64_t, 2>& off, int64_t n, const std::array<int64_t, 2>& st) {
                        D* pd = d + off[0];
                        const S* ps = s + off[1];
                        if (st[0] == 1 && st[1] == 1 && std::is_same_v<S, D>) {
                          std::memcpy(pd, ps, n * sizeof(D));
                          return;
                        }
                        for (int64_t i = 0; i < n; ++i) pd[i * st[0]] = static_cast<D>(ps[i * st[1]]);
                      });
    });
  });
}

void CpuBackend::do_fill(const Tensor& dst, double value) {
  dispatch(dst.dtype(), [&]<class T>() {
    T v = static_cast<T>(value);
    T* d = dst.data<T>();
    for_each_run<1>(dst.shape(), {&dst.strides()},
                    [&](const std::array<int64_t, 1>& off, int64_t n, const std::array<int64_t, 1>& st) {
                      for (int64_t i = 0; i < n; ++i) d[off[0] + i * st[0]] = v;
                    });
  });
}

}  // namespace linea::cpu::inline LINEA_ISA_NS

#include "linea/tensor/cpu/isa_end.h"
