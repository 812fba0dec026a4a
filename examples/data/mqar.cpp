#include "data/mqar.h"

#include <algorithm>
#include <cmath>

#include "data/sampling.h"

namespace linea::data {

void check_mqar(const MqarConfig& c) {
  LINEA_CHECK(c.num_kv > 0 && c.seq_len > 0 && c.seq_len % 2 == 0,
              "[mqar] need num_kv > 0 and an even seq_len > 0, got num_kv {}, seq_len {}", c.num_kv, c.seq_len);
  LINEA_CHECK(c.vocab > c.seq_len, "[mqar] vocab {} must exceed seq_len {} (Zoology's rule)", c.vocab, c.seq_len);
  LINEA_CHECK(4 * c.num_kv <= c.seq_len, "[mqar] seq_len {} cannot hold {} key-value pairs and their queries (needs {})",
              c.seq_len, c.num_kv, 4 * c.num_kv);
  LINEA_CHECK(c.power_a > 0 && c.power_a <= 1, "[mqar] power_a must be in (0, 1], got {}", c.power_a);
}

void make_mqar_example(const MqarConfig& c, Generator& gen, int64_t* in, int64_t* tg) {
  const int64_t half = c.vocab / 2, context = 2 * c.num_kv, space = (c.seq_len - context) / 2;
  std::fill(in, in + c.seq_len, 0);
  std::fill(tg, tg + c.seq_len, kIgnoreIndex);
  // Keys and values without repetition. vocab > seq_len >= 4·num_kv leaves each range at least
  // twice as large as num_kv, so rejecting repeats ends fast.
  auto draw_distinct = [&](int64_t lo, int64_t hi, int64_t slot0) {
    for (int64_t i = 0; i < c.num_kv; ++i) {
      int64_t t;
      do t = lo + random_below(gen, hi - lo);
      while (std::find(in + slot0, in + slot0 + 2 * i, t) != in + slot0 + 2 * i);
      in[slot0 + 2 * i] = t;
    }
  };
  draw_distinct(1, half, 0);        // keys at the even positions
  draw_distinct(half, c.vocab, 1);  // values at the odd ones
  // Gaps without replacement, one draw after another from the weights still left.
  std::vector<double> w(space);
  for (int64_t g = 0; g < space; ++g) w[g] = std::pow(static_cast<double>(g + 1), c.power_a - 1);
  for (int64_t i = 0; i < c.num_kv; ++i) {
    double total = 0;
    for (double x : w) total += x;
    double u = gen.uniform() * total;
    int64_t g = 0;
    while (g + 1 < space && (w[g] == 0 || (u -= w[g]) >= 0)) ++g;
    while (w[g] == 0) --g;  // rounding ran past the last weight left
    w[g] = 0;
    const int64_t p = context + 2 * g;
    in[p] = in[2 * i];
    tg[p] = in[2 * i + 1];
  }
  if (c.random_non_queries)
    for (int64_t t = 0; t < c.seq_len; ++t)
      if (in[t] == 0) in[t] = random_below(gen, c.vocab);
}

MqarBatch make_mqar(const MqarConfig& cfg, uint64_t split_seed, const std::vector<int64_t>& ids) {
  check_mqar(cfg);
  const auto B = static_cast<int64_t>(ids.size());
  LINEA_CHECK(B > 0, "[mqar] need at least one example id");
  const int64_t T = cfg.seq_len;
  MqarBatch b{empty({B, T}, DType::Int64), empty({B, T}, DType::Int64)};
  for (int64_t s = 0; s < B; ++s) {
    LINEA_CHECK(ids[s] >= 0, "[mqar] example ids are >= 0, got {}", ids[s]);
    Generator gen(derive_seed(split_seed, static_cast<uint64_t>(ids[s])));
    make_mqar_example(cfg, gen, b.inputs.data<int64_t>() + s * T, b.targets.data<int64_t>() + s * T);
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
