// A run that cannot fit in memory is refused before it allocates anything (char_lm --context
// 100000000 would otherwise allocate until the kernel kills it). The programs estimate what a
// config needs from its sizes alone and compare that with what the system can still give.
#pragma once
#include <cstdint>
#include <string>

#include <linea/models/gpt.h>
#include <linea/models/vit.h>

namespace linea::data {

// Bytes the system can give without swapping (MemAvailable in /proc/meminfo), or -1 when it
// cannot be read (not Linux): then no run is refused.
int64_t available_memory();

// The sizes of a transformer training run that decide its memory, in double so that absurd values
// (the ones to refuse) do not overflow on the way.
struct TransformerSize {
  double batch = 1, tokens = 1;  // sequences per step, tokens per sequence
  double dim = 1, heads = 1, layers = 1, mlp_ratio = 4;
  double chunks = 0;        // key-value summaries per sequence and head (linear / MHLA), 0 for softmax
  double mix = 0;           // MHLA's mixing-matrix entries per block
  double other_params = 0;  // embeddings, head, final norm
  double other_floats = 0;  // float32s outside the blocks: logits, a data set held in memory
  double probs = 0;         // floats per sequence and head that softmax attention keeps for its backward
                            // (Backend::attention_probs_size: the CPU's short sequences, N·N rounded)
};

// About how many bytes training it takes: the float32 weights with their gradients and AdamW's two
// moments, plus the activations a step keeps for its backward. An estimate (within a small factor)
// for refusing configs that cannot fit, not a measurement.
double training_bytes(const TransformerSize& s);
// The same for the library's models: the ViT on `batch` images with Fashion-MNIST (70000 images)
// held in memory, on the CPU or a GPU (which keeps no attention probabilities); the GPT on
// `batch` windows of c.context tokens (a GPU slightly overestimated: the CPU's probabilities).
double vit_training_bytes(const models::vit::ModelConfig& c, int64_t batch, bool on_cpu);
double gpt_training_bytes(const models::gpt::ModelConfig& c, int64_t batch);

// Throws "[program] ... needs about X GB ... only Y GB available ... lower <knobs>" when
// `bytes_needed` is above available_memory(). The estimate is in double, so absurd sizes do not
// overflow on the way.
void check_memory_budget(const std::string& program, double bytes_needed, const std::string& knobs);

}  // namespace linea::data
