// vit_fmnist's options (parsed from the command line) around the library's ViT
// (<linea/models/vit.h>): the flags, their checks, and the model, recipe and trainer they make.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include <linea/models/vit.h>

namespace vit {

using linea::models::vit::EvalStats;
using linea::models::vit::ModelConfig;
using linea::models::vit::OptimConfig;
using linea::models::vit::StepStats;
using linea::models::vit::Trainer;
using linea::models::vit::ViT;

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

// The library's model config and recipe from the run's flags; `total_steps` sizes the cosine.
ModelConfig model_config(const Config& o);
OptimConfig optim_config(const Config& o, int64_t total_steps);
// Seeds the global generator with o.seed, then builds the model and its trainer.
Trainer make_trainer(const Config& o, int64_t total_steps);
// The checkpoint a run saves: the trainer's, with the run's config line and the program's name.
void save(const Trainer& trainer, const Config& o, const std::string& path, linea::nn::Metadata extra = {});

}  // namespace vit
