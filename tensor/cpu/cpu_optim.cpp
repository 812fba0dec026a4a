// Optimizer steps (nn/optim.cpp): one fused loop per parameter, reading each element once; and
// the sum of squares and the scaling behind clip_grad_norm_.
//
// The loops are `parallel for`, not `parallel for simd`: GCC 12 leaves the combined simd construct
// with an if clause scalar (measured: docs/benchmarks.md, "Small kernel details").
//
// Elements are independent, so a parameter beyond kParallelMin elements is split over all threads,
// smaller ones run side by side on different threads, and the result does not depend on the
// thread count. The scalars are cast to the parameter's
// dtype first and the arithmetic stays in that dtype, as in PyTorch's float32 optimizers.
#include <algorithm>
#include <cmath>

#include "linea/tensor/cpu/vec_math.h"

#include "linea/tensor/cpu/isa_begin.h"
#include "linea/tensor/cpu/cpu_backend.h"
#include "linea/tensor/cpu/fetch_ahead.h"
#include "linea/tensor/cpu/lane_sums.h"

namespace linea::cpu::inline LINEA_ISA_NS {

namespace {

constexpr int64_t kParallelMin = 1 << 16;

template <class T>
void sgd_loop(T* p, const T* g, T* buf, int64_t n, T lr, T wd, T momentum, bool nesterov, bool first) {
#pragma omp parallel for schedule(static) if (n > kParallelMin)
  for (int64_t i = 0; i < n; ++i) {
    T d = g[i] + wd * p[i];
    if (buf) {
      buf[i] = first ? d : momentum * buf[i] + d;
      d = nesterov ? d + momentum * buf[i] : buf[i];
    }
    p[i] -= lr * d;
  }
}

template <class T>
void adamw_loop(T* p, const T* g, T* m, T* v, int64_t n, T decay, T beta1, T beta2, T step_size, T sqrt_bc2, T eps) {
#pragma omp parallel for schedule(static) if (n > kParallelMin)
  for (int64_t i = 0; i < n; ++i) {
    p[i] *= decay;
    m[i] = beta1 * m[i] + (1 - beta1) * g[i];
    v[i] = beta2 * v[i] + (1 - beta2) * g[i] * g[i];
    p[i] -= step_size * m[i] / (std::sqrt(v[i]) / sqrt_bc2 + eps);
  }
}

// f(param) for every parameter: the small ones (most of a small model's, each under kParallelMin
// elements) spread over the threads, one parameter per thread at a time, the big ones after them
// split over all threads inside their loop: with every parameter on one thread a small model's step
// runs far below memory bandwidth (measured: docs/benchmarks.md, "Other kernels and steps").
template <class P, class F>
void for_each_param(const std::vector<P>& params, F f) {
  const int64_t n = static_cast<int64_t>(params.size());
#pragma omp parallel for schedule(dynamic, 1)
  for (int64_t i = 0; i < n; ++i)
    if (params[i].param.numel() <= kParallelMin) f(params[i]);
  for (const P& p : params)
    if (p.param.numel() > kParallelMin) f(p);
}

}  // namespace

void CpuBackend::do_adamw_step(const std::vector<AdamWParam>& params, double beta1, double beta2, double eps) {
  for_each_param(params, [&](const AdamWParam& a) {
    dispatch_floating(a.param.dtype(), "adamw_step", [&]<class T>() {
      adamw_loop<T>(a.param.data<T>(), a.grad.data<T>(), a.exp_avg.data<T>(), a.exp_avg_sq.data<T>(),
                    a.param.numel(), T(a.decay), T(beta1), T(beta2), T(a.step_size), T(a.sqrt_bc2), T(eps));
    });
  });
}

void CpuBackend::do_sgd_step(const std::vector<SgdParam>& params, double momentum, bool nesterov) {
  for_each_param(params, [&](const SgdParam& s) {
    dispatch_floating(s.param.dtype(), "sgd_step", [&]<class T>() {
      T* buf = s.momentum_buffer.defined() ? s.momentum_buffer.data<T>() : nullptr;
      sgd_loop<T>(s.param.data<T>(), s.grad.data<T>(), buf, s.param.numel(), T(s.lr), T(s.weight_decay),
                  T(momentum), nesterov, s.first);
    });
  });
}

// Each tensor's sum on one thread, the tensors spread over the threads: a model's gradients are many
// and small, and one after another on one thread they take a visible part of a step (measured:
// docs/benchmarks.md, "Other kernels and steps").
void CpuBackend::do_sum_squares(const std::vector<Tensor>& xs, const Tensor& out) {
  const int64_t n = static_cast<int64_t>(xs.size());
  int64_t total = 0;
  for (const Tensor& x : xs) total += x.numel();
  double* o = out.data<double>();
#pragma omp parallel for schedule(dynamic, 1) if (n > 1 && total > kParallelMin)
  for (int64_t t = 0; t < n; ++t)
    dispatch_floating(xs[t].dtype(), "sum_squares", [&]<class T>() {
      // In 16 independent lanes: one running sum (an `omp simd` reduction keeps a single vector) is a
      // chain of dependent adds that ran at one element per cycle; 8 lanes ran no faster than that.
      const T* d = xs[t].data<T>();
      o[t] = lane_sum<double, 16>(xs[t].numel(), [&](int64_t i) { return static_cast<double>(d[i]) * d[i]; });
    });
}

// Elementwise, so the elements of all the tensors are one range, split evenly over the threads in
// one parallel region, where a binary Mul per gradient would start a parallel region per gradient
// (measured: docs/benchmarks.md, "Other kernels and steps").
void CpuBackend::do_scale_all(const std::vector<Tensor>& xs, double factor) {
  int64_t total = 0;
  for (const Tensor& x : xs) total += x.numel();
#pragma omp parallel if (total > kParallelMin)
  {
    const TaskRange mine = my_tasks(total);  // this thread's share of the elements
    int64_t base = 0;                         // x's first element in the range
    for (const Tensor& x : xs) {
      const int64_t a = std::max(mine.begin, base) - base, b = std::min(mine.end, base + x.numel()) - base;
      if (a < b)
        dispatch_floating(x.dtype(), "scale_all", [&]<class T>() {
          T* d = x.data<T>();
          const T f = static_cast<T>(factor);
          for (int64_t i = a; i < b; ++i) d[i] *= f;
        });
      base += x.numel();
    }
  }
}

}  // namespace linea::cpu::inline LINEA_ISA_NS

#include "linea/tensor/cpu/isa_end.h"
