#include "data/dataloader.h"

#include <omp.h>

#include <algorithm>
#include <numeric>

#include "data/sampling.h"

namespace linea::data {

namespace {

// x, once checked against y and the options: the checks run in the member initialisers, before
// the worker thread starts, so a bad argument throws with no thread to stop.
Tensor checked(Tensor x, const Tensor& y, const DataLoaderOptions& opts) {
  LINEA_CHECK(x.defined() && y.defined() && x.dim() >= 1 && y.dim() >= 1 && x.size(0) == y.size(0),
              "[DataLoader] x and y need the same first dim, got shapes {} and {}",
              x.defined() ? shape_str(x.shape()) : "undefined", y.defined() ? shape_str(y.shape()) : "undefined");
  auto selectable = [](DType t) { return t == DType::Float32 || t == DType::Float64 || t == DType::Int64; };
  LINEA_CHECK(selectable(x.dtype()) && selectable(y.dtype()),
              "[DataLoader] x and y must be float32, float64 or int64 (what index_select takes), got {} and {}",
              x.dtype(), y.dtype());
  LINEA_CHECK(opts.batch_size > 0 && opts.prefetch > 0,
              "[DataLoader] batch_size and prefetch must be positive, got {} and {}", opts.batch_size, opts.prefetch);
  const int64_t last = opts.drop_last ? 0 : x.size(0) % opts.batch_size;
  LINEA_CHECK(opts.shards >= 1 && opts.shard >= 0 && opts.shard < opts.shards,
              "[DataLoader] shard {} of {}: need shards >= 1 and 0 <= shard < shards", opts.shard, opts.shards);
  LINEA_CHECK(opts.batch_size % opts.shards == 0 && last % opts.shards == 0,
              "[DataLoader] batches of {} (the last of {} samples: {}) do not split evenly over {} shards; pick a batch "
              "size that does, or drop_last", opts.batch_size, x.size(0), last == 0 ? opts.batch_size : last, opts.shards);
  return x;
}

}  // namespace

DataLoader::DataLoader(Tensor x, Tensor y, DataLoaderOptions opts)
    : x_(checked(std::move(x), y, opts)), y_(std::move(y)), opts_(std::move(opts)), worker_([this] { work(); }) {}

DataLoader::~DataLoader() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  worker_.join();
}

int64_t DataLoader::batches_per_epoch() const {
  const int64_t n = size(), b = opts_.batch_size;
  return opts_.drop_last ? n / b : (n + b - 1) / b;
}

void DataLoader::start_epoch(int64_t epoch, int64_t first_batch) {
  const int64_t batches = batches_per_epoch();
  LINEA_CHECK(epoch >= 0 && first_batch >= 0 && first_batch <= batches,
              "[DataLoader] start_epoch({}, {}): need epoch >= 0 and 0 <= first_batch <= {}", epoch, first_batch,
              batches);
  std::vector<int64_t> order(size());
  std::iota(order.begin(), order.end(), 0);
  if (opts_.shuffle) {
    Generator gen(derive_seed(opts_.seed, epoch));
    shuffle(order, gen);
  }
  Tensor order_t = from_vector(order);
  {
    std::lock_guard lock(mu_);
    ++generation_;
    started_ = true;
    order_ = std::move(order_t);
    epoch_ = epoch;
    next_make_ = next_take_ = first_batch;
    end_ = batches;
    ready_.clear();
  }
  cv_.notify_all();
}

std::optional<Batch> DataLoader::next() {
  std::unique_lock lock(mu_);
  LINEA_CHECK(started_, "[DataLoader] call start_epoch(epoch) before next()");
  if (next_take_ == end_) return std::nullopt;
  cv_.wait(lock, [&] { return !ready_.empty(); });
  Ready r = std::move(ready_.front());
  ready_.pop_front();
  ++next_take_;
  lock.unlock();
  cv_.notify_all();  // room for the worker
  if (r.error) std::rethrow_exception(r.error);
  return std::move(r.batch);
}

Batch DataLoader::make_batch(const Tensor& order, int64_t epoch, int64_t index) const {
  NoGradGuard no_grad;  // batches are data, never part of a graph
  const int64_t begin = index * opts_.batch_size;
  const int64_t global = std::min(opts_.batch_size, size() - begin), rows = global / opts_.shards;
  const Tensor idx = order.narrow(0, begin + opts_.shard * rows, rows);
  Batch b{index_select(x_, 0, idx), index_select(y_, 0, idx)};
  if (opts_.transform) {
    Generator gen(derive_seed(opts_.seed, epoch, index + 1));  // stream 0 is the epoch's order
    b.x = opts_.transform(b.x, gen);
  }
  return b;
}

void DataLoader::work() {
  // Kernels called here run serially: a second OpenMP team would fight the training thread's
  // team for the same cores.
  omp_set_num_threads(1);
  std::unique_lock lock(mu_);
  while (true) {
    cv_.wait(lock, [&] {
      return stop_ || (next_make_ < end_ && static_cast<int64_t>(ready_.size()) < opts_.prefetch);
    });
    if (stop_) return;
    const int64_t index = next_make_++, epoch = epoch_;
    const uint64_t generation = generation_;
    const Tensor order = order_;
    lock.unlock();  // make the batch while the consumer trains on the previous one
    Ready r;
    try {
      r.batch = make_batch(order, epoch, index);
    } catch (...) {
      r.error = std::current_exception();
    }
    lock.lock();
    if (generation == generation_) {
      ready_.push_back(std::move(r));
      cv_.notify_all();
    }
  }
}

}  // namespace linea::data
