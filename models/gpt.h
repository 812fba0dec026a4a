// A GPT-style decoder (the model of examples/char_lm and examples/mqar), its trainer and its
// token-by-token generation.
//
//   tokens [B, T] ─ token embedding + learned positions ─ layers × TransformerBlock(causal,
//     attention = softmax | linear | mhla) ─ LayerNorm ─ head (tied to the token embedding, or
//     its own Linear) ─ logits [B, T, vocab]
//
// The blocks are pre-norm (x + attn(ln1(x)), x + mlp(ln2(x)); mlp_ratio 0: no MLP) as in GPT-2 and nanoGPT, whose
// initialisation this follows. Causal MHLA splits the context into chunks of `chunk` tokens and
// mixes their summaries with a learnable lower-triangular matrix (nn/attention.h).
#pragma once
#include <cmath>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "linea/dist/data_parallel.h"
#include "linea/linea.h"
#include "linea/models/run_checkpoint.h"  // the checkpoints Trainer::save writes

namespace linea::models::gpt {

struct ModelConfig {
  std::string attn = "mhla";  // softmax | linear | mhla
  int64_t vocab = 0;          // token ids are in [0, vocab)
  int64_t layers = 4, heads = 4, dim = 128;
  int64_t context = 64;       // the longest sequence (sizes the positions and MHLA's mix)
  int64_t chunk = 16;         // MHLA: tokens per chunk
  double mlp_ratio = 4;       // 0: attention-only blocks
  // > 0: a causal depthwise convolution of this many taps on the embeddings before the first
  // block (ShortConv), as Based puts a kernel-3 convolution in its first layer.
  int64_t short_conv = 0;
  double dropout = 0;
  bool tie = true;            // the head reuses the token embedding's weights
  // false: nanoGPT's bias=False. The Linear layers of the blocks and every LayerNorm keep their
  // bias tensors (so checkpoints have one layout) but these stay zero and are not trained.
  bool bias = true;
};

// x + Σ_j w_j ⊙ x_{t−j}, j < taps, per channel (x_{t−j} = 0 before the start): each token sees
// the few before it. Linear attention cannot focus on one position, so without it it cannot
// tell which value followed which key (Zoology/Based: short convolutions supply that).
class ShortConv : public nn::Module {
 public:
  ShortConv(int64_t taps, int64_t dim);
  Tensor forward(const Tensor& x) override;  // [B, T, dim] -> [B, T, dim]

  Tensor weight;  // [taps, dim], starts as U(±1/sqrt(taps)) (PyTorch's Conv1d)
};

class GPT : public nn::Module {
 public:
  explicit GPT(const ModelConfig& c);
  Tensor forward(const Tensor& tokens) override;  // int64 [B, T], T <= context -> logits [B, T, vocab]
  Tensor hidden(const Tensor& tokens);           // the final hidden states [B, T, dim] (after ln_f)
  // The logits [n, vocab] at the n positions whose target is not -100, with those targets [n].
  // Their cross-entropy is forward's over all positions, but the head (vocab × dim per token, the
  // largest product at MQAR's vocab 8192) runs on n rows instead of B·T.
  std::pair<Tensor, Tensor> scored_logits(const Tensor& tokens, const Tensor& targets);
  // The head on final hidden states [..., dim] -> [..., vocab] (after ln_f).
  Tensor head_logits(const Tensor& h);
  const ModelConfig& config() const { return cfg_; }
  nn::TransformerBlock& block(size_t i) const;
  int64_t num_trainable() const;  // elements of the parameters that train (without frozen biases)

  std::shared_ptr<nn::Embedding> tok_emb;
  std::shared_ptr<nn::PositionalEmbedding> pos_emb;
  std::shared_ptr<ShortConv> conv;  // null unless short_conv > 0
  std::shared_ptr<nn::Sequential> blocks;  // of TransformerBlock
  std::shared_ptr<nn::LayerNorm> ln_f;
  std::shared_ptr<nn::Linear> head;  // null when tied

