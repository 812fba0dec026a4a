#include "data/memory_budget.h"

#include <cmath>
#include <fstream>
#include <sstream>

#include <linea/linea.h>
#include <linea/tensor/backend.h>  // attention_probs_size: what the softmax kernel keeps per row

namespace linea::data {

int64_t available_memory() {
  std::ifstream f("/proc/meminfo");
  for (std::string line; std::getline(f, line);) {
    std::istringstream in(line);
    std::string key;
    int64_t kb = -1;
    if (in >> key >> kb && key == "MemAvailable:") return kb * 1024;
  }
  return -1;
}

double training_bytes(const TransformerSize& s) {
  const double d = s.dim, hidden = s.mlp_ratio * s.dim, hd = s.dim / s.heads;
  // A block: qkv and output projections, the MLP's two layers (with biases), two LayerNorms.
  const double block_params = 4 * d * d + 4 * d + 2 * d * hidden + hidden + d + 4 * d + s.mix;
  const double params = s.layers * block_params + s.other_params;
  // Kept per block and token: about 10 vectors of width dim (norms, q, k, v, attention output,
  // projections, residuals) and 2 of the MLP's width; per sequence, the hd x hd key-value summary
  // of every chunk and head (a few copies: summaries, mixed summaries, their gradients), and the
  // attention probabilities the backend keeps.
  const double per_block =
      s.batch * (s.tokens * (10 * d + 2 * hidden) + 3 * s.chunks * s.heads * hd * hd + s.heads * s.probs);
  return 4 * (4 * params + s.layers * per_block + s.other_floats);
}

double vit_training_bytes(const models::vit::ModelConfig& c, int64_t batch, bool on_cpu) {
  const double tokens = std::pow(double(c.image) / double(c.patch), 2), blocks = double(c.grid()) * double(c.grid());
  const double dim = double(c.dim), images = 70000;  // train + test, as loaded (28x28) and padded (32x32)
  return training_bytes({.batch = double(batch), .tokens = tokens, .dim = dim, .heads = double(c.heads),
                         .layers = double(c.depth), .mlp_ratio = c.mlp_ratio,
                         .chunks = c.attn == "softmax" ? 0 : blocks,
                         .mix = c.attn == "mhla" ? blocks * blocks : 0,
                         .other_params = (double(c.patch * c.patch) + tokens + 12) * dim,
                         .other_floats = images * (28 * 28 + 32 * 32),
                         .probs = c.attn == "softmax" && on_cpu
                                      ? double(backend(Device::cpu()).attention_probs_size(
                                            static_cast<int64_t>(tokens), DType::Float32))
                                      : 0});
}

double gpt_training_bytes(const models::gpt::ModelConfig& c, int64_t batch) {
  const double chunks = c.attn == "softmax" ? 0 : std::ceil(double(c.context) / double(c.chunk));
  const double vocab = double(c.vocab), dim = double(c.dim), tokens = double(batch) * double(c.context);
  return training_bytes({.batch = double(batch), .tokens = double(c.context), .dim = dim,
                         .heads = double(c.heads), .layers = double(c.layers), .mlp_ratio = c.mlp_ratio,
                         .chunks = chunks, .mix = c.attn == "mhla" ? chunks * chunks : 0,
                         .other_params = (vocab + double(c.context) + 2) * dim + (c.tie ? 0 : vocab * dim),
                         .other_floats = 3 * tokens * vocab,  // logits, their softmax and its gradient
                         // what the CPU backend keeps (a GPU keeps none: there it slightly overestimates)
                         .probs = c.attn == "softmax" ? double(backend(Device::cpu()).attention_probs_size(
                                                            c.context, DType::Float32))
                                                      : 0});
}

void check_memory_budget(const std::string& program, double bytes_needed, const std::string& knobs) {
  const int64_t available = available_memory();
  LINEA_CHECK(available < 0 || bytes_needed <= static_cast<double>(available),
              "[{}] this run needs about {:.3g} GB of memory (weights, optimizer state, activations), but only {:.3g} "
              "GB is available (MemAvailable in /proc/meminfo): lower {}",
              program, bytes_needed / 1e9, static_cast<double>(available) / 1e9, knobs);
}

}  // namespace linea::data
