// CudaBackend's fused kernels for nn/ (tensor/backend.h, "fused kernels for nn/"): validate the
// tensors as the CPU backend does, then call the launchers of fused.cu.
#include <limits>
#include <memory>
#include <vector>

#include "linea/cuda/cuda_backend.h"
#include "linea/cuda/launch_fused.h"
#include "linea/tensor/error.h"
#include "linea/tensor/fused_checks.h"

namespace linea::cuda {

namespace {

// Multi-tensor apply: for each dtype present, the table of that dtype's non-empty parameters
// (with first_block) goes to device memory in one copy and `launch` runs one kernel over it.
template <class Launch>
void apply_fused(const char* kernel, std::vector<std::pair<DType, FusedParam>> entries, Launch&& launch) {
  for (DType dtype : {DType::Float32, DType::Float64}) {
    std::vector<FusedParam> table;
    int64_t nblocks = 0;
    for (auto& [d, fp] : entries) {
      if (d != dtype || fp.n == 0) continue;
      fp.first_block = nblocks;
      nblocks += fused_blocks(fp.n);
      table.push_back(fp);
    }
    if (table.empty()) continue;
    LINEA_CHECK(nblocks < std::numeric_limits<int32_t>::max() &&
                    table.size() < static_cast<size_t>(std::numeric_limits<int>::max()),
                "[{}] {} parameters in {} blocks exceed one launch", kernel, table.size(), nblocks);
    // The table's device copy is freed when this returns: the caching allocator hands it out
    // again only to work queued after this kernel on the same stream.
    const std::size_t nbytes = table.size() * sizeof(FusedParam);
    std::shared_ptr<Storage> dev_table = instance().allocate(nbytes);
    instance().copy_from_host(*dev_table, 0, table.data(), nbytes);
    launch(dtype, static_cast<const FusedParam*>(dev_table->data), static_cast<int>(table.size()), nblocks);
    check_launch(kernel);
  }
}

// out (0-d float64) = Σ x² or Σ x over contiguous floating x, through launch_sum.
void device_sum(const Tensor& x, bool square, const Tensor& out) {
  const TensorArg xa = arg(x, "sum"), oa = arg(out, "sum");
  // Partial sums in a scratch block, freed (stream-ordered, like apply_fused's table) on return.
  std::shared_ptr<Storage> partial = instance().allocate(kSumBlocks * sizeof(double));
  launch_sum(xa.dtype, xa.data, x.numel(), square, static_cast<double*>(partial->data), static_cast<double*>(oa.data));
  check_launch("sum_partial_kernel / sum_partials_kernel");
}

}  // namespace

void CudaBackend::cross_entropy_forward(const Tensor& x, const Tensor& target, int64_t ignore_index,
                                        double label_smoothing, const Tensor& lse, const Tensor& loss,
                                        const Tensor& total) {
  const char* op = "cross_entropy_forward";
  const auto [rows, C] = fused_checks::cross_entropy_forward(x, target, lse, loss, total);
  const TensorArg xa = arg(x, op), ta = arg(target, op), la = arg(lse, op), lo = arg(loss, op);
  launch_cross_entropy_forward(xa.dtype, xa.data, static_cast<const int64_t*>(ta.data), rows, C, ignore_index,
                               label_smoothing, static_cast<double*>(la.data), static_cast<double*>(lo.data));
  check_launch("ce_forward_kernel");
  if (total.defined()) device_sum(loss, false, total);
}

void CudaBackend::cross_entropy_backward(const Tensor& x, const Tensor& target, const Tensor& lse,
                                         const Tensor& weight, int64_t ignore_index, double label_smoothing,
                                         const Tensor& dx) {
  const char* op = "cross_entropy_backward";
  const auto [rows, C] = fused_checks::cross_entropy_backward(x, target, lse, weight, dx);
  const TensorArg xa = arg(x, op), ta = arg(target, op), la = arg(lse, op), wa = arg(weight, op), da = arg(dx, op);
  launch_cross_entropy_backward(xa.dtype, xa.data, static_cast<const int64_t*>(ta.data),
                                static_cast<const double*>(la.data), static_cast<const double*>(wa.data),
                                rows ? wa.strides[0] : 0, rows, C, ignore_index, label_smoothing, da.data);
  check_launch("ce_backward_kernel");
}

void CudaBackend::adamw_step(const std::vector<AdamWParam>& params, double beta1, double beta2, double eps) {
  std::vector<std::pair<DType, FusedParam>> entries;
  for (const AdamWParam& a : params) {
    fused_checks::adamw(a, DeviceType::CUDA);
    FusedParam fp;
    fp.param = a.param.data_ptr();
    fp.grad = a.grad.data_ptr();
    fp.buf0 = a.exp_avg.data_ptr();
    fp.buf1 = a.exp_avg_sq.data_ptr();
    fp.n = a.param.numel();
    fp.s0 = a.decay;
    fp.s1 = a.step_size;
    fp.s2 = a.sqrt_bc2;
    entries.emplace_back(a.param.dtype(), fp);
  }
  apply_fused("adamw_kernel", std::move(entries), [&](DType d, const FusedParam* table, int n, int64_t nblocks) {
    launch_adamw_step(d, table, n, nblocks, beta1, beta2, eps);
  });
}

void CudaBackend::sgd_step(const std::vector<SgdParam>& params, double momentum, bool nesterov) {
  std::vector<std::pair<DType, FusedParam>> entries;
  for (const SgdParam& s : params) {
    fused_checks::sgd(s, DeviceType::CUDA);
    FusedParam fp;
    fp.param = s.param.data_ptr();
    fp.grad = s.grad.data_ptr();
    fp.buf0 = s.momentum_buffer.defined() ? s.momentum_buffer.data_ptr() : nullptr;
    fp.n = s.param.numel();
    fp.s0 = s.lr;
    fp.s1 = s.weight_decay;
    fp.first = s.first ? 1 : 0;
    entries.emplace_back(s.param.dtype(), fp);
  }
  apply_fused("sgd_kernel", std::move(entries), [&](DType d, const FusedParam* table, int n, int64_t nblocks) {
    launch_sgd_step(d, table, n, nblocks, momentum, nesterov);
  });
}

void CudaBackend::sum_squares(const std::vector<Tensor>& xs, const Tensor& out) {
  fused_checks::sum_squares(xs, out);
  for (size_t t = 0; t < xs.size(); ++t) device_sum(xs[t], true, out.select(0, int64_t(t)));
}

void CudaBackend::scale_all(const std::vector<Tensor>& xs, double factor) {
  fused_checks::scale_all(xs, DeviceType::CUDA);
  std::vector<std::pair<DType, FusedParam>> entries;
  for (const Tensor& x : xs) {
    FusedParam fp;
    fp.param = x.data_ptr();
    fp.n = x.numel();
    fp.s0 = factor;
    entries.emplace_back(x.dtype(), fp);
  }
  apply_fused("scale_kernel", std::move(entries), [&](DType d, const FusedParam* table, int n, int64_t nblocks) {
    launch_scale_all(d, table, n, nblocks);
  });
}

void CudaBackend::random_uniform(const Tensor& out, uint64_t seed, uint64_t offset) {
  fused_checks::random_out(out);
  const TensorArg oa = arg(out, "random_uniform");
  launch_random_uniform(oa.dtype, oa.data, out.numel(), seed, offset);
  check_launch("uniform_kernel");
}

void CudaBackend::cumsum(const Tensor& x, const Tensor& out, int64_t outer, int64_t n, int64_t inner, bool exclusive,
                         bool reverse) {
  fused_checks::cumsum(x, out, outer, n, inner);
  const TensorArg xa = arg(x, "cumsum"), oa = arg(out, "cumsum");
  launch_cumsum(xa.dtype, xa.data, oa.data, outer, n, inner, exclusive, reverse);
  check_launch("cumsum_kernel");
}

}  // namespace linea::cuda
