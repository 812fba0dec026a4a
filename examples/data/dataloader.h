// DataLoader: batches of a tensor dataset (inputs x [N, ...], targets y [N, ...]) in a seeded
// random order, made on a background thread while the current batch trains.
//
//   DataLoader loader(train.x, train.y, {.batch_size = 128, .seed = 1, .transform = augment});
//   for (int64_t epoch = 0; epoch < epochs; ++epoch) {
//     loader.start_epoch(epoch);
//     while (auto batch = loader.next()) train_step(batch->x, batch->y);
//   }
//
// Everything random is a function of (seed, epoch, batch index) only: epoch e's order comes from
// its own generator and each batch's transform gets its own, so a run resumed with
// start_epoch(e, b) sees exactly the batches the original run saw, whatever the thread timing.
#pragma once
#include <condition_variable>
#include <deque>
#include <exception>
#include <functional>
#include <mutex>
#include <optional>
#include <thread>

#include <linea/linea.h>

namespace linea::data {

struct Batch {
  Tensor x;
  Tensor y;
};

struct DataLoaderOptions {
  int64_t batch_size = 128;
  bool shuffle = true;
  bool drop_last = false;  // drop a last batch smaller than batch_size
  uint64_t seed = 0;
  // Runs on the worker thread on each batch of inputs (e.g. random crops), with a generator
  // seeded from (seed, epoch, batch). Its exceptions reach the caller of next().
  std::function<Tensor(const Tensor& x, Generator& gen)> transform;
  int64_t prefetch = 2;  // batches made ahead of the consumer
  // Data-parallel training: process `shard` of `shards` gets rows [shard·b/shards, (shard+1)·b/shards)
  // of each global batch of b, so N processes together see exactly the batches one process sees.
  // Every batch (the last one too, unless drop_last) must split evenly. The transform draws from
  // the global batch's generator for the rows it gets, so augmented rows differ from a one-process run.
  int64_t shard = 0, shards = 1;
};

class DataLoader {
 public:
  // x and y must have the same first dim; their dtype must be one index_select takes.
  DataLoader(Tensor x, Tensor y, DataLoaderOptions opts = {});
  ~DataLoader();  // stops and joins the worker
  DataLoader(const DataLoader&) = delete;
  DataLoader& operator=(const DataLoader&) = delete;

  int64_t size() const { return x_.size(0); }
  int64_t batches_per_epoch() const;
  // Begins epoch `epoch` at batch `first_batch` (non-zero when resuming), dropping whatever was
  // prepared for the previous one.
  void start_epoch(int64_t epoch, int64_t first_batch = 0);
  // The next batch of the epoch, or nullopt when it is over. Rethrows the worker's exceptions.
  std::optional<Batch> next();

 private:
  struct Ready {
    Batch batch;
    std::exception_ptr error;
  };
  void work();
  Batch make_batch(const Tensor& order, int64_t epoch, int64_t index) const;

  const Tensor x_, y_;
  const DataLoaderOptions opts_;
  std::mutex mu_;
  std::condition_variable cv_;  // both sides wait on it: "a batch is ready" / "there is room"
  // Guarded by mu_:
  bool stop_ = false;
  bool started_ = false;
  uint64_t generation_ = 0;  // bumped by start_epoch: a batch of an older epoch is thrown away
  Tensor order_;             // int64 [N]: this epoch's sample order
  int64_t epoch_ = 0, next_make_ = 0, next_take_ = 0, end_ = 0;
  std::deque<Ready> ready_;
  std::thread worker_;  // last: starts once everything above exists
};

}  // namespace linea::data
