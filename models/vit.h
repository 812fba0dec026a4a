// A vision transformer for small images (Fashion-MNIST's, padded to 32×32 in examples/vit_fmnist),
// with softmax, linear or MHLA attention, and its trainer: AdamW, warm-up then cosine decay,
// label smoothing and gradient clipping, one batch at a time.
//
//   image [B, channels, image, image] ─ PatchEmbed (patch×patch pixels, block-major) ─ + learned
//     positions ─ depth × TransformerBlock(attention = softmax | linear | mhla) ─ mean over tokens
//     ─ LayerNorm ─ Linear ─ logits [B, classes]
//
// Tokens are laid out block-major: the patch grid is cut into block×block groups of patches and
// each group's tokens are contiguous — the layout MHLA mixes (at the defaults, 4×4 patches in 2×2
// blocks: M = 4). Softmax and linear attention do not care about token order, so every kind uses
// the same layout.
#pragma once
#include <cstdint>
#include <memory>
#include <string>

#include "linea/dist/data_parallel.h"
#include "linea/linea.h"
#include "linea/models/run_checkpoint.h"  // the checkpoints Trainer::save writes

namespace linea::models::vit {

// The defaults are those of the default `make train` run (examples/vit_fmnist).
struct ModelConfig {
  std::string attn = "mhla";  // softmax | linear | mhla
  int64_t image = 32;         // square images of image×image pixels
  int64_t channels = 1;
  int64_t classes = 10;
  int64_t patch = 8;          // patch×patch pixels per token
  int64_t block = 2;          // block×block patches per MHLA block
  int64_t dim = 64, depth = 4, heads = 4;
  double mlp_ratio = 2;

  int64_t grid() const { return image / patch / block; }  // MHLA's blocks per side
};

class ViT : public nn::Module {
 public:
  explicit ViT(const ModelConfig& c);  // a config whose sizes do not fit together is a linea::Error
  Tensor forward(const Tensor& images) override;  // [B, channels, image, image] float32 -> logits [B, classes]
  const ModelConfig& config() const { return cfg_; }

  std::shared_ptr<nn::PatchEmbed> patch;
  std::shared_ptr<nn::PositionalEmbedding> pos_embed;
  std::shared_ptr<nn::Sequential> blocks;  // of TransformerBlock
  nn::TransformerBlock& block(size_t i) const;
  std::shared_ptr<nn::LayerNorm> norm;
  std::shared_ptr<nn::Linear> head;

 private:
  ModelConfig cfg_;
};

// The recipe. Weight decay falls on the weight matrices only: not on norms, biases, position
// embeddings or MHLA's mix.
struct OptimConfig {
  int64_t steps = 3283;  // the run's length, which sizes the cosine (make train: 7 epochs × 469 batches)
  double lr = 2e-3, min_lr = 1e-5;  // peak and final learning rate
  int64_t warmup = 300;             // linear warm-up steps, then cosine decay to min_lr
  double weight_decay = 0.05;
  double label_smoothing = 0.1;
  double grad_clip = 1;  // > 0: scale the gradients so their global norm is at most this
};

struct StepStats {
  double loss = 0;      // the mean (label-smoothed) loss of the batch
  int64_t correct = 0;  // argmax hits in the batch
  double grad_norm = 0;  // the global grad norm before clipping
  // false: the loss or the grad norm was a NaN or an infinity (on some rank), and the step left
  // the weights and the optimizer as they were; only the step count moved on.
  bool finite = true;
  double forward_s = 0, backward_s = 0, update_s = 0;  // where the step's time went
};

struct EvalStats {
  double loss = 0;  // mean cross-entropy, no label smoothing
  double accuracy = 0;
};

// The model, its AdamW optimizer and the LR schedule, advanced one batch at a time.
class Trainer {
 public:
  Trainer(std::shared_ptr<ViT> model, const OptimConfig& o);
  // One optimizer step on a batch (x [B, channels, image, image] float32, y [B] int64) at the lr
  // of step(). A step whose loss or grad norm is not finite updates nothing (StepStats::finite).
  StepStats train_step(const Tensor& x, const Tensor& y);
  // Loss and accuracy over a whole set, in eval mode without a graph, `batch` images at a time.
  EvalStats evaluate(const Tensor& x, const Tensor& y, int64_t batch = 1000);
  double lr() const;  // the lr the next step uses
  int64_t step() const { return step_; }
  // Data-parallel from here on (call after moving the model to its device): rank 0's weights
  // everywhere, and each train_step averages the gradients over the ranks before the update.
  // Every rank then passes its shard of the global batch to train_step.
  void distribute(dist::DataParallelOptions opts = {});

  // model + optimizer + `meta` (plus "step") in one safetensors file (models/run_checkpoint.h);
  // load returns the metadata.
  void save(const std::string& path, nn::Metadata meta = {}) const;
  nn::Metadata load(const std::string& path);

  std::shared_ptr<ViT> model;
  std::unique_ptr<nn::AdamW> optimizer;
  std::unique_ptr<dist::DataParallel> data_parallel;  // set by distribute()

 private:
  OptimConfig opts_;
  nn::WarmupCosine schedule_;
  int64_t step_ = 0;
};

}  // namespace linea::models::vit
