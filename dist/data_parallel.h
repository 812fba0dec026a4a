// DataParallel: data-parallel training of one model over the world (PyTorch DDP's scheme).
//
//   dist::init();
//   auto model = make_model();                 // same code on every rank
//   dist::DataParallel dp(*model);             // rank 0's parameters and buffers, everywhere
//   for (...) {
//     loss_of(my_shard_of_the_batch).backward();   // reductions start during backward
//     dp.synchronize();                         // every .grad is now the mean over the ranks
//     clip_grad_norm_(...); optimizer.step();   // identical on every rank, so weights stay equal
//   }
//
// The trainable parameters are grouped into buckets of about `bucket_bytes` (25 MB, the DDP
// default) in reverse registration order, roughly the order backward finishes them in. A
// grad-ready hook (autograd::set_grad_ready_hook) copies each finished gradient into its bucket's
// flat buffer; a full bucket starts a non-blocking all_reduce (mean) at once, while backward goes
// on computing the gradients of earlier layers. Buckets start in index order on every rank (MPI
// requires the same order everywhere). synchronize() starts what is left — a parameter that got
// no gradient this step contributes zeros — waits, and copies the means back into .grad.
//
// Within `auto guard = dp.no_sync();` backward only accumulates locally (gradient accumulation);
// the first backward after the guard is gone reduces the accumulated sums. In a world of one,
// DataParallel registers no hooks and synchronize() returns at once.
#pragma once
#include <cstdint>
#include <vector>

#include "linea/dist/dist.h"
#include "linea/nn/module.h"

namespace linea::dist {

struct DataParallelOptions {
  int64_t bucket_bytes = 25 << 20;
};

class DataParallel {
 public:
  explicit DataParallel(nn::Module& model, DataParallelOptions opts = {});
  ~DataParallel();  // removes the hooks
  DataParallel(const DataParallel&) = delete;
  DataParallel& operator=(const DataParallel&) = delete;

  void synchronize();

  class NoSync {
   public:
    explicit NoSync(DataParallel& dp) : dp_(dp), prev_(dp.sync_) { dp_.sync_ = false; }
    ~NoSync() { dp_.sync_ = prev_; }
    NoSync(const NoSync&) = delete;
    NoSync& operator=(const NoSync&) = delete;

   private:
    DataParallel& dp_;
    bool prev_;
  };
  [[nodiscard]] NoSync no_sync() { return NoSync(*this); }

  // Where the communication time went, summed since construction: hooks_s in
  // the grad-ready hooks during backward (copies into buckets, starting reductions), wait_s in
  // synchronize() waiting for reductions to finish (the part backward did not hide).
  struct Stats {
    double hooks_s = 0, wait_s = 0;
    int64_t steps = 0, bytes = 0;  // synchronize() calls; bytes all-reduced per rank
  };
  const Stats& stats() const { return stats_; }
  int64_t num_buckets() const { return static_cast<int64_t>(buckets_.size()); }

 private:
  struct Slot {
    Tensor param;
    int64_t offset = 0;  // in elements, into the bucket's buffer
    bool ready = false;
  };
  struct Bucket {
    std::vector<Slot> slots;
    Tensor buffer;  // flat, the parameters' dtype and device
    int64_t ready = 0;
    Work work;
  };
  void on_grad_ready(size_t bucket, size_t slot, const Tensor& grad);
  void start_ready_buckets();  // in index order, as far as they are full
  void start(Bucket& b);

  std::vector<Bucket> buckets_;
  size_t next_start_ = 0;  // the next bucket to start
  bool sync_ = true;
  Stats stats_;
};

}  // namespace linea::dist
