// DataParallel (data_parallel.h): buckets, the grad-ready hooks that fill them, and synchronize().
#include "linea/dist/data_parallel.h"

#include <chrono>
#include <unordered_set>

#include "linea/autograd/graph.h"
#include "linea/tensor/backend.h"
#include "linea/tensor/creation.h"
#include "linea/tensor/error.h"

namespace linea::dist {

namespace {

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// Overwrites t with rank 0's values (through a contiguous copy when t is a strided view).
void broadcast_from_main(const Tensor& t) {
  if (t.is_contiguous()) return broadcast(t, 0);
  Tensor c = t.contiguous();
  broadcast(c, 0);
  backend(t.device()).copy(c, t);
}

Tensor slot_view(const Tensor& buffer, int64_t offset, const Tensor& param) {
  return buffer.narrow(0, offset, param.numel()).view(param.shape());
}

}  // namespace

DataParallel::DataParallel(nn::Module& model, DataParallelOptions opts) {
  LINEA_CHECK(opts.bucket_bytes > 0, "[DataParallel] bucket_bytes must be > 0, got {}", opts.bucket_bytes);
  if (world().size == 1) return;
  for (const auto& [_, p] : model.named_parameters()) broadcast_from_main(p);
  for (const auto& [_, b] : model.named_buffers()) broadcast_from_main(b);

  // Trainable parameters, each once (a tied weight is one tensor), last registered first.
  std::vector<Tensor> params;
  std::unordered_set<const TensorImpl*> seen;
  for (const auto& [_, p] : model.named_parameters())
    if (p.requires_grad() && seen.insert(&p.impl()).second) params.push_back(p);
  int64_t bytes = 0;
  for (auto it = params.rbegin(); it != params.rend(); ++it) {
    const Tensor& p = *it;
    const int64_t nbytes = p.numel() * static_cast<int64_t>(itemsize(p.dtype()));
    const bool fits = !buckets_.empty() && bytes + nbytes <= opts.bucket_bytes &&
                      buckets_.back().slots.front().param.dtype() == p.dtype() &&
                      buckets_.back().slots.front().param.device() == p.device();
    if (!fits) buckets_.emplace_back(), bytes = 0;
    Bucket& b = buckets_.back();
    const int64_t offset = b.slots.empty() ? 0 : b.slots.back().offset + b.slots.back().param.numel();
    b.slots.push_back({p, offset});
    bytes += nbytes;
  }
  for (size_t i = 0; i < buckets_.size(); ++i) {
    Bucket& b = buckets_[i];
    const Slot& last = b.slots.back();
    b.buffer = empty({last.offset + last.param.numel()}, last.param.dtype(), last.param.device());
    for (size_t j = 0; j < b.slots.size(); ++j)
      autograd::set_grad_ready_hook(b.slots[j].param, [this, i, j](const Tensor& g) { on_grad_ready(i, j, g); });
  }
}

DataParallel::~DataParallel() {
  for (Bucket& b : buckets_) {
    b.work.wait();
    for (Slot& s : b.slots) autograd::set_grad_ready_hook(s.param, {});
  }
}

void DataParallel::on_grad_ready(size_t bucket, size_t slot, const Tensor& grad) {
  if (!sync_) return;
  const auto t = Clock::now();
  Bucket& b = buckets_[bucket];
  Slot& s = b.slots[slot];
  LINEA_CHECK(!s.ready, "[DataParallel] a second backward reached parameter of shape {} before synchronize(): run all "
              "but the last backward of a step inside no_sync()", shape_str(s.param.shape()));
  backend(grad.device()).copy(grad, slot_view(b.buffer, s.offset, s.param));
  s.ready = true;
  ++b.ready;
  start_ready_buckets();
  stats_.hooks_s += seconds_since(t);
}

void DataParallel::start(Bucket& b) {
  b.work = all_reduce_async(b.buffer, ReduceOp::Mean);
  stats_.bytes += b.buffer.numel() * static_cast<int64_t>(itemsize(b.buffer.dtype()));
}

void DataParallel::start_ready_buckets() {
  while (next_start_ < buckets_.size() && buckets_[next_start_].ready == int64_t(buckets_[next_start_].slots.size()))
    start(buckets_[next_start_++]);
  for (size_t i = 0; i < next_start_; ++i) buckets_[i].work.test();  // lets MPI move the earlier ones along
}

void DataParallel::synchronize() {
  LINEA_CHECK(sync_, "[DataParallel] synchronize() inside no_sync(): the gradients are meant to stay local there");
  if (buckets_.empty()) return;
  const auto t = Clock::now();
  // What backward did not finish: parameters it did not reach this step give their gradient so
  // far (accumulated under no_sync) or zeros, so that every rank reduces the same buckets.
  for (; next_start_ < buckets_.size(); ++next_start_) {
    Bucket& b = buckets_[next_start_];
    for (Slot& s : b.slots) {
      if (s.ready) continue;
      const Tensor dst = slot_view(b.buffer, s.offset, s.param);
      if (s.param.grad().defined()) backend(dst.device()).copy(s.param.grad(), dst);
      else backend(dst.device()).fill(dst, 0.0);
    }
    start(b);
  }
  for (Bucket& b : buckets_) {
    b.work.wait();
    for (Slot& s : b.slots) {
      const Tensor mean = slot_view(b.buffer, s.offset, s.param);
      autograd::Meta& m = *s.param.impl().autograd;
      if (!m.grad.defined()) m.grad = empty(s.param.shape(), s.param.dtype(), s.param.device());
      backend(mean.device()).copy(mean, m.grad);
      s.ready = false;
    }
    b.ready = 0;
  }
  next_start_ = 0;
  ++stats_.steps;
  stats_.wait_s += seconds_since(t);
}

}  // namespace linea::dist
