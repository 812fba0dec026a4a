#include "vit_config.h"

#include "data/memory_budget.h"
#include "flags.h"

#include <fmt/format.h>

namespace vit {

using namespace linea;

// ---------------------------------------------------------------- options

namespace {

[[noreturn]] void fail(const std::string& msg) { flags::fail("vit_fmnist", msg); }

// The flags, each bound to a Config member (examples/flags.h parses and prints them).
const std::vector<flags::Flag<Config>>& table() {
  static const std::vector<flags::Flag<Config>> all = {
      flags::flag("attn", &Config::attn, true, "softmax | linear | mhla (all: with --bench, the three in turn)"),
      flags::flag("patch", &Config::patch, true, "patch size in pixels (32x32 padded images)", flags::positive()),
      flags::flag("block", &Config::block, true, "patches per side of an MHLA block", flags::positive()),
      flags::flag("dim", &Config::dim, true, "model width", flags::positive()),
      flags::flag("depth", &Config::depth, true, "transformer blocks", flags::positive()),
      flags::flag("heads", &Config::heads, true, "attention heads", flags::positive()),
      flags::flag("mlp-ratio", &Config::mlp_ratio, true, "MLP hidden size / dim", flags::positive()),
      flags::flag("epochs", &Config::epochs, true, "passes over the 60k training images", flags::positive(100000)),
      flags::flag("batch", &Config::batch, true, "images per step", flags::positive(60000)),
      flags::flag("lr", &Config::lr, true, "peak learning rate (AdamW)", flags::positive(1)),
      flags::flag("min-lr", &Config::min_lr, true, "learning rate at the end of the cosine", flags::at_least(0)),
      flags::flag("warmup", &Config::warmup, true, "linear warm-up steps", flags::at_least(0)),
      flags::flag("weight-decay", &Config::weight_decay, true, "AdamW decoupled weight decay", flags::at_least(0)),
      flags::flag("label-smoothing", &Config::label_smoothing, true, "cross-entropy label smoothing",
                  flags::below(0, 1)),
      flags::flag("clip", &Config::grad_clip, true, "max global gradient norm (0: no clipping)", flags::at_least(0)),
      flags::flag("augment", &Config::augment, true, "on | off: random 2-pixel shifts and horizontal flips"),
      flags::flag("seed", &Config::seed, true, "seeds the weights, the data order and the augmentation"),
      flags::flag("holdout", &Config::holdout, true, "evaluate on the last N training images, not the test set",
                  flags::below(0, 60000)),
      flags::flag("precision", &Config::precision, true,
                  "fp32 | bf16: matmul dot products (bf16: bfloat16 operands, float32 sums)"),
      flags::flag("data-dir", &Config::data_dir, false, "Fashion-MNIST IDX files (default: the Debian package's)"),
      flags::flag("out", &Config::out, false, "run directory (default runs/vit_fmnist_<attn>; with --resume, the checkpoint's)"),
      flags::flag("overwrite", &Config::overwrite, false, "on: replace the run in a non-empty --out (off: refuse it)"),
      flags::flag("resume", &Config::resume, false, "continue from this checkpoint (its config is the base)"),
      flags::flag("eval", &Config::eval, false, "only evaluate this checkpoint on the test set"),
      flags::flag("bench", &Config::bench, false, "time N training steps (median), no training", flags::at_least(0)),
      flags::flag("profile", &Config::profile, false,
                  "on: after the --bench steps (5 without --bench), print the per-op profile of one more step"),
      flags::flag("profile-shapes", &Config::profile_shapes, false,
                  "on: with --profile, one gemm row per operand shape (implies --profile on)"),
      flags::flag("time-budget", &Config::time_budget, false,
                  "seconds: train the most whole epochs (up to --epochs) that fit, timed on this machine",
                  flags::at_least(0)),
      flags::flag("threads", &Config::threads, false, "OpenMP threads (default: all cores)", flags::at_least(0, 1024)),
      flags::flag("device", &Config::device, false, "cpu | cuda: where the model trains"),
      flags::flag("on-nan", &Config::on_nan, false,
                  "stop | skip-step: a step whose loss or grad norm is NaN or infinite stops the run, keeping the "
                  "last good checkpoint (stop), or changes nothing and the run goes on (skip-step; more than 10 in a "
                  "row stop it)"),
  };
  return all;
}

// What the flags' ranges cannot see: values that depend on each other.
void check(const Config& o) {
  if (o.attn != "softmax" && o.attn != "linear" && o.attn != "mhla" && o.attn != "all")
    fail(fmt::format("--attn must be softmax, linear or mhla (or all with --bench), got '{}'", o.attn));
  if (o.attn == "all" && o.bench == 0 && !o.profile) fail("--attn all only goes with --bench N");
  if (o.img() % o.patch != 0) fail(fmt::format("--patch {} does not divide the {}-pixel images", o.patch, o.img()));
  if ((o.img() / o.patch) % o.block != 0)
    fail(fmt::format("--block {} does not divide the {}x{} patch grid", o.block, o.img() / o.patch, o.img() / o.patch));
  if (o.dim % o.heads != 0) fail(fmt::format("--dim {} is not a multiple of --heads {}", o.dim, o.heads));
  if (o.min_lr > o.lr) fail(fmt::format("--min-lr {} is above --lr {}", o.min_lr, o.lr));
  const int64_t steps = o.epochs * ((60000 - o.holdout + o.batch - 1) / o.batch);  // the DataLoader's batches
  if (o.warmup > steps) fail(fmt::format("--warmup {} is more than the run's {} steps", o.warmup, steps));
  if (o.lr * o.weight_decay >= 1)  // AdamW scales the weights by 1 - lr·wd every step
    fail(fmt::format("--weight-decay {} x --lr {} must be < 1", o.weight_decay, o.lr));
  if (!o.resume.empty() && !o.eval.empty()) fail("--resume and --eval do not go together");
  if (o.time_budget > 0 && !o.resume.empty()) fail("--time-budget is for a new run: a resumed run keeps its epochs");
  if (o.on_nan != "stop" && o.on_nan != "skip-step")
    fail(fmt::format("--on-nan takes stop or skip-step, got '{}'", o.on_nan));
}

}  // namespace

Config parse_config(const std::vector<std::string>& args, Config base) {
  Config o = flags::parse_flags("vit_fmnist", table(), args, std::move(base));
  check(o);
  return o;
}

std::string config_line(const Config& o) { return flags::flags_line(table(), o); }

std::vector<std::string> resume_changes(const Config& saved, const Config& resumed) {
  return flags::resume_changes("vit_fmnist", table(), saved, resumed, {"epochs"});
}

std::string usage() { return flags::usage("vit_fmnist", table()); }

double training_bytes(const Config& o) {
  return data::vit_training_bytes(model_config(o), o.batch, o.device == "cpu");
}

ModelConfig model_config(const Config& o) {
  return {.attn = o.attn, .image = o.img(), .patch = o.patch, .block = o.block, .dim = o.dim, .depth = o.depth,
          .heads = o.heads, .mlp_ratio = o.mlp_ratio};
}

OptimConfig optim_config(const Config& o, int64_t total_steps) {
  return {.steps = total_steps, .lr = o.lr, .min_lr = o.min_lr, .warmup = o.warmup, .weight_decay = o.weight_decay,
          .label_smoothing = o.label_smoothing, .grad_clip = o.grad_clip};
}

Trainer make_trainer(const Config& o, int64_t total_steps) {
  manual_seed(o.seed);
  return Trainer(std::make_shared<ViT>(model_config(o)), optim_config(o, total_steps));
}

void save(const Trainer& trainer, const Config& o, const std::string& path, nn::Metadata extra) {
  extra["config"] = config_line(o);
  extra["program"] = "vit_fmnist";
  trainer.save(path, std::move(extra));
}

}  // namespace vit
