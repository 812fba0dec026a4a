#include "linea/models/gpt.h"

#include <algorithm>
#include <chrono>
#include <cmath>

#include "linea/dist/dist.h"

namespace linea::models::gpt {

namespace F = nn::functional;

// ---------------------------------------------------------------- the model

ShortConv::ShortConv(int64_t taps, int64_t dim) : Module("ShortConv") {
  LINEA_CHECK(taps > 0 && dim > 0, "[ShortConv] need taps and dim > 0, got {}, {}", taps, dim);
  const double bound = 1 / std::sqrt(static_cast<double>(taps));
  weight = register_parameter("weight", nn::uniform_(empty({taps, dim}), -bound, bound));
}

Tensor ShortConv::forward(const Tensor& x) {
  LINEA_CHECK(x.dim() == 3 && x.size(2) == weight.size(1), "[ShortConv] expected [B, T, {}], got {}", weight.size(1),
              shape_str(x.shape()));
  const int64_t T = x.size(1);
  Tensor y = x;
  for (int64_t j = 0; j < std::min(weight.size(0), T); ++j) {
    // x shifted j steps later along time, zeros in front.
    const Tensor shifted =
        j == 0 ? x : cat({zeros({x.size(0), j, x.size(2)}, {x.dtype(), x.device()}), x.narrow(1, 0, T - j)}, 1);
    y = y + shifted * weight.select(0, j);
  }
  return y;
}

GPT::GPT(const ModelConfig& c) : Module("GPT"), cfg_(c) {
  LINEA_CHECK(c.vocab > 0 && c.context > 0 && c.layers > 0, "[GPT] need vocab, context and layers > 0, got {}, {}, {}",
              c.vocab, c.context, c.layers);
  tok_emb = register_module("tok_emb", std::make_shared<nn::Embedding>(c.vocab, c.dim, 0.02));
  pos_emb = register_module("pos_emb", std::make_shared<nn::PositionalEmbedding>(c.context, c.dim, 0.02));
  if (c.short_conv > 0) conv = register_module("conv", std::make_shared<ShortConv>(c.short_conv, c.dim));
  blocks = register_module("blocks", std::make_shared<nn::Sequential>());
  for (int64_t i = 0; i < c.layers; ++i)
    blocks->push_back(std::make_shared<nn::TransformerBlock>(nn::TransformerBlockConfig{.dim = c.dim,
                                                                                          .heads = c.heads,
                                                                                          .mlp_ratio = c.mlp_ratio,
                                                                                          .attention = c.attn,
                                                                                          .causal = true,
                                                                                          .dropout = c.dropout,
                                                                                          .block_len = c.chunk,
                                                                                          .max_len = c.context}));
  ln_f = register_module("ln_f", std::make_shared<nn::LayerNorm>(c.dim));
  if (!c.tie) head = register_module("head", std::make_shared<nn::Linear>(c.dim, c.vocab, false));

  // GPT-2's init (as nanoGPT): N(0, 0.02²) weights, zero biases, and the projections that write
  // into the residual stream scaled by 1/sqrt(2·layers), so the stream's variance does not grow
  // with depth.
  const double proj_std = 0.02 / std::sqrt(2.0 * static_cast<double>(c.layers));
  auto init = [](nn::Linear& l, double std) {
    nn::normal_(l.weight, 0, std);
    nn::zeros_(l.bias);
  };
  for (size_t i = 0; i < blocks->size(); ++i) {
    nn::TransformerBlock& b = block(i);
    auto& attn = dynamic_cast<nn::QKVAttention&>(*b.attn);
    init(*attn.qkv, 0.02);
    init(*attn.proj, proj_std);
    if (!b.mlp) continue;  // mlp_ratio 0: attention only
    init(*b.mlp->fc1, 0.02);
    init(*b.mlp->fc2, proj_std);
  }
  if (head) nn::normal_(head->weight, 0, 0.02);
  // nanoGPT's positions are a plain N(0, 0.02²) like every other embedding; PositionalEmbedding
  // starts truncated at ±2σ (timm's ViT), whose std is 0.88 · 0.02.
  nn::normal_(pos_emb->weight, 0, 0.02);

  // bias = false (nanoGPT's default): zero biases that no gradient reaches and no optimizer holds.
  // x + 0 is exact, so this computes what layers built without biases compute.
  if (!c.bias) {
    auto freeze = [](Tensor& b) {
      if (!b.defined()) return;
      nn::zeros_(b);
      b.requires_grad_(false);
    };
    for (size_t i = 0; i < blocks->size(); ++i) {
      nn::TransformerBlock& b = block(i);
      auto& attn = dynamic_cast<nn::QKVAttention&>(*b.attn);
      for (nn::Linear* l : {attn.qkv.get(), attn.proj.get()}) freeze(l->bias);
      freeze(b.ln1->bias);
      if (!b.mlp) continue;
      for (nn::Linear* l : {b.mlp->fc1.get(), b.mlp->fc2.get()}) freeze(l->bias);
      freeze(b.ln2->bias);
    }
    freeze(ln_f->bias);
  }
}

int64_t GPT::num_trainable() const {
  int64_t n = 0;
  for (const Tensor& p : parameters())
    if (p.requires_grad()) n += p.numel();
  return n;
}

nn::TransformerBlock& GPT::block(size_t i) const { return dynamic_cast<nn::TransformerBlock&>(*(*blocks)[i]); }

Tensor GPT::head_logits(const Tensor& h) {
  return head ? head->forward(h) : matmul(h, tok_emb->weight.transpose(0, 1));  // tied: h Eᵀ
}

Tensor GPT::hidden(const Tensor& tokens) {
  LINEA_CHECK(tokens.dim() == 2 && tokens.size(1) <= cfg_.context,
              "[GPT] expected tokens [B, T] with T <= context {}, got {}", cfg_.context, shape_str(tokens.shape()));
  Tensor x = pos_emb->forward(tok_emb->forward(tokens));
  if (conv) x = conv->forward(x);
  return ln_f->forward(blocks->forward(x));
}

Tensor GPT::forward(const Tensor& tokens) { return head_logits(hidden(tokens)); }

std::pair<Tensor, Tensor> GPT::scored_logits(const Tensor& tokens, const Tensor& targets) {
  LINEA_CHECK(targets.dtype() == DType::Int64 && targets.shape() == tokens.shape(),
              "[GPT] scored_logits: expected int64 targets shaped like the tokens {}, got {} {}",
              shape_str(tokens.shape()), targets.dtype(), shape_str(targets.shape()));
  const std::vector<int64_t> t = targets.to(Device::cpu()).contiguous().to_vector_as<int64_t>();
  const int64_t ignore = nn::CrossEntropyOptions{}.ignore_index;
  std::vector<int64_t> rows, kept;
  for (int64_t i = 0; i < static_cast<int64_t>(t.size()); ++i)
    if (t[i] != ignore) rows.push_back(i), kept.push_back(t[i]);
  LINEA_CHECK(!rows.empty(), "[GPT] scored_logits: every target of {} is ignored (-100)", shape_str(targets.shape()));
  const Device dev = tokens.device();
  const auto n = static_cast<int64_t>(rows.size());
  const Tensor h = hidden(tokens);
  const Tensor picked = index_select(h.reshape({-1, cfg_.dim}), 0, from_vector(rows, {n}, dev));
  return {head_logits(picked), from_vector(kept, {n}, dev)};
}

// ---------------------------------------------------------------- generation

Decoder::Decoder(GPT& model) : model_(model) { restart_streams(); }

void Decoder::restart_streams() {
  streams_.clear();
  pos_ = 0;
  if (model_.config().attn != "mhla") return;
  LINEA_CHECK(!model_.conv, "[Decoder] MHLA's streaming form has no short convolution (short_conv {})",
              model_.config().short_conv);
  for (size_t i = 0; i < model_.blocks->size(); ++i) {
    auto& attn = dynamic_cast<nn::MHLA&>(*model_.block(i).attn);
    // The options MHLA::attend uses for its causal chunkwise op, so both forms compute one function.
    F::MHLAOptions o;
    o.causal = true;
    o.block_len = attn.config().block_len;
    o.eps = attn.config().eps;
    o.feature_map = attn.rope ? F::FeatureMap::Identity : F::FeatureMap::Relu;
    streams_.emplace_back(attn.mix, o);
  }
}

Tensor Decoder::step_stream(int64_t token) {
  const int64_t D = model_.config().dim, H = model_.config().heads;
  Tensor x = model_.tok_emb->forward(from_vector(std::vector<int64_t>{token}, {1, 1}));
  x = model_.pos_emb->forward(x, pos_).view({1, D});  // [1, dim]
  for (size_t i = 0; i < model_.blocks->size(); ++i) {
    nn::TransformerBlock& b = model_.block(i);
    auto& attn = dynamic_cast<nn::MHLA&>(*b.attn);
    // What QKVAttention::forward does, for one token: qkv, head split, attend, merge, project.
    Tensor qkv = attn.qkv->forward(b.ln1->forward(x)).view({1, 3, H, D / H});
    Tensor q = qkv.select(1, 0), k = qkv.select(1, 1), v = qkv.select(1, 2);  // [1, H, hd]
    if (attn.rope) {  // φ then RoPE at this position, as MHLA::attend
      q = attn.rope->forward(relu(q).unsqueeze(2), pos_).squeeze(2);
      k = attn.rope->forward(relu(k).unsqueeze(2), pos_).squeeze(2);
    }
    Tensor o = attn.out_norm->forward(streams_[i].step(q, k, v));
    x = x + attn.proj->forward(o.reshape({1, D}));
    if (b.mlp) x = x + b.mlp->forward(b.ln2->forward(x));
  }
  ++pos_;
  return model_.head_logits(model_.ln_f->forward(x)).view({-1});
}

Tensor Decoder::push(int64_t token) {
  NoGradGuard no_grad;
  const int64_t context = model_.config().context;
  tokens_.push_back(token);
  if (streams_.empty()) {  // softmax / linear: the forward over the last `context` tokens
    if (static_cast<int64_t>(tokens_.size()) > context) tokens_.erase(tokens_.begin());
    const auto n = static_cast<int64_t>(tokens_.size());
    return model_.forward(from_vector(tokens_, {1, n})).select(1, n - 1).view({-1});
  }
  if (pos_ == context) {  // the positions are used up: restart on the most recent half
    tokens_.erase(tokens_.begin(), tokens_.end() - context / 2);
    restart_streams();
    for (size_t i = 0; i + 1 < tokens_.size(); ++i) step_stream(tokens_[i]);
  }
  return step_stream(token);
}

std::vector<int64_t> generate(GPT& model, const std::vector<int64_t>& prompt, int64_t n, double temperature,
                              int64_t top_k, Generator& gen) {
  LINEA_CHECK(!prompt.empty(), "[generate] the prompt needs at least one token");
  LINEA_CHECK(temperature > 0, "[generate] temperature must be > 0, got {}", temperature);
  const bool was_training = model.is_training();
  model.eval();
  Decoder decoder(model);
  Tensor logits;
  for (int64_t t : prompt) logits = decoder.push(t);
  std::vector<int64_t> out;
  for (int64_t i = 0; i < n; ++i) {
    std::vector<double> p = logits.to_vector_as<double>();
    // Keep the top_k logits, then softmax at the temperature, then draw by inverse CDF.
    if (top_k > 0 && top_k < static_cast<int64_t>(p.size())) {
      std::vector<double> sorted = p;
      std::nth_element(sorted.begin(), sorted.begin() + (top_k - 1), sorted.end(), std::greater<>());
      for (double& v : p)
        if (v < sorted[top_k - 1]) v = -INFINITY;
    }
    const double mx = *std::max_element(p.begin(), p.end());
    double total = 0;
    for (double& v : p) total += (v = std::exp((v - mx) / temperature));
    double u = gen.uniform() * total;
    int64_t next = 0;
    while (next + 1 < static_cast<int64_t>(p.size()) && (u -= p[next]) >= 0) ++next;
    out.push_back(next);
    logits = decoder.push(next);
  }
  model.train(was_training);
  return out;
}

// ---------------------------------------------------------------- training

namespace {

double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

// nanoGPT's groups: every weight matrix and embedding decays, biases and norm weights do not;
// neither does MHLA's mixing matrix (a weight average, kept in [1e-5, 1] by its projection).
std::vector<nn::ParamGroup> param_groups(const nn::Module& m, double weight_decay) {
  nn::ParamGroup decay, no_decay;
  decay.weight_decay = weight_decay;
  no_decay.weight_decay = 0.0;
  for (auto& [name, p] : m.named_parameters()) {
    if (!p.requires_grad()) continue;  // frozen (bias = false)
    const bool is_mix = name.ends_with(".mix");
    (p.dim() >= 2 && !is_mix ? decay : no_decay).params.emplace_back(name, p);
  }
  return {decay, no_decay};
}

}  // namespace

Trainer::Trainer(std::shared_ptr<GPT> m, const OptimConfig& o) : model(std::move(m)), opts_(o) {
  LINEA_CHECK(model != nullptr, "[gpt::Trainer] needs a model, got a null pointer");
  for (const Tensor& p : model->parameters())
    if (p.requires_grad()) trainable_.push_back(p);
  optimizer = std::make_unique<nn::AdamW>(
      param_groups(*model, o.weight_decay),
      nn::AdamWOptions{.lr = o.lr, .beta1 = 0.9, .beta2 = o.beta2, .weight_decay = o.weight_decay});
  schedule_ = {.warmup_steps = std::min(o.warmup, o.steps), .total_steps = o.steps, .max_lr = o.lr, .min_lr = o.min_lr,
               .start_lr = o.start_lr};
}

double Trainer::lr() const { return nn::warmup_cosine(step_, schedule_); }

StepStats Trainer::train_step(const Tensor& x, const Tensor& y) {
  return train_step([&] { return nn::cross_entropy(model->forward(x), y); });
}

StepStats Trainer::train_step(const std::function<Tensor()>& loss_fn) {
  StepStats s;
  // Each phase in a Profiler::Scope: with --profile its kernels are listed under its name.
  auto t = std::chrono::steady_clock::now();
  Tensor loss;
  {
    Profiler::Scope phase("forward");
    loss = loss_fn();
    s.loss = loss.item();
  }
  s.forward_s = seconds_since(t);

  t = std::chrono::steady_clock::now();
  {
    Profiler::Scope phase("backward");
    loss.backward();
    if (data_parallel) data_parallel->synchronize();  // the mean gradient over the ranks
  }
  s.backward_s = seconds_since(t);

  t = std::chrono::steady_clock::now();
  Profiler::Scope phase("update");
  // The norm also tells a diverged step (without clipping, an infinite limit only measures it).
  s.grad_norm = nn::clip_grad_norm_(trainable_, opts_.grad_clip > 0 ? opts_.grad_clip : INFINITY);
  s.finite = std::isfinite(s.loss) && std::isfinite(s.grad_norm);
  if (data_parallel) s.finite = !dist::any(!s.finite);  // the ranks' losses differ: all skip, or none
  if (s.finite) {
    optimizer->set_lr(lr());
    optimizer->step();  // also projects MHLA's mix (lower-triangular, in [1e-5, 1])
  }
  optimizer->zero_grad();
  ++step_;
  s.update_s = seconds_since(t);
  return s;
}

void Trainer::distribute(dist::DataParallelOptions opts) {
  data_parallel = std::make_unique<dist::DataParallel>(*model, opts);
}

void Trainer::save(const std::string& path, nn::Metadata meta) const {
  save_run(path, *model, *optimizer, step_, std::move(meta));
}

nn::Metadata Trainer::load(const std::string& path) {
  return load_run(path, *model, *optimizer, step_, "GPT");
}

double mean_loss(GPT& model, const std::vector<std::pair<Tensor, Tensor>>& batches) {
  NoGradGuard no_grad;
  const bool was_training = model.is_training();
  model.eval();
  double sum = 0;
  for (const auto& [x, y] : batches) sum += nn::cross_entropy(model.forward(x), y).item();
  model.train(was_training);
  return batches.empty() ? 0.0 : sum / static_cast<double>(batches.size());
}

void load_weights(nn::Module& model, const std::string& checkpoint) {
  nn::StateDict weights;
  for (auto& [name, t] : nn::load_safetensors(checkpoint).tensors)
    if (name.starts_with("model.")) weights.emplace(name.substr(6), t);
  model.load_state_dict(weights);
}

}  // namespace linea::models::gpt
