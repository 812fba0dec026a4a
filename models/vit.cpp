#include "linea/models/vit.h"

#include <chrono>
#include <cmath>

#include "linea/dist/dist.h"

namespace linea::models::vit {

// ---------------------------------------------------------------- the model

ViT::ViT(const ModelConfig& o) : Module("ViT"), cfg_(o) {
  LINEA_CHECK(o.attn == "softmax" || o.attn == "linear" || o.attn == "mhla",
              "[ViT] attn must be softmax, linear or mhla, got '{}'", o.attn);
  LINEA_CHECK(o.image > 0 && o.channels > 0 && o.classes > 0 && o.patch > 0 && o.block > 0 && o.dim > 0 &&
                  o.depth > 0 && o.heads > 0 && o.mlp_ratio > 0,
              "[ViT] every size must be > 0, got image {}, channels {}, classes {}, patch {}, block {}, dim {}, depth {}, "
              "heads {}, mlp_ratio {}", o.image, o.channels, o.classes, o.patch, o.block, o.dim, o.depth, o.heads,
              o.mlp_ratio);
  LINEA_CHECK(o.image % o.patch == 0 && (o.image / o.patch) % o.block == 0,
              "[ViT] patch {} must divide the {}-pixel images and block {} the {}x{} patch grid", o.patch, o.image,
              o.block, o.image / o.patch, o.image / o.patch);
  LINEA_CHECK(o.dim % o.heads == 0, "[ViT] dim {} is not a multiple of heads {}", o.dim, o.heads);
  patch = register_module("patch", std::make_shared<nn::PatchEmbed>(o.image, o.patch, o.channels, o.dim));
  patch->block_major(o.block);
  pos_embed = register_module("pos_embed", std::make_shared<nn::PositionalEmbedding>(patch->num_patches(), o.dim));
  blocks = register_module("blocks", std::make_shared<nn::Sequential>());
  for (int64_t i = 0; i < o.depth; ++i)
    blocks->push_back(std::make_shared<nn::TransformerBlock>(nn::TransformerBlockConfig{
        .dim = o.dim, .heads = o.heads, .mlp_ratio = o.mlp_ratio, .attention = o.attn, .grid = o.grid()}));
  norm = register_module("norm", std::make_shared<nn::LayerNorm>(o.dim));
  head = register_module("head", std::make_shared<nn::Linear>(o.dim, o.classes));

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

Trainer::Trainer(std::shared_ptr<ViT> m, const OptimConfig& o) : model(std::move(m)), opts_(o) {
  LINEA_CHECK(model != nullptr, "[vit::Trainer] needs a model, got a null pointer");
  // Two groups: decayed weight matrices, and the rest (norms, biases, pos_embed, MHLA's mix).
  optimizer = std::make_unique<nn::AdamW>(nn::adamw_param_groups(*model, o.weight_decay, {"mix"}),
                                          nn::AdamWOptions{.lr = o.lr, .weight_decay = o.weight_decay});
  schedule_ = {.warmup_steps = std::min(o.warmup, o.steps),
               .total_steps = o.steps,
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

void Trainer::save(const std::string& path, nn::Metadata meta) const {
  save_run(path, *model, *optimizer, step_, std::move(meta));
}

nn::Metadata Trainer::load(const std::string& path) {
  return load_run(path, *model, *optimizer, step_, "ViT");
}

}  // namespace linea::models::vit
