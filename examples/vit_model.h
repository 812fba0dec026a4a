// The Fashion-MNIST vision transformer of examples/vit_fmnist.cpp: its options (parsed from the
// command line), the model, and one training step. A small library of its own, so that
// tests/test_vit.cpp trains the very same model the example does.
//
//   image [B, 1, 32, 32] ─ PatchEmbed (8×8 patches, block-major) ─ + learned positions
//     ─ depth × TransformerBlock(attention = softmax | linear | mhla) ─ mean over tokens
//     ─ LayerNorm ─ Linear ─ logits [B, 10]
//
// Tokens are laid out block-major: the 4×4 patch grid is cut into 2×2 blocks of 2×2 patches and
// each block's 4 tokens are contiguous — the layout MHLA mixes (its M = 4 blocks). Softmax and
// linear attention do not care about token order, so every kind uses the same layout.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <linea/dist/data_parallel.h>
#include <linea/linea.h>

namespace vit {

using linea::Tensor;

// Everything a run is configured by. The defaults are the default `make train` run.
struct Config {
  // The model.
  std::string attn = "mhla";  // softmax | linear | mhla (and "all" with --bench)
  // 16 tokens of 8×8 pixels: held out, as accurate after 7 epochs as 64 tokens of 4×4 at a third
  // of the cost (docs/benchmarks.md, "The ViT of make train"), so 7 epochs fit 5 minutes on AVX2.
  int64_t patch = 8;          // images are padded 28×28 -> 32×32 and cut into patch×patch pixels
  int64_t block = 2;          // block×block patches per MHLA block (4×4 patches -> 2×2 blocks)
  int64_t dim = 64, depth = 4, heads = 4;
  double mlp_ratio = 2;
  // The recipe.
  int64_t epochs = 7;  // held-out at seeds 1 / 2: 88.94 / 89.34% after 7 (docs/examples.md)
  int64_t batch = 128;
  // Chosen on held-out data (docs/examples.md, "How the recipe was chosen"): at lr 4e-3 / 200 warm-up
  // steps the result swung with the rounding, and lr 3e-3 with clipping diverged in epoch 2.
  double lr = 2e-3, min_lr = 1e-5;  // peak and final learning rate
  int64_t warmup = 300;             // linear warm-up steps, then cosine decay to min_lr
  double weight_decay = 0.05;       // not on norms, biases, position embeddings, MHLA's mix
  double label_smoothing = 0.1;
  double grad_clip = 1;  // > 0: scale the gradients so their global norm is at most this
  std::string precision = "fp32";  // fp32 | bf16: the matmuls' dot products (examples/flags.h)
  bool augment = false;  // random shifts of up to 2 pixels and horizontal flips: slows the
                         // short default run down (measured on held-out data), helps long ones
  uint64_t seed = 1;    // the weights, the data order and the augmentation
  int64_t holdout = 0;  // > 0: train on the first 60000 - holdout images, evaluate on the rest
                        // instead of the test set (for tuning the recipe without the test set)
  // Running (not part of the saved config; a checkpoint records the data's checksum instead).
  std::string data_dir;  // "" = /usr/share/datasets/fashion-mnist
  std::string out;       // "" = runs/vit_fmnist_<attn>
  bool overwrite = false;  // replace the run in a non-empty out (else refused)
  std::string resume;    // a checkpoint to continue from
  std::string eval;      // a checkpoint to evaluate (no training)
  int64_t bench = 0;     // > 0: time this many training steps instead of training
  bool profile = false;  // with --bench (default 5 steps): the per-op profile of one more step
  bool profile_shapes = false;  // the profile's gemm rows split by operand shape
  double time_budget = 0;  // > 0 (seconds): train the most epochs, up to `epochs`, that fit
  int64_t threads = 0;   // 0 = OpenMP's default (all cores)
  std::string device = "cpu";  // cpu | cuda
  std::string on_nan = "stop";  // stop | skip-step: what a step with a non-finite loss or grad norm does

  int64_t img() const { return 32; }
  int64_t grid() const { return img() / patch / block; }  // MHLA's blocks per side
};

// Parses "--flag value" pairs over `base` (so a checkpoint's config can be the base and the
// command line override it), then checks the whole result. Throws linea::Error starting with
// "[vit_fmnist]" that names the flag for anything wrong.
Config parse_config(const std::vector<std::string>& args, Config base = {});
// The saved part of the options as a flag line ("--attn mhla --patch 4 ..."): parse_config of
// its words (flags::split_words) gives them back. Written to config.txt and into each checkpoint.
std::string config_line(const Config& o);
// The saved flags `resumed` changes from a checkpoint's `saved` ones: only --epochs may change (the
// rows already written stay valid), any other is an error naming it; one note per change.
std::vector<std::string> resume_changes(const Config& saved, const Config& resumed);
std::string usage();
// About the bytes a training run of `o` takes, Fashion-MNIST in memory included (data/memory_budget.h).
double training_bytes(const Config& o);

class ViT : public linea::nn::Module {
 public:
  explicit ViT(const Config& o);
  Tensor forward(const Tensor& images) override;  // [B, 1, 32, 32] float32 -> logits [B, 10]

  std::shared_ptr<linea::nn::PatchEmbed> patch;
  std::shared_ptr<linea::nn::PositionalEmbedding> pos_embed;
  std::shared_ptr<linea::nn::Sequential> blocks;  // of TransformerBlock
  linea::nn::TransformerBlock& block(size_t i) const;
  std::shared_ptr<linea::nn::LayerNorm> norm;
  std::shared_ptr<linea::nn::Linear> head;
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
  // Seeds the global generator with o.seed and builds the model; `total_steps` sizes the cosine.
  Trainer(const Config& o, int64_t total_steps);
  // One optimizer step on a batch (x [B, 1, 32, 32] float32, y [B] int64) at the lr of step(). A
  // step whose loss or grad norm is not finite updates nothing (StepStats::finite).
  StepStats train_step(const Tensor& x, const Tensor& y);
  // Loss and accuracy over a whole set, in eval mode without a graph, `batch` images at a time.
  EvalStats evaluate(const Tensor& x, const Tensor& y, int64_t batch = 1000);
  double lr() const;  // the lr the next step uses
  int64_t step() const { return step_; }
  // Data-parallel from here on (call after moving the model to its device): rank 0's weights
  // everywhere, and each train_step averages the gradients over the ranks before the update.
  // Every rank then passes its shard of the global batch to train_step.
  void distribute(linea::dist::DataParallelOptions opts = {});

  // A checkpoint holds the model, the optimizer, `extra` (say the data position) and, under
  // "config" and "step", the config line and the step count.
  void save(const std::string& path, linea::nn::Metadata extra = {}) const;
  linea::nn::Metadata load(const std::string& path);

  std::shared_ptr<ViT> model;
  std::unique_ptr<linea::nn::AdamW> optimizer;
  std::unique_ptr<linea::dist::DataParallel> data_parallel;  // set by distribute()

 private:
  Config opts_;
  linea::nn::WarmupCosine schedule_;
  int64_t step_ = 0;
};

}  // namespace vit
