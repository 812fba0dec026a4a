#include "data/memory_budget.h"

#include <fstream>
#include <sstream>

#include <linea/linea.h>

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

void check_memory_budget(const std::string& program, double bytes_needed, const std::string& knobs) {
  const int64_t available = available_memory();
  LINEA_CHECK(available < 0 || bytes_needed <= static_cast<double>(available),
              "[{}] this run needs about {:.3g} GB of memory (weights, optimizer state, activations), but only {:.3g} "
              "GB is available (MemAvailable in /proc/meminfo): lower {}",
              program, bytes_needed / 1e9, static_cast<double>(available) / 1e9, knobs);
}

}  // namespace linea::data
