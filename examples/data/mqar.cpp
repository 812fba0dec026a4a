#include "data/mqar.h"

#include <numeric>

#include "data/sampling.h"

namespace linea::data {

namespace {

// Moves k random picks to the front of pool (a partial Fisher-Yates). Any permutation in, a
// uniform sample out, so one pool serves every sequence of the batch without a reset.
void pick_front(std::vector<int64_t>& pool, int64_t k, Generator& gen) {
  const int64_t n = static_cast<int64_t>(pool.size());
  for (int64_t i = 0; i < k; ++i) std::swap(pool[i], pool[i + random_below(gen, n - i)]);
}

std::vector<int64_t> iota_vector(int64_t begin, int64_t end) {
  std::vector<int64_t> v(end - begin);
  std::iota(v.begin(), v.end(), begin);
  return v;
}

}  // namespace

MqarBatch make_mqar(const MqarConfig& cfg, int64_t batch, Generator& gen) {
  const int64_t half = cfg.vocab / 2;
  LINEA_CHECK(batch > 0 && cfg.num_kv > 0 && cfg.num_queries > 0 && cfg.num_queries <= cfg.num_kv,
              "[mqar] need batch > 0 and 0 < num_queries <= num_kv, got batch {}, num_kv {}, num_queries {}", batch,
              cfg.num_kv, cfg.num_queries);
  LINEA_CHECK(cfg.num_kv <= half - 1, "[mqar] vocab {} has {} keys [1, {}), too few for num_kv {}", cfg.vocab,
              half - 1, half, cfg.num_kv);
  const int64_t slots = (cfg.seq_len - 2 * cfg.num_kv) / 2;  // two-token query slots after the pairs
  LINEA_CHECK(cfg.seq_len >= 2 * cfg.num_kv && slots >= cfg.num_queries,
              "[mqar] seq_len {} cannot hold {} key-value pairs and {} queries (needs {})", cfg.seq_len, cfg.num_kv,
              cfg.num_queries, 2 * cfg.num_kv + 2 * cfg.num_queries);

  const int64_t T = cfg.seq_len;
  MqarBatch b{empty({batch, T}, DType::Int64), full({batch, T}, static_cast<double>(kIgnoreIndex), DType::Int64)};
  std::vector<int64_t> keys = iota_vector(1, half), values = iota_vector(half, cfg.vocab), slot = iota_vector(0, slots);
  for (int64_t s = 0; s < batch; ++s) {
    int64_t* in = b.inputs.data<int64_t>() + s * T;
    int64_t* tg = b.targets.data<int64_t>() + s * T;
    for (int64_t t = 0; t < T; ++t) in[t] = cfg.noise ? random_below(gen, cfg.vocab) : 0;
    pick_front(keys, cfg.num_kv, gen);
    pick_front(values, cfg.num_kv, gen);
    for (int64_t i = 0; i < cfg.num_kv; ++i) in[2 * i] = keys[i], in[2 * i + 1] = values[i];
    // Query j asks for pair q[j]: the first num_queries of a random order of the pairs.
    std::vector<int64_t> q = iota_vector(0, cfg.num_kv);
    pick_front(q, cfg.num_queries, gen);
    pick_front(slot, cfg.num_queries, gen);
    for (int64_t j = 0; j < cfg.num_queries; ++j) {
      const int64_t p = 2 * cfg.num_kv + 2 * slot[j];
      in[p] = keys[q[j]];
      in[p + 1] = values[q[j]];
      tg[p] = values[q[j]];
    }
  }
  return b;
}

Accuracy masked_accuracy(const Tensor& predictions, const Tensor& targets) {
  LINEA_CHECK(predictions.dtype() == DType::Int64 && targets.dtype() == DType::Int64 &&
                  predictions.shape() == targets.shape(),
              "[masked_accuracy] expected int64 predictions and targets of one shape, got {} {} and {} {}",
              predictions.dtype(), shape_str(predictions.shape()), targets.dtype(), shape_str(targets.shape()));
  const Tensor p = predictions.contiguous(), t = targets.contiguous();
  const int64_t* pp = p.data<int64_t>();
  const int64_t* pt = t.data<int64_t>();
  Accuracy acc;
  for (int64_t i = 0; i < t.numel(); ++i) {
    if (pt[i] == kIgnoreIndex) continue;
    ++acc.total;
    acc.correct += pp[i] == pt[i];
  }
  return acc;
}

}  // namespace linea::data
