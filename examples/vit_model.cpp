#include "vit_model.h"

#include "data/memory_budget.h"
#include "flags.h"
#include "run_checkpoint.h"

#include <chrono>
#include <cmath>

#include <fmt/format.h>
#include <linea/dist/dist.h>
#include <linea/tensor/backend.h>  // attention_probs_size: what the softmax kernel keeps per row

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
  const double tokens = std::pow(double(o.img()) / double(o.patch), 2), blocks = double(o.grid()) * double(o.grid());
  const double dim = double(o.dim), images = 70000;  // train + test, as loaded (28x28) and padded (32x32)
  return data::training_bytes({.batch = double(o.batch), .tokens = tokens, .dim = dim, .heads = double(o.heads),
                               .layers = double(o.depth), .mlp_ratio = o.mlp_ratio,
                               .chunks = o.attn == "softmax" ? 0 : blocks,
                               .mix = o.attn == "mhla" ? blocks * blocks : 0,
                               .other_params = (double(o.patch * o.patch) + tokens + 12) * dim,
                               .other_floats = images * (28 * 28 + 32 * 32),
                               .probs = o.attn == "softmax" && o.device == "cpu"
                                            ? double(backend(Device::cpu()).attention_probs_size(
                                                  static_cast<int64_t>(tokens), DType::Float32))
                                            : 0});
}

// ---------------------------------------------------------------- the model

ViT::ViT(const Config& o) : Module("ViT") {
  patch = register_module("patch", std::make_shared<nn::PatchEmbed>(o.img(), o.patch, 1, o.dim));
  patch->block_major(o.block);
  pos_embed = register_module("pos_embed", std::make_shared<nn::PositionalEmbedding>(patch->num_patches(), o.dim));
  blocks = register_module("blocks", std::make_shared<nn::Sequential>());
  for (int64_t i = 0; i < o.depth; ++i)
    blocks->push_back(std::make_shared<nn::TransformerBlock>(nn::TransformerBlockConfig{
        .dim = o.dim, .heads = o.heads, .mlp_ratio = o.mlp_ratio, .attention = o.attn, .grid = o.grid()}));
  norm = register_module("norm", std::make_shared<nn::LayerNorm>(o.dim));
  head = register_module("head", std::make_shared<nn::Linear>(o.dim, 10));

  // timm's ViT init: every Linear after the patch embedding gets N(0, 0.02²) weights (truncated at
  // 2σ) and zero biases, so each residual branch starts small and the blocks start near identity.
  auto init = [](nn::Linear& l) {
    nn::trunc_normal_(l.weight, 0.02);
    nn::zeros_(l.bias);
  };
  for (size_t i = 0; i < blocks->size(); ++i) {
    nn::TransformerBlock& b = block(i);
    auto& attn = dynamic_cast<nn::QKVAttention&>(*b.attn);
    init(*attn.qkv);
    init(*attn.proj);
    init(*b.mlp->fc1);
    init(*b.mlp->fc2);
  }
  init(*head);
}

nn::TransformerBlock& ViT::block(size_t i) const { return dynamic_cast<nn::TransformerBlock&>(*(*blocks)[i]); }

Tensor ViT::forward(const Tensor& images) {
  Tensor x = blocks->forward(pos_embed->forward(patch->forward(images)));  // [B, N, dim]
  return head->forward(norm->forward(mean(x, {1})));  // no class token: average the tokens
}

// ---------------------------------------------------------------- training

namespace {

double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

// Counted on the logits' device: only the count comes to the host.
int64_t count_correct(const Tensor& logits, const Tensor& y) {
  return static_cast<int64_t>(sum(eq(argmax(logits.detach(), 1), y)).item());
}

}  // namespace

Trainer::Trainer(const Config& o, int64_t total_steps) : opts_(o) {
  manual_seed(o.seed);
  model = std::make_shared<ViT>(o);
  // Two groups: decayed weight matrices, and the rest (norms, biases, pos_embed, MHLA's mix).
  optimizer = std::make_unique<nn::AdamW>(nn::adamw_param_groups(*model, o.weight_decay, {"mix"}),
                                          nn::AdamWOptions{.lr = o.lr, .weight_decay = o.weight_decay});
  schedule_ = {.warmup_steps = std::min(o.warmup, total_steps),
               .total_steps = total_steps,
               .max_lr = o.lr,
               .min_lr = o.min_lr};
}

double Trainer::lr() const { return nn::warmup_cosine(step_, schedule_); }

void Trainer::distribute(dist::DataParallelOptions opts) {
  data_parallel = std::make_unique<dist::DataParallel>(*model, opts);
}

StepStats Trainer::train_step(const Tensor& x, const Tensor& y) {
  StepStats s;
  // Each phase in a Profiler::Scope: with --profile its kernels are listed under its name.
  auto t = std::chrono::steady_clock::now();
  Tensor logits, loss;
  {
    Profiler::Scope phase("forward");
    logits = model->forward(x);
    loss = nn::cross_entropy(logits, y, {.label_smoothing = opts_.label_smoothing});
    s.loss = loss.item();
  }
  s.forward_s = seconds_since(t);

  t = std::chrono::steady_clock::now();
  {
    Profiler::Scope phase("backward");
    loss.backward();
    if (data_parallel) data_parallel->synchronize();  // the mean gradient over the ranks
    // The norm also tells a diverged step (without clipping, an infinite limit only measures it).
    s.grad_norm = nn::clip_grad_norm_(model->parameters(), opts_.grad_clip > 0 ? opts_.grad_clip : INFINITY);
  }
  s.backward_s = seconds_since(t);

  t = std::chrono::steady_clock::now();
  {
    Profiler::Scope phase("update");
    s.finite = std::isfinite(s.loss) && std::isfinite(s.grad_norm);
    if (data_parallel) s.finite = !dist::any(!s.finite);  // the ranks' losses differ: all skip, or none
    if (s.finite) {
      optimizer->set_lr(lr());
      optimizer->step();  // also keeps MHLA's mix in [0, 1] (its projection, nn/attention.h)
    }
    optimizer->zero_grad();
  }
  ++step_;
  s.update_s = seconds_since(t);

  Profiler::Scope phase("metrics");
  s.correct = count_correct(logits, y);
  return s;
}

EvalStats Trainer::evaluate(const Tensor& x, const Tensor& y, int64_t batch) {
  // Evaluation's batch sizes are not training's: hand the training step's cached blocks back
  // before, and evaluation's after, so the two sets never sit in the host cache side by side.
  cpu::empty_host_cache();
  NoGradGuard no_grad;
  model->eval();
  double loss_sum = 0;
  int64_t correct = 0;
  for (int64_t i = 0; i < x.size(0); i += batch) {
    const int64_t n = std::min(batch, x.size(0) - i);
    Tensor xb = x.narrow(0, i, n), yb = y.narrow(0, i, n);
    Tensor logits = model->forward(xb);
    loss_sum += nn::cross_entropy(logits, yb, {.reduction = nn::Reduction::Sum}).item();
    correct += count_correct(logits, yb);
  }
  model->train();
  cpu::empty_host_cache();
  const auto n = static_cast<double>(x.size(0));
  return {loss_sum / n, static_cast<double>(correct) / n};
}

void Trainer::save(const std::string& path, nn::Metadata extra) const {
  extra["config"] = config_line(opts_);
  extra["program"] = "vit_fmnist";
  examples::save_run(path, *model, *optimizer, step_, std::move(extra));
}

nn::Metadata Trainer::load(const std::string& path) {
  return examples::load_run(path, *model, *optimizer, step_, "vit_fmnist");
}

}  // namespace vit