 private:
  ModelConfig cfg_;
};

// Next-token logits one token at a time, for sampling. Causal MHLA runs in its streaming
// (recurrent) form: one MHLAStream per layer, O(d²) per token per head, with outputs equal to the
// chunkwise forward. Softmax and linear attention recompute the forward over the window of the
// last `context` tokens (nanoGPT's way: simple and plainly correct). When an MHLA stream reaches
// `context` tokens (the learned positions end there) it restarts on the most recent half.
class Decoder {
 public:
  explicit Decoder(GPT& model);
  // Appends `token` and returns the logits [vocab] (float32, or the model's dtype) for the next one.
  Tensor push(int64_t token);

 private:
  Tensor step_stream(int64_t token);  // MHLA: one token through every layer's stream
  void restart_streams();
  GPT& model_;
  std::vector<int64_t> tokens_;  // the window the next logits depend on
  std::vector<nn::functional::MHLAStream> streams_;  // MHLA only: one per layer
  int64_t pos_ = 0;  // tokens fed to the streams
};

// Samples `n` tokens after `prompt` (at least one token) at `temperature`, from the `top_k` most
// likely (0: all).
std::vector<int64_t> generate(GPT& model, const std::vector<int64_t>& prompt, int64_t n, double temperature,
                              int64_t top_k, Generator& gen);

// nanoGPT's recipe: AdamW (decay on weight matrices and embeddings, not on biases, norms or MHLA's
// mix), linear warm-up then cosine decay to min_lr, global grad-norm clipping.
struct OptimConfig {
  int64_t steps = 2000;
  double lr = 1e-3, min_lr = 1e-4;
  int64_t warmup = 100;
  // The lr of step 0; the warm-up rises linearly from it to lr at step `warmup`. nanoGPT's
  // lr·(step+1)/(warmup+1) is start_lr = lr/(warmup+1) (what char_lm uses).
  double start_lr = 0;
  double weight_decay = 0.1, beta2 = 0.99, grad_clip = 1.0;
};

struct StepStats {
  double loss = 0;  // mean cross-entropy (nats) of the batch, over targets != kIgnoreIndex
  double grad_norm = NAN;  // the global grad norm before clipping
  // false: the loss or the grad norm was a NaN or an infinity (on some rank), and the step left
  // the weights and the optimizer as they were; only the step count moved on.
  bool finite = true;
  double forward_s = 0, backward_s = 0, update_s = 0;
};

class Trainer {
 public:
  Trainer(std::shared_ptr<GPT> model, const OptimConfig& o);
  // One optimizer step on tokens x [B, T] with targets y [B, T] (-100 = ignored) at lr(). A step
  // whose loss or grad norm is not finite updates nothing (StepStats::finite).
  StepStats train_step(const Tensor& x, const Tensor& y);
  // The same step on the scalar loss_fn() builds (e.g. from GPT::scored_logits).
  StepStats train_step(const std::function<Tensor()>& loss_fn);
  double lr() const;  // the lr the next step uses
  int64_t step() const { return step_; }
  // Data-parallel from here on: rank 0's weights everywhere, and each train_step averages the
  // gradients over the ranks before clipping and the update. Each rank passes its shard of the
  // global batch to train_step.
  void distribute(dist::DataParallelOptions opts = {});

  // model + optimizer + `meta` (plus "step") in one safetensors file (models/run_checkpoint.h);
  // load returns the metadata.
  void save(const std::string& path, nn::Metadata meta) const;
  nn::Metadata load(const std::string& path);

  std::shared_ptr<GPT> model;
  std::unique_ptr<nn::AdamW> optimizer;
  std::unique_ptr<dist::DataParallel> data_parallel;  // set by distribute()

 private:
  OptimConfig opts_;
  std::vector<Tensor> trainable_;  // the parameters with requires_grad (clipped and updated)
  nn::WarmupCosine schedule_;
  int64_t step_ = 0;
};

// Mean cross-entropy over batches, no graph, in eval mode.
double mean_loss(GPT& model, const std::vector<std::pair<Tensor, Tensor>>& batches);

// A checkpoint's model weights only (the "model." entries), e.g. to sample from it; any model
// (attention_lab loads the ViT with it too).
void load_weights(nn::Module& model, const std::string& checkpoint);

}  // namespace linea::models::gpt
