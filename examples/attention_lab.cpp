// attention_lab (`make lab`): pictures and numbers that show why linear attention collapses and
// how MHLA's block mixing restores it (docs/attention.md walks through them).
//
// It builds the effective N×N attention maps of softmax, linear attention and MHLA
// (nn::functional::attention_matrix) and measures two things (data/attention_stats.h):
//   numerical rank   singular values above --rank-tol · σ_max (LAPACK dgesdd, float64);
//   entropy ratio    mean row entropy ÷ log(keys the row can see): 1 = uniform, 0 = one-hot.
// Three sources of q and k:
//   random           q, k ~ N(0, 1), d = --d, at N = 64, 128, ... --max-n, the same for every kind;
//   ViT-FMNIST       each kind's trained ViT on one test image (its patch tokens, every layer and
//                    head), and pooled over N/tokens test images for the N sweep;
//   char-GPT         each kind's trained causal GPT on a window of text (every layer and head), and
//                    the window's first N characters for the N sweep.
// A causal mask makes every map lower-triangular with a positive diagonal, hence full rank, so for
// the GPT the rank is measured on the unmasked maps of the same q, k and the entropy on the causal ones.
//
// Checkpoints: one ViT and one char-GPT per kind (softmax, linear, mhla), so each kind's maps are
// its own trained model's: <--runs>/vit_fmnist_<attn> and <--runs>/char_lm_<attn> (`make train`,
// `make lm` write the mhla ones) when present; otherwise it trains that model briefly with the
// example program (printed, with the time taken) into --out and reuses the run next time.
#include <omp.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>

#include <fmt/core.h>
#include <linea/linea.h>
#include <linea/models/gpt.h>

#include "data/attention_stats.h"
#include "data/idx.h"
#include "data/text.h"
#include "flags.h"
#include "lab_report.h"
#include "run_checkpoint.h"
#include "vit_config.h"

using namespace linea;
namespace gpt = linea::models::gpt;
namespace F = linea::nn::functional;
namespace fs = std::filesystem;
using lab::Row;

