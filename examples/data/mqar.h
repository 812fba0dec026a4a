// MQAR, multi-query associative recall (Zoology, Arora et al. 2023): the standard synthetic test of
// whether a sequence model can look things up in its context, where linear attention's
// fixed-size state struggles and softmax attention does not.
//
// Each sequence of seq_len tokens starts with num_kv key-value pairs, k1 v1 k2 v2 ..., keys drawn
// without repetition from [1, vocab/2), values from [vocab/2, vocab). The rest holds num_queries
// of those keys, each followed by its value, in random two-token slots; the other positions are
// noise tokens. The model must predict, at each query key, the value paired with it earlier:
//
//   inputs   k1 v1 k2 v2 k3 v3 | n  k2 v2 n  n  k1 v1 n
//   targets  -  -  -  -  -  -  | -  v2 -  -  -  v1 -  -      (- is kIgnoreIndex)
#pragma once
#include <linea/linea.h>

namespace linea::data {

inline constexpr int64_t kIgnoreIndex = -100;  // target positions the loss and accuracy skip

struct MqarConfig {
  int64_t vocab = 8192;
  int64_t seq_len = 64;
  int64_t num_kv = 8;
  int64_t num_queries = 8;  // distinct keys queried, at most num_kv
  bool noise = true;        // fill unused positions with random tokens (else token 0)
};

struct MqarBatch {
  Tensor inputs;   // int64 [B, seq_len]
  Tensor targets;  // int64 [B, seq_len]: the value at each query key, kIgnoreIndex elsewhere
};

// `batch` sequences from gen: the same generator state gives the same batch. Throws when the
// pairs and queries do not fit in seq_len or the vocab has too few keys or values.
MqarBatch make_mqar(const MqarConfig& cfg, int64_t batch, Generator& gen);

// How many predictions (int64, targets' shape) match the targets where a target is set.
struct Accuracy {
  int64_t correct = 0;
  int64_t total = 0;
  double value() const { return total == 0 ? 0.0 : static_cast<double>(correct) / total; }
};
Accuracy masked_accuracy(const Tensor& predictions, const Tensor& targets);

}  // namespace linea::data
