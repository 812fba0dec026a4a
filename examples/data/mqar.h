// MQAR, multi-query associative recall, as Zoology generates it (Arora et al. 2023, "Zoology:
// Measuring and Improving Recall in Efficient Language Models", zoology/data/multiquery_ar.py):
// the standard synthetic test of whether a sequence model can look things up in its context.
//
// Each sequence of seq_len tokens starts with num_kv key-value pairs k1 v1 k2 v2 ..., keys drawn
// without repetition from [1, vocab/2), values from [vocab/2, vocab). Then every key is queried
// once: key i reappears at position 2·num_kv + 2·g_i, its gap g_i drawn without replacement from
// [0, space), space = (seq_len − 2·num_kv)/2, with weight (g+1)^(a−1) (Zoology's power law,
// a = 0.01: near queries are likelier). The model must predict the paired value at the query
// key; only those positions are scored. The value itself does not follow in the input:
//
//   inputs   k1 v1 k2 v2 k3 v3 | 0  k2 0  0  0  k3 k1 0  0
//   targets  -  -  -  -  -  -  | -  v2 -  -  -  v3 v1 -  -      (- is kIgnoreIndex)
//
// Token 0 fills the rest (Zoology's figure 2, random_non_queries=False); with random_non_queries
// every 0 is replaced by a uniform token of [0, vocab), Zoology's default.
//
// A split is `size` fixed examples: example i is drawn from its own stream derive_seed(seed, i),
// so it is the same sequence whatever batch or order asks for it, and train and test splits with
// different seeds are different examples.
#pragma once
#include <linea/linea.h>

namespace linea::data {

inline constexpr int64_t kIgnoreIndex = -100;  // target positions the loss and accuracy skip

struct MqarConfig {
  int64_t vocab = 8192;
  int64_t seq_len = 64;
  int64_t num_kv = 4;
  double power_a = 0.01;            // the gap law (g+1)^(a−1); a = 1 is uniform
  bool random_non_queries = false;  // fill with random tokens instead of token 0
};

// Throws unless seq_len is even, vocab > seq_len (Zoology's rule: fillers and positions never
// outnumber the tokens), the pairs and their queries fit (4·num_kv <= seq_len) and 0 < a <= 1.
void check_mqar(const MqarConfig& cfg);

// One example into inputs[seq_len] and targets[seq_len] (kIgnoreIndex except at the queries).
void make_mqar_example(const MqarConfig& cfg, Generator& gen, int64_t* inputs, int64_t* targets);

struct MqarBatch {
  Tensor inputs;   // int64 [B, seq_len]
  Tensor targets;  // int64 [B, seq_len]: the value at each query key, kIgnoreIndex elsewhere
};

// Examples `ids` (each in [0, 2^63)) of the split with this seed, in that order.
MqarBatch make_mqar(const MqarConfig& cfg, uint64_t split_seed, const std::vector<int64_t>& ids);

// How many predictions (int64, targets' shape) match the targets where a target is set.
struct Accuracy {
  int64_t correct = 0;
  int64_t total = 0;
  double value() const { return total == 0 ? 0.0 : static_cast<double>(correct) / total; }
};
Accuracy masked_accuracy(const Tensor& predictions, const Tensor& targets);

}  // namespace linea::data