namespace {

struct Config {
  std::string out = "runs/lab";
  std::string runs = "runs";  // where make train / make lm runs are: <runs>/vit_fmnist_<attn>, <runs>/char_lm_<attn>
  std::string bin;      // where vit_fmnist and char_lm are ("" = beside this program)
  std::string text;     // the char-GPT's corpus ("" = the KJV of scripts/prepare_data.sh kjv)
  int64_t image = 0;    // the test image of the ViT maps
  int64_t layer = -1;   // the ViT layer of the N sweep (-1 = the last)
  int64_t d = 16;       // head dim of the random q, k
  int64_t max_n = 4096;
  int64_t rank_max_n = 1024;  // the SVD of an N×N map costs O(N³): ~2 s at 1024, ~15 s at 2048 here
  double rank_tol = 1e-6;
  uint64_t seed = 1;
  int64_t threads = 0;
};

const std::vector<flags::Flag<Config>>& flag_table() {
  using flags::flag;
  static const std::vector<flags::Flag<Config>> t = {
      flag("out", &Config::out, false, "where the PNGs, CSVs and brief training runs go"),
      flag("runs", &Config::runs, false,
           "the folder of full runs <runs>/vit_fmnist_<attn> and <runs>/char_lm_<attn> (those absent: train briefly)"),
      flag("bin", &Config::bin, false, "the folder holding vit_fmnist and char_lm (default: this program's)"),
      flag("text", &Config::text, false, "the char-GPT's text (default: the KJV, scripts/prepare_data.sh kjv)"),
      flag("image", &Config::image, false, "Fashion-MNIST test image of the ViT heatmaps", flags::below(0, 10000)),
      flag("layer", &Config::layer, false, "ViT layer of the pooled N sweep (-1: the last)", flags::at_least(-1)),
      flag("d", &Config::d, false, "head dim of the random q, k", flags::at_least(1, 256)),
      flag("max-n", &Config::max_n, false, "largest N of the sweeps (a power of two, 64..4096)",
           flags::at_least(64, 4096)),
      // The sweeps start at N = 64: a smaller bound would leave them without a single rank.
      flag("rank-max-n", &Config::rank_max_n, false, "largest N whose rank is measured (SVD is O(N^3))",
           flags::at_least(64)),
      flag("rank-tol", &Config::rank_tol, false, "rank counts singular values above rank-tol * the largest",
           flags::open(0, 1)),
      flag("seed", &Config::seed, false, "the random q, k and the text window"),
      flag("threads", &Config::threads, false, "OpenMP threads (default: all cores)", flags::at_least(0, 1024)),
  };
  return t;
}

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// ---------------------------------------------------------------- checkpoints

// The checkpoint given, else the full run's, else an earlier brief one, else a brief run now
// (vit_fmnist and char_lm create brief_dir themselves).
std::string find_or_train(const std::string& full_run, const std::string& brief_dir, const std::string& train_cmd,
                          const std::string& what) {
  const std::string brief = brief_dir + "/checkpoint.safetensors";
  for (const std::string& p : {full_run, brief})
    if (fs::exists(p)) return p;
  fmt::print("{}: no {} yet; training briefly:\n  {}\n", what, full_run, train_cmd);
  std::fflush(stdout);
  const auto t = Clock::now();
  LINEA_CHECK(std::system(train_cmd.c_str()) == 0 && fs::exists(brief), "[attention_lab] the brief run failed: {}",
              train_cmd);
  fmt::print("{}: trained briefly in {:.0f} s\n", what, seconds_since(t));
  return brief;
}

// What attention_lab reads of a vit_fmnist or char_lm checkpoint's metadata.
struct CheckpointInfo {
  std::map<std::string, std::string> flags;  // the "--name value" line saved under "config"
  std::string trained;                       // how far the run got: "3 epochs", "300 steps"
};

// `program` (vit_fmnist or char_lm) saved the checkpoint: vit_fmnist counts the epochs done under
// "epoch" and the batches into the next under "batch", char_lm the steps under "step".
CheckpointInfo read_checkpoint(const std::string& path, const std::string& program) {
  const nn::Metadata meta = nn::load_safetensors(path).metadata;
  const std::vector<std::string> keys = program == "vit_fmnist" ? std::vector<std::string>{"config", "epoch", "batch"}
                                                                 : std::vector<std::string>{"config", "step"};
  for (const std::string& k : keys)
    LINEA_CHECK(meta.contains(k), "[attention_lab] '{}' has no \"{}\" entry: not a {} checkpoint", path, k, program);
  auto count = [&](const std::string& k) { return examples::meta_integer(meta, k, path, "attention_lab"); };
  auto counted = [](int64_t n, const char* one, const char* many) {
    return fmt::format("{} {}", n, n == 1 ? one : many);
  };
  CheckpointInfo info;
  if (program == "vit_fmnist") {
    info.trained = counted(count("epoch"), "epoch", "epochs");
    if (const int64_t b = count("batch"); b > 0) info.trained += " and " + counted(b, "batch", "batches");
  } else {
    info.trained = counted(count("step"), "step", "steps");
  }
  const std::vector<std::string> w = flags::split_words(meta.at("config"));
  for (size_t i = 0; i + 1 < w.size(); i += 2) info.flags[w[i].substr(2)] = w[i + 1];
  return info;
}

// ---------------------------------------------------------------- q and k of a trained model

struct LayerQK {
  Tensor q, k;  // [B, H, N, hd] float64: what the layer's attention saw
  Tensor mix;   // MHLA's trained [M, M] (float64), or undefined
};

// Runs x [B, N, dim] through the blocks, keeping each block's q and k (the input of its attention).
std::vector<LayerQK> capture_qk(nn::Sequential& blocks, Tensor x) {
  NoGradGuard no_grad;
  std::vector<LayerQK> out;
  for (size_t i = 0; i < blocks.size(); ++i) {
    auto& block = dynamic_cast<nn::TransformerBlock&>(*blocks[i]);
    auto& attn = dynamic_cast<nn::QKVAttention&>(*block.attn);
    const int64_t B = x.size(0), N = x.size(1), H = attn.heads(), hd = attn.dim() / H;
    Tensor t = attn.qkv->forward(block.ln1->forward(x)).view({B, N, 3, H, hd}).permute({2, 0, 3, 1, 4});
    LayerQK l{t.select(0, 0).to(float64).contiguous(), t.select(0, 1).to(float64).contiguous(), Tensor()};
    if (auto* m = dynamic_cast<nn::MHLA*>(&attn)) {
      LINEA_CHECK(m->rope == nullptr, "[attention_lab] MHLA with RoPE has signed features; not supported here");
      l.mix = m->mix.detach().to(float64);
    }
    out.push_back(l);
    x = block.forward(x);
  }
  return out;
}

// ---------------------------------------------------------------- the maps

// One kind of map on q, k [1, H, N, d]: name, how attention_matrix builds it, the rank bound.
struct Kind {
  std::string name;
  F::AttentionKind kind;
  Tensor mix;  // MHLA only
  F::MHLAOptions opts;
};

// softmax, linear (φ = relu + eps) and MHLA at each M in `ms` with the block-distance W of a
// √M × √M block grid (the ViT's init), for N tokens.
std::vector<Kind> sweep_kinds(int64_t N, const std::vector<int64_t>& ms) {
  std::vector<Kind> kinds = {{"softmax", F::AttentionKind::Softmax, Tensor(), {}},
                             {"linear", F::AttentionKind::Linear, Tensor(), {}}};
  for (int64_t M : ms) {
    if (M > N) continue;
    const auto grid = int64_t(std::lround(std::sqrt(double(M))));
    kinds.push_back({fmt::format("mhla M={}", M), F::AttentionKind::MHLA,
                     nn::block_distance_mix(grid).to(float64), {.block_len = N / M}});
  }
  return kinds;
}

// The map of one head (2-D), rows scaled to sum to 1 (for the causal MHLA map, which the op
// leaves unnormalised; the others already are).
Tensor head_map(const Kind& k, const Tensor& q, const Tensor& kk, int64_t head) {
  Tensor a = F::attention_matrix(k.kind, q, kk, k.mix, k.opts).select(0, 0).select(0, head);
  return a / (sum(a, {-1}, true) + 1e-300);
}

// Σ_b min(n_b, d): MHLA's rank bound (spec §4); linear attention's is min(N, d), softmax's N.
int64_t rank_bound(const Kind& k, int64_t N, int64_t d) {
  if (k.kind == F::AttentionKind::Softmax) return N;
  if (k.kind == F::AttentionKind::Linear) return std::min(N, d);
  int64_t bound = 0;
  for (int64_t s = 0; s < N; s += k.opts.block_len) bound += std::min(std::min(k.opts.block_len, N - s), d);
  return bound;
}

Row measure(const std::string& source, const Kind& k, const Tensor& q, const Tensor& kk, int64_t head,
            const Config& o, bool want_rank, Tensor* map_out = nullptr) {
  const int64_t N = q.size(2), d = q.size(3);
  const Tensor a = head_map(k, q, kk, head);
  Row r{source, k.name, N, d, head, -1, rank_bound(k, N, d), data::entropy_ratio(a, k.opts.causal)};
  if (want_rank) r.rank = data::numerical_rank(a, o.rank_tol);
  if (map_out) *map_out = a;
  return r;
}

// ---------------------------------------------------------------- the three sources

// Random q, k ~ N(0, 1) at growing N; heatmaps of every kind at N = 64 and 256.
std::vector<Row> random_sweep(const Config& o, lab::Report& rep) {
  std::vector<Row> rows;
  Generator gen(o.seed);
  for (int64_t N = 64; N <= o.max_n; N *= 2) {
    const Tensor q = randn({1, 1, N, o.d}, gen, float64), k = randn({1, 1, N, o.d}, gen, float64);
    const bool picture = N == 64 || N == 256;
    std::vector<Tensor> maps;
    std::vector<std::string> labels;
    for (const Kind& kind : sweep_kinds(N, {4, 16, 64})) {
      Tensor a;
      rows.push_back(measure("random", kind, q, k, 0, o, N <= o.rank_max_n, picture ? &a : nullptr));
      if (picture) maps.push_back(a), labels.push_back(kind.name);
    }
    if (picture)
      rep.heatmap(fmt::format("random_N{}", N), maps, labels,
                  fmt::format("softmax, linear and MHLA maps of the same random q, k (N = {}, d = {})", N, o.d),
                  fmt::format("q, k ~ N(0, 1), --seed {}; MHLA: M blocks of N/M tokens, block-distance W", o.seed));
    fmt::print("  random N = {} done\n", N);
    std::fflush(stdout);
  }
  return rows;
}

// The attention kinds the lab trains a model of, each read through its own model.
const std::vector<std::string> kAttn = {"softmax", "linear", "mhla"};

struct VitData {
  std::shared_ptr<vit::ViT> model;
  std::string attn, ckpt, trained;
  int64_t tokens = 0;  // per image
};

// The checkpoint's ViT, trained with --attn `attn`.
VitData load_vit(const std::string& ckpt, const std::string& attn) {
  const CheckpointInfo info = read_checkpoint(ckpt, "vit_fmnist");
  fmt::print("ViT-FMNIST: {} ({} of training)\n", ckpt, info.trained);
  std::vector<std::string> words;
  for (const auto& [name, value] : info.flags) words.insert(words.end(), {"--" + name, value});
  const vit::Config cfg = vit::parse_config(words);
  LINEA_CHECK(cfg.attn == attn, "[attention_lab] '{}' was trained with --attn {}; the lab reads it as the {} ViT",
              ckpt, cfg.attn, attn);
  const int64_t side = cfg.img() / cfg.patch;
  VitData v{std::make_shared<vit::ViT>(vit::model_config(cfg)), attn, ckpt, info.trained, side * side};
  gpt::load_weights(*v.model, ckpt);
  v.model->eval();
  return v;
}

// The first `count` test images, normalised and padded as vit_fmnist trains: the training set's
// pixel statistics, black padding 28 -> 32.
Tensor vit_images(int64_t count) {
  const data::PixelStats stats = data::pixel_stats(data::load_fashion_mnist("train").images);
  const Tensor test = data::load_fashion_mnist("test").images.narrow(0, 0, count);
  return data::pad_images(data::normalize_images(test, stats), 2, -stats.mean / stats.std);
}

// The kind a model's own attention computes on a layer's q, k (MHLA: its trained W).
Kind own_kind(const std::string& attn, const LayerQK& L, const F::MHLAOptions& opts) {
  if (attn == "softmax") return {"softmax", F::AttentionKind::Softmax, Tensor(), opts};
  if (attn == "linear") return {"linear", F::AttentionKind::Linear, Tensor(), opts};
  return {fmt::format("mhla M={}", L.mix.size(0)), F::AttentionKind::MHLA, L.mix, opts};
}

// Each trained ViT on one test image: every layer and head of its own kind of attention.
std::vector<Row> vit_image(const Config& o, const std::vector<VitData>& vits, const Tensor& images, lab::Report& rep) {
  NoGradGuard no_grad;
  const Tensor img = images.narrow(0, o.image, 1);
  std::vector<Row> rows;
  for (const VitData& v : vits) {
    const std::vector<LayerQK> layers =
        capture_qk(*v.model->blocks, v.model->pos_embed->forward(v.model->patch->forward(img)));
    for (size_t l = 0; l < layers.size(); ++l) {
      const LayerQK& L = layers[l];
      const int64_t N = L.q.size(2);
      const Kind kind = own_kind(v.attn, L, {.block_len = L.mix.defined() ? N / L.mix.size(0) : 0});
      std::vector<Tensor> maps;
      for (int64_t h = 0; h < L.q.size(1); ++h) {
        Tensor a;
        rows.push_back(measure(fmt::format("vit layer {}", l), kind, L.q, L.k, h, o, true, &a));
        maps.push_back(a);
      }
      rep.heatmap_heads(fmt::format("vit_layer{}_{}", l, v.attn), maps,
                        fmt::format("ViT-FMNIST, layer {}: {} attention over the {} patch tokens of one image", l,
                                    kind.name, N),
                        fmt::format("model: vit_fmnist --attn {} ({}, {}); Fashion-MNIST test image {}", v.attn,
                                    v.ckpt, v.trained, o.image));
    }
  }
  return rows;
}

// Each trained ViT's q, k of one layer (head 0), pooled over N / tokens test images, at growing N:
// softmax and linear from their models, MHLA at M = 4, 16, 64 (block-distance W) from the MHLA one.
std::vector<Row> vit_sweep(const Config& o, const std::vector<VitData>& vits, const Tensor& images) {
  NoGradGuard no_grad;
  const int64_t count = images.size(0);
  std::vector<Row> rows;
  for (const VitData& v : vits) {
    const std::vector<LayerQK> layers =
        capture_qk(*v.model->blocks, v.model->pos_embed->forward(v.model->patch->forward(images)));
    const int64_t layer = o.layer < 0 ? int64_t(layers.size()) - 1 : o.layer;
    // [images, H, tokens, d] -> head 0's tokens of all images in a row: [1, 1, images·tokens, d]
    auto pool = [&](const Tensor& t) { return t.select(1, 0).reshape({1, 1, count * t.size(2), t.size(3)}); };
    const Tensor q = pool(layers[layer].q), k = pool(layers[layer].k);
    for (int64_t N = 64; N <= q.size(2); N *= 2)
      for (const Kind& kind : sweep_kinds(N, {4, 16, 64}))
        if (kind.name.starts_with(v.attn))
          rows.push_back(measure(fmt::format("vit pooled, layer {} head 0", layer), kind, q.narrow(2, 0, N),
                                 k.narrow(2, 0, N), 0, o, N <= o.rank_max_n));
  }
  return rows;
}

struct GptData {
  std::shared_ptr<gpt::GPT> model;
  std::string attn, ckpt, trained;
  int64_t chunk = 0;  // causal MHLA's block length
  Tensor window;      // [1, context] token ids of real text
};

// The trained char-GPT of kind `attn` and one window of its validation text (the same window for
// every kind: the same seed, the same corpus).
GptData load_gpt(const Config& o, const std::string& ckpt, const std::string& attn, const std::string& text_path) {
  const CheckpointInfo info = read_checkpoint(ckpt, "char_lm");
  fmt::print("char-GPT: {} ({} of training)\n", ckpt, info.trained);
  const std::map<std::string, std::string>& f = info.flags;
  LINEA_CHECK(f.contains("attn") && f.at("attn") == attn,
              "[attention_lab] '{}' was trained with --attn {}; the lab reads it as the {} char_lm", ckpt,
              f.contains("attn") ? f.at("attn") : "(none)", attn);
  const data::Vocab vocab = data::Vocab::load((fs::path(ckpt).parent_path() / "vocab.json").string());
  gpt::ModelConfig mc{.attn = attn, .vocab = vocab.size(), .layers = std::stoll(f.at("layers")),
                      .heads = std::stoll(f.at("heads")), .dim = std::stoll(f.at("dim")),
                      .context = std::stoll(f.at("context")), .chunk = std::stoll(f.at("chunk")),
                      .mlp_ratio = std::stod(f.at("mlp-ratio")), .dropout = 0, .tie = f.at("tie") == "on",
                      .bias = f.at("bias") == "on"};
  GptData g{std::make_shared<gpt::GPT>(mc), attn, ckpt, info.trained, mc.chunk, Tensor()};
  gpt::load_weights(*g.model, ckpt);
  g.model->eval();
  const data::CharCorpus corpus = data::CharCorpus::from_file(text_path, vocab);
  Generator gen(o.seed);
  g.window = corpus.get_batch("val", 1, mc.context, gen).x;
  if (attn == kAttn.front()) {
    std::string shown = vocab.decode(g.window);
    for (char& c : shown)
      if (c == '\n') c = '|';
    fmt::print("char-GPT window ({} characters of {}'s val split; '|' is a newline):\n  \"{}\"\n", mc.context,
               text_path, shown);
  }
  return g;
}

// The map kind char-GPT `g` computes on the first N tokens, as the model does: linear attention's
// φ = relu + eps, causal MHLA's relu and scale d^-1/2 with the leading N / chunk rows of its W.
Kind gpt_kind(const GptData& g, const LayerQK& L, int64_t N, bool causal) {
  const int64_t chunks = (N + g.chunk - 1) / g.chunk;
  Kind k = own_kind(g.attn, L, {.causal = causal, .block_len = g.chunk, .feature_map = F::FeatureMap::Relu});
  if (k.kind == F::AttentionKind::MHLA)
    k.mix = L.mix.narrow(0, 0, chunks).narrow(1, 0, chunks), k.name = fmt::format("mhla M={}", chunks);
  else
    k.opts = {.causal = causal};
  return k;
}

// Each trained char-GPT on the window: causal maps (entropy, heatmaps) and the unmasked maps of the
// same q, k (rank), every layer and head.
std::vector<Row> gpt_window(const Config& o, const std::vector<GptData>& gpts, lab::Report& rep) {
  NoGradGuard no_grad;
  std::vector<Row> rows;
  for (const GptData& g : gpts) {
    const std::vector<LayerQK> layers =
        capture_qk(*g.model->blocks, g.model->pos_emb->forward(g.model->tok_emb->forward(g.window)));
    for (size_t l = 0; l < layers.size(); ++l) {
      const LayerQK& L = layers[l];
      const int64_t N = L.q.size(2);
      for (bool causal : {true, false}) {
        const Kind kind = gpt_kind(g, L, N, causal);
        std::vector<Tensor> maps;
        for (int64_t h = 0; h < L.q.size(1); ++h) {
          Tensor a;
          rows.push_back(measure(fmt::format("gpt layer {} {}", l, causal ? "causal" : "unmasked"), kind, L.q, L.k, h,
                                 o, !causal, &a));
          maps.push_back(a);
        }
        if (causal)
          rep.heatmap_heads(fmt::format("gpt_layer{}_{}", l, g.attn), maps,
                            fmt::format("char-GPT, layer {}: causal {} attention over {} characters", l, kind.name, N),
                            fmt::format("model: char_lm --attn {} ({}, {}); one window of its val text", g.attn,
                                        g.ckpt, g.trained),
                            true);
      }
    }
  }
  return rows;
}

// Each char-GPT's last layer, head 0, on the first N characters of the window (N = chunk, 2·chunk,
// ... the context; causally the model saw exactly these q, k): the rank of the unmasked map and the
// entropy ratio of the causal one.
std::vector<Row> gpt_sweep(const Config& o, const std::vector<GptData>& gpts) {
  NoGradGuard no_grad;
  std::vector<Row> rows;
  for (const GptData& g : gpts) {
    const std::vector<LayerQK> layers =
        capture_qk(*g.model->blocks, g.model->pos_emb->forward(g.model->tok_emb->forward(g.window)));
    const LayerQK& L = layers.back();
    const std::string source = fmt::format("gpt layer {} head 0, first N characters", layers.size() - 1);
    for (int64_t N = g.chunk; N <= L.q.size(2); N *= 2) {
      const Tensor q = L.q.narrow(2, 0, N), k = L.k.narrow(2, 0, N);
      Row r = measure(source, gpt_kind(g, L, N, false), q, k, 0, o, true);
      r.entropy = measure(source, gpt_kind(g, L, N, true), q, k, 0, o, false).entropy;
      if (g.attn == "mhla") r.kind = fmt::format("mhla M=N/{}", g.chunk);  // one line across N
      rows.push_back(r);
    }
  }
  return rows;
}

int run(const Config& o, const std::string& self_dir) {
  LINEA_CHECK((o.max_n & (o.max_n - 1)) == 0, "[attention_lab] --max-n must be a power of two in 64..4096, got {}",
              o.max_n);
  // Where the results go and the text the char-GPT reads, before anything is trained or measured.
  const std::string text_path = o.text.empty() ? data::default_corpus_path() : o.text;
  lab::Report rep(o.out);
  std::error_code ec;
  LINEA_CHECK(fs::is_regular_file(text_path, ec), "[attention_lab] {}'{}' is not a file{}",
              o.text.empty() ? "the default text " : "--text ", text_path,
              o.text.empty() ? " (make it with scripts/prepare_data.sh kjv, or give --text FILE)" : "");
  const std::string bin = o.bin.empty() ? self_dir : o.bin;
  const int threads = omp_get_max_threads();
  std::vector<std::string> vit_ckpts, lm_ckpts;
  for (const std::string& attn : kAttn) {
    const std::string vit_dir = "vit_fmnist_" + attn, lm_dir = "char_lm_" + attn;
    vit_ckpts.push_back(find_or_train(
        fmt::format("{}/{}/checkpoint.safetensors", o.runs, vit_dir), o.out + "/" + vit_dir,
        fmt::format("nice -n 10 {}/vit_fmnist --attn {} --epochs 1 --threads {} --overwrite on --out {}/{}", bin, attn,
                    threads, o.out, vit_dir),
        "ViT-FMNIST " + attn));
    lm_ckpts.push_back(find_or_train(
        fmt::format("{}/{}/checkpoint.safetensors", o.runs, lm_dir), o.out + "/" + lm_dir,
        fmt::format("nice -n 10 {}/char_lm --attn {} --steps 300 --eval-interval 300 --eval-batches 20 --threads {} "
                    "--overwrite on --out {}/{}{}",
                    bin, attn, threads, o.out, lm_dir, o.text.empty() ? "" : " --data " + o.text),
        "char-GPT " + attn));
  }

  // Everything is loaded before anything is measured.
  std::vector<VitData> vits;
  std::vector<GptData> gpts;
  for (size_t i = 0; i < kAttn.size(); ++i) {
    vits.push_back(load_vit(vit_ckpts[i], kAttn[i]));
    LINEA_CHECK(o.layer < int64_t(vits.back().model->blocks->size()),
                "[attention_lab] --layer {} but the ViT '{}' has {} layers", o.layer, vit_ckpts[i],
                vits.back().model->blocks->size());
  }
  for (size_t i = 0; i < kAttn.size(); ++i) gpts.push_back(load_gpt(o, lm_ckpts[i], kAttn[i], text_path));
  const int64_t tokens = vits[0].tokens;
  for (const VitData& v : vits)
    LINEA_CHECK(v.tokens == tokens, "[attention_lab] the ViTs have {} and {} tokens per image; the lab compares "
                "them on the same images and needs one patch size", tokens, v.tokens);
  const Tensor images = vit_images(std::max(o.max_n / tokens, o.image + 1));
  const auto t = Clock::now();
  fmt::print("\nmeasuring (rank: singular values > {:g} x the largest, LAPACK dgesdd in float64, for N <= {}; "
             "entropy: mean row entropy / log(keys in the row))\n",
             o.rank_tol, o.rank_max_n);
  const std::vector<Row> random = random_sweep(o, rep);
  const std::vector<Row> vit_img = vit_image(o, vits, images, rep);
  const std::vector<Row> vit_pooled = vit_sweep(o, vits, images.narrow(0, 0, o.max_n / tokens));
  const std::vector<Row> gpt = gpt_window(o, gpts, rep);
  const std::vector<Row> gpt_prefix = gpt_sweep(o, gpts);
  fmt::print("measured in {:.0f} s\n", seconds_since(t));

  const std::string pooled = fmt::format("{}, N tokens pooled from N/{} test images",
                                         vit_pooled.front().source.substr(std::string("vit pooled, ").size()), tokens);
  rep.sweep_table("random q, k ~ N(0, 1)", random);
  rep.sweep_table(fmt::format("ViTs, {} (each kind its own model; MHLA's W: block-distance init)", pooled), vit_pooled);
  rep.sweep_table(fmt::format("char-GPTs, {} (each kind its own model: rank unmasked, entropy causal)",
                              gpt_prefix.front().source),
                  gpt_prefix);
  rep.trained_table(
      fmt::format("ViT-FMNIST, one test image ({} tokens; each kind its own model, MHLA its trained W); "
                  "mean over heads",
                  tokens),
      vit_img);
  rep.trained_table("char-GPT, one text window (each kind its own model): entropy on the causal maps, rank on the "
                    "unmasked ones; mean over heads",
                    gpt);
  rep.claims(random, "random q, k", false);
  rep.claims(vit_pooled, "trained ViTs, " + pooled, true);
  rep.claims(gpt_prefix, "trained char-GPTs, " + gpt_prefix.front().source, true);
  rep.plots("random", fmt::format("random q, k ~ N(0, 1), d = {}", o.d), random);
  rep.plots("vit", "trained ViTs, " + pooled, vit_pooled);
  rep.plots("gpt", "trained char-GPTs, " + gpt_prefix.front().source, gpt_prefix);
  std::vector<Row> all = random;
  for (const auto* v : {&vit_pooled, &vit_img, &gpt, &gpt_prefix}) all.insert(all.end(), v->begin(), v->end());
  rep.csv("rank_entropy.csv", all);
  rep.files_written();
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::vector<std::string> args(argv + 1, argv + argc);
  if (flags::help_requested("attention_lab", flag_table(), args)) return 0;
  return flags::guarded_main("attention_lab", [&] {
    const Config o = flags::parse_flags("attention_lab", flag_table(), args);
    if (o.threads > 0) omp_set_num_threads(int(o.threads));
    return run(o, fs::absolute(argv[0]).parent_path().string());
  });
}
