// char_lm: a character-level GPT (nanoGPT's "baby" Shakespeare model) with softmax, linear or
// causal MHLA attention, trained on the CPU in minutes.
//
//   char_lm                                  MHLA on the King James Bible (scripts/prepare_data.sh kjv)
//   char_lm --attn softmax --data tinyshakespeare.txt   any plain-text file, e.g. nanoGPT's corpus
//   char_lm --resume runs/char_lm_mhla/checkpoint.safetensors          continue, step for step
//   char_lm --load runs/char_lm_mhla/checkpoint.safetensors --sample 500   sample only
//   char_lm --bench 20 --attn all            median time per training step of each attention kind
//   char_lm --help                           every flag with its default
//   mpirun -np 2 char_lm --threads 1          data-parallel: each process trains on half of every batch
//
// The defaults are nanoGPT's CPU config (4 layers, 4 heads, width 128, context 64, batch 12, 2000
// steps, lr 1e-3 with 100 warm-up steps and cosine decay to 1e-4, weight decay 0.1, grad clip 1,
// AdamW beta2 0.99, no dropout). The model and its training step are the library's
// (<linea/models/gpt.h>); this file is the program around them. A run writes into --out (default runs/char_lm_<attn>):
//   config.txt               the flags of the run (model and recipe), one line
//   vocab.json               the characters the token ids stand for
//   metrics.csv              one row per evaluation: step, lr, train and val loss, bits per char
//   checkpoint.safetensors   model + AdamW state and the corpus's checksum, after every evaluation
//                            and on SIGINT (Ctrl-C) or SIGTERM; never with a NaN or an infinity
//   run.lock                 held while the run runs: a second run into the same --out is refused
#include <omp.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <optional>
#include <numbers>

#include <fmt/core.h>
#include <fmt/ranges.h>
#include <linea/linea.h>
#include <linea/models/gpt.h>

#include "data/memory_budget.h"
#include "data/plot.h"
#include "data/progress.h"
#include "data/run_files.h"
#include "data/sampling.h"
#include "data/text.h"
#include "flags.h"
#include "bench_steps.h"
#include "dist_run.h"
#include "run_checkpoint.h"

using namespace linea;
namespace gpt = linea::models::gpt;

namespace {

struct Config {
  // The model.
  std::string attn = "mhla";  // softmax | linear | mhla (and "all" with --bench)
  int64_t layers = 4, heads = 4, dim = 128, context = 64, chunk = 16;
  double mlp_ratio = 4, dropout = 0;
  bool tie = true;
  bool bias = true;  // false: nanoGPT's bias=False (no biases in the blocks' Linears or in LayerNorm)
  // The recipe.
  int64_t steps = 2000, batch = 12, warmup = 100;
  double lr = 1e-3, min_lr = 1e-4, weight_decay = 0.1, beta2 = 0.99, grad_clip = 1.0;
  uint64_t seed = 1337;
  int64_t eval_interval = 500, eval_batches = 200;
  std::string precision = "fp32";  // fp32 | bf16: the matmuls' dot products (examples/flags.h)
  // Running (not saved; a checkpoint records the corpus's path and checksum instead).
  std::string data;  // "" = the KJV (data::default_corpus_path())
  std::string out, resume, load;
  bool overwrite = false;
  std::string on_nan = "stop";  // stop | skip-step: what a step with a non-finite loss or grad norm does
  int64_t sample = 0;
  double temperature = 0.8;
  std::string prompt = "\n";
  int64_t bench = 0, threads = 0;
  bool profile = false;  // with --bench (default 5 steps): the per-op profile of one more step
  bool profile_shapes = false;  // the profile's gemm rows split by operand shape
  std::string device = "cpu";
  std::string trace;  // a file: the windows, lr, loss and grad norm of every step (parity checks)
};

const std::vector<flags::Flag<Config>>& flag_table() {
  using flags::flag;
  static const std::vector<flags::Flag<Config>> t = {
      flag("attn", &Config::attn, true, "softmax | linear | mhla (all: with --bench, the three in turn)"),
      flag("layers", &Config::layers, true, "transformer blocks", flags::positive()),
      flag("heads", &Config::heads, true, "attention heads", flags::positive()),
      flag("dim", &Config::dim, true, "model width", flags::positive()),
      flag("context", &Config::context, true, "tokens per training window (and the longest context)",
           flags::positive()),
      flag("chunk", &Config::chunk, true, "MHLA: tokens per chunk", flags::positive()),
      flag("mlp-ratio", &Config::mlp_ratio, true, "MLP hidden size / dim", flags::positive()),
      flag("dropout", &Config::dropout, true, "dropout on attention outputs and in the MLP", flags::below(0, 1)),
      flag("tie", &Config::tie, true, "on | off: the head shares the token embedding's weights"),
      flag("bias", &Config::bias, true, "on | off: biases in the Linears and LayerNorms (off: nanoGPT's bias=False)"),
      flag("steps", &Config::steps, true, "optimizer steps", flags::positive()),
      flag("batch", &Config::batch, true, "windows per step", flags::positive()),
      flag("warmup", &Config::warmup, true, "linear warm-up steps", flags::at_least(0)),
      flag("lr", &Config::lr, true, "peak learning rate (AdamW)", flags::positive(1)),
      flag("min-lr", &Config::min_lr, true, "learning rate at the end of the cosine", flags::at_least(0)),
      flag("weight-decay", &Config::weight_decay, true, "AdamW decoupled weight decay (weight matrices, embeddings)",
           flags::at_least(0)),
      flag("beta2", &Config::beta2, true, "AdamW beta2", flags::open(0, 1)),
      flag("grad-clip", &Config::grad_clip, true, "global grad-norm clip (0: off)", flags::at_least(0)),
      flag("seed", &Config::seed, true, "seeds the weights and the training windows"),
      flag("data", &Config::data, false, "a text file (default: the KJV from scripts/prepare_data.sh kjv)"),
      flag("out", &Config::out, false, "run directory (default runs/char_lm_<attn>)"),
      flag("overwrite", &Config::overwrite, false, "on: replace the run in a non-empty --out (off: refuse it)"),
      flag("resume", &Config::resume, false, "continue from this checkpoint (its config is the base)"),
      flag("load", &Config::load, false, "sample from this checkpoint (no training); needs --sample"),
      flag("eval-interval", &Config::eval_interval, true, "steps between val-loss estimates (and checkpoints)",
           flags::positive()),
      flag("eval-batches", &Config::eval_batches, true, "random windows x batch in each loss estimate",
           flags::positive()),
      flag("on-nan", &Config::on_nan, false,
           "stop | skip-step: a step whose loss or grad norm is NaN or infinite stops the run, keeping the last good "
           "checkpoint (stop), or changes nothing and the run goes on (skip-step; more than 10 in a row stop it)"),
      flag("sample", &Config::sample, false, "characters to generate after training (or from --load)",
           flags::at_least(0)),
      flag("temperature", &Config::temperature, false, "sampling temperature", flags::positive()),
      flag("prompt", &Config::prompt, false, "text the sample continues"),
      flag("bench", &Config::bench, false, "time N training steps (median), no training", flags::at_least(0)),
      flag("profile", &Config::profile, false,
           "on: after the --bench steps (5 without --bench), print the per-op profile of one more step"),
      flag("profile-shapes", &Config::profile_shapes, false,
           "on: with --profile, one gemm row per operand shape (implies --profile on)"),
      flag("threads", &Config::threads, false, "OpenMP threads (default: all cores)", flags::at_least(0, 1024)),
      flag("device", &Config::device, false, "cpu | cuda: where training and --bench run (sampling runs on the CPU)"),
      flag("precision", &Config::precision, true, "fp32 | bf16: matmul dot products (bf16: bfloat16 operands, float32 sums)"),
      flag("trace", &Config::trace, false,
           "write each step's window offsets, lr, loss and grad norm to this file, the val windows' offsets, "
           "and the initial weights to <out>/init.safetensors (to replay the run elsewhere, e.g. PyTorch)"),
  };
  return t;
}

[[noreturn]] void fail(const std::string& msg) { flags::fail("char_lm", msg); }

// What the flags' ranges cannot see: values that depend on each other.
void check(const Config& o) {
  if (o.attn != "softmax" && o.attn != "linear" && o.attn != "mhla" && o.attn != "all")
    fail(fmt::format("--attn must be softmax, linear or mhla (or all with --bench), got '{}'", o.attn));
  if (o.attn == "all" && o.bench == 0 && !o.profile) fail("--attn all only goes with --bench N");
  if (o.dim % o.heads != 0) fail(fmt::format("--dim {} is not a multiple of --heads {}", o.dim, o.heads));
  if (o.min_lr > o.lr) fail(fmt::format("--min-lr {} is above --lr {}", o.min_lr, o.lr));
  if (o.warmup > o.steps) fail(fmt::format("--warmup {} is more than --steps {}", o.warmup, o.steps));
  if (o.lr * o.weight_decay >= 1)  // AdamW scales the weights by 1 - lr·wd every step
    fail(fmt::format("--weight-decay {} x --lr {} must be < 1", o.weight_decay, o.lr));
  if (!o.load.empty() && o.sample == 0) fail("--load samples from a checkpoint: give --sample N");
  if (!o.load.empty() && !o.resume.empty()) fail("--load and --resume do not go together");
  if (o.prompt.empty()) fail("--prompt must not be empty");
  if (o.on_nan != "stop" && o.on_nan != "skip-step")
    fail(fmt::format("--on-nan takes stop or skip-step, got '{}'", o.on_nan));
  if (const int n = dist::world().size; n > 1) {
    if (o.batch % n != 0) fail(fmt::format("--batch {} does not split evenly over {} processes", o.batch, n));
    if (!o.trace.empty()) fail("--trace records a single process's run: run it without mpirun");
  }
}

gpt::ModelConfig model_config(const Config& o, int64_t vocab) {
  return {.attn = o.attn, .vocab = vocab, .layers = o.layers, .heads = o.heads, .dim = o.dim, .context = o.context,
          .chunk = o.chunk, .mlp_ratio = o.mlp_ratio, .dropout = o.dropout, .tie = o.tie, .bias = o.bias};
}

// Refuses a config that cannot fit before anything is allocated: the model at the largest
// vocabulary a byte corpus can have (256), the fixed train and val windows, the sample.
void check_memory(const Config& o) {
  const double windows = 2 * double(o.eval_batches) * double(o.batch) * double(o.context) * 2 * 8;  // int64 x, y
  const double model = data::gpt_training_bytes(model_config(o, 256), o.batch);
  data::check_memory_budget("char_lm", model + windows + 16 * double(o.sample),
                            "--context, --layers, --dim, --mlp-ratio, --batch, --eval-batches or --sample");
}
gpt::OptimConfig optim_config(const Config& o) {
  // nanoGPT's warm-up, lr·(step+1)/(warmup+1): step 0 already moves the weights.
  return {.steps = o.steps, .lr = o.lr, .min_lr = o.min_lr, .warmup = o.warmup,
          .start_lr = o.lr / static_cast<double>(o.warmup + 1), .weight_decay = o.weight_decay, .beta2 = o.beta2,
          .grad_clip = o.grad_clip};
}

// The saved flags of a char_lm checkpoint.
Config saved_config(const nn::Metadata& meta, const std::string& path) {
  examples::check_program(meta, path, "char_lm");
  auto it = meta.find("config");
  if (it == meta.end()) fail(fmt::format("'{}' has no config: not a char_lm checkpoint", path));
  try {
    return flags::parse_flags("char_lm", flag_table(), flags::split_words(it->second));
  } catch (const Error&) {  // another program's flags
    fail(fmt::format("'{}' is not a char_lm checkpoint (its config has flags char_lm does not know)", path));
  }
}

// --load: the checkpoint's flags with the command line on top.
Config load_config(const std::string& path, const std::vector<std::string>& args) {
  return flags::parse_flags("char_lm", flag_table(), args, saved_config(nn::load_safetensors(path).metadata, path));
}

// --resume: the checkpoint's flags and corpus, so the resumed run computes what the uninterrupted
// one would have. Of the flags that change the numbers only --steps may be given another value (the
// rows already written stay valid); the corpus (by default the checkpoint's) must be the same bytes.
Config resume_config(const std::string& path, const std::vector<std::string>& args) {
  const nn::Metadata meta = nn::load_safetensors(path).metadata;
  const Config saved = saved_config(meta, path);
  Config o = flags::parse_flags("char_lm", flag_table(), args, saved);
  const std::vector<std::string> changed = flags::resume_changes("char_lm", flag_table(), saved, o, {"steps"});
  const std::string saved_data = examples::meta_text(meta, "data", path, "char_lm");
  const std::string want = examples::meta_text(meta, "data_checksum", path, "char_lm");
  if (o.data.empty()) o.data = saved_data;
  if (const std::string have = data::file_checksum("char_lm", o.data); have != want)
    fail(fmt::format("'{}' ({}) is not the corpus '{}' was trained on: '{}' ({})", o.data, have, path, saved_data,
                     want));
  if (!changed.empty())
    fmt::print("char_lm: resuming with {} (the other flags that change the numbers are the checkpoint's)\n",
               fmt::join(changed, ", "));
  return o;
}

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }
double bits(double nats) { return nats / std::numbers::ln2; }

// `n` batches of random windows drawn from a fixed seed: every estimate (and every attention
// kind) is measured on the same text, so differences are the model's, not the windows'.
std::vector<std::pair<Tensor, Tensor>> fixed_batches(const data::CharCorpus& corpus, const std::string& split,
                                                     const Config& o, uint64_t seed, Device dev) {
  Generator gen(seed);
  std::vector<std::pair<Tensor, Tensor>> out;
  for (int64_t i = 0; i < o.eval_batches; ++i) {
    data::TextBatch b = corpus.get_batch(split, o.batch, o.context, gen);
    out.emplace_back(b.x.to(dev), b.y.to(dev));
  }
  return out;
}

// The token offsets of the windows CharCorpus::get_batch draws from `gen` (the same draws).
std::vector<int64_t> window_offsets(const data::CharCorpus& corpus, const std::string& split, const Config& o,
                                    Generator& gen) {
  const int64_t begin = split == "train" ? 0 : corpus.size("train"), n = corpus.size(split);
  std::vector<int64_t> out;
  for (int64_t i = 0; i < o.batch; ++i) out.push_back(begin + data::random_below(gen, n - o.context));
  return out;
}

// The training windows of step `step`: a generator of their own per step, so a resumed run
// draws exactly the batches the uninterrupted run would have.
data::TextBatch train_batch(const data::CharCorpus& corpus, const Config& o, int64_t step) {
  Generator gen(data::derive_seed(o.seed, static_cast<uint64_t>(step)));
  return corpus.get_batch("train", o.batch, o.context, gen);
}

std::string sample_text(gpt::GPT& model, const data::Vocab& vocab, const Config& o) {
  Generator gen(data::derive_seed(o.seed, 0, 1));
  const std::vector<int64_t> prompt = vocab.encode(o.prompt).to_vector_as<int64_t>();
  const std::vector<int64_t> ids = gpt::generate(model, prompt, o.sample, o.temperature, 0, gen);
  return o.prompt + vocab.decode(from_vector(ids, {static_cast<int64_t>(ids.size())}));
}

// The vocabulary a checkpoint's token ids stand for: vocab.json in its directory.
std::string vocab_beside(const std::string& checkpoint) {
  return (std::filesystem::path(checkpoint).parent_path() / "vocab.json").string();
}

// ---------------------------------------------------------------- --bench

// Times o.bench training steps on random windows of a 65-character vocabulary.
BenchRow bench_one(Config o, const std::string& attn, Device dev) {
  o.attn = attn;
  manual_seed(o.seed);
  auto model = std::make_shared<gpt::GPT>(model_config(o, 65));
  nn::to(*model, dev);
  gpt::Trainer trainer(model, optim_config(o));
  if (dist::world().size > 1) trainer.distribute();
  Generator gen(o.seed);
  const int64_t rows = dist::shard(o.batch).size;  // under mpirun: this rank's share of the batch
  const Tensor x = randint(0, 65, {rows, o.context}, gen).to(dev);
  const Tensor y = randint(0, 65, {rows, o.context}, gen).to(dev);
  BenchRow row = time_steps(o.bench, double(o.batch * o.context), dev, [&] { return trainer.train_step(x, y); },
                            o.profile ? attn : "", o.profile_shapes);
  row.params = model->num_parameters();
  if (trainer.data_parallel) print_comm_share(*trainer.data_parallel, row);
  return row;
}

int run_bench(const Config& o, Device dev) {
  fmt::print("char_lm --bench {}: batch {} x context {}, dim {}, layers {}, heads {}, chunk {}, on {}, {} threads, "
             "{} CPU kernels, {} matmuls; median\n",
             o.bench, o.batch, o.context, o.dim, o.layers, o.heads, o.chunk, dev, omp_get_max_threads(),
             cpu_isa_name(cpu_isa()), o.precision);
  print_bench_header("tok/s", dev);
  return run_bench_rows(o.attn, dev, [&](const std::string& attn) { return bench_one(o, attn, dev); });
}

// ---------------------------------------------------------------- --load: sample only

int run_sample(const Config& o) {
  const data::Vocab vocab = data::Vocab::load(vocab_beside(o.load));
  gpt::GPT model(model_config(o, vocab.size()));
  gpt::load_weights(model, o.load);
  fmt::print("{}\n", sample_text(model, vocab, o));
  return 0;
}

// ---------------------------------------------------------------- training

int run_train(const Config& o, Device dev) {
  // From here on SIGINT and SIGTERM stop the run after the step they arrive in, with a checkpoint.
  std::atomic<int>& stop = data::install_stop_signals();
  // A resumed run continues in its checkpoint's directory unless told otherwise.
  std::string out = o.out.empty() ? "runs/char_lm_" + o.attn : o.out;
  if (o.out.empty() && !o.resume.empty()) out = std::filesystem::path(o.resume).parent_path().string();
  if (out.empty()) out = ".";
  const data::RunStart start = data::run_start(out, o.resume, o.overwrite);
  data::check_run_dir("char_lm", out, start);  // before anything is loaded
  const std::string ckpt = out + "/checkpoint.safetensors", csv_path = out + "/metrics.csv";
  const std::string data_path = o.data.empty() ? data::default_corpus_path() : o.data;
  // A resumed run keeps the ids it was trained with.
  const data::CharCorpus corpus = o.resume.empty() ? data::CharCorpus::from_file(data_path)
                                                   : data::CharCorpus::from_file(data_path, data::Vocab::load(vocab_beside(o.resume)));
  // What a resumed run checks it reads (resume_config).
  const std::string data_entry = std::filesystem::absolute(data_path).string();
  const std::string data_checksum = data::file_checksum("char_lm", data_path);

  manual_seed(o.seed);
  auto model = std::make_shared<gpt::GPT>(model_config(o, corpus.vocab().size()));
  nn::to(*model, dev);  // before the optimizer, which then keeps its state on dev too
  gpt::Trainer trainer(model, optim_config(o));
  if (dist::world().size > 1) trainer.distribute();
  // Under mpirun each rank estimates a loss on every N-th batch; the ranks' sums give the mean.
  auto mean_loss = [&](const std::vector<std::pair<Tensor, Tensor>>& batches) {
    const dist::World& w = dist::world();
    if (w.size == 1) return gpt::mean_loss(*model, batches);
    std::vector<std::pair<Tensor, Tensor>> mine;
    for (size_t i = w.rank; i < batches.size(); i += w.size) mine.push_back(batches[i]);
    const double n = double(mine.size());
    const std::vector<double> s = examples::sum_over_ranks({gpt::mean_loss(*model, mine) * n, n});
    return s[0] / s[1];
  };
  const auto val_batches = fixed_batches(corpus, "val", o, data::derive_seed(o.seed, 1, 2), dev);
  fmt::print("char_lm: {} attention, {} parameters, vocab {}, {} train / {} val characters of {}, {} process(es) x {} "
             "threads, {} CPU kernels, {} matmuls\n", o.attn, model->num_trainable(), corpus.vocab().size(),
             corpus.size("train"), corpus.size("val"), data_path, dist::world().size, omp_get_max_threads(),
             cpu_isa_name(cpu_isa()), o.precision);

  // The running mean of the training loss since the last evaluation (over the steps that trained,
  // not those skipped for a non-finite loss or grad norm), and the clock.
  double loss_sum = 0, seconds = 0;
  int64_t loss_count = 0, skipped_window = 0;
  examples::NanGuard guard{.policy = o.on_nan};
  // The running loss sum over all ranks: every rank adds its rows' mean each step (and, resumed,
  // starts from the saved sum), so the mean over the ranks is the sum of the global batch means.
  auto global_loss_sum = [&] {
    const int n = dist::world().size;
    return n == 1 ? loss_sum : examples::sum_over_ranks({loss_sum})[0] / n;
  };
  // The last good checkpoint: the file and its step (-1: none yet).
  std::string good = o.resume;
  int64_t good_step = -1;
  auto save = [&] {
    const double sum = global_loss_sum();
    if (!dist::is_main()) return;
    trainer.save(ckpt, {{"program", "char_lm"}, {"config", flags::flags_line(flag_table(), o)},
                        {"data", data_entry}, {"data_checksum", data_checksum}, {"loss_sum", fmt::format("{}", sum)},
                        {"loss_count", std::to_string(loss_count)}, {"seconds", fmt::format("{}", seconds)},
                        {"skipped", std::to_string(guard.skipped)}, {"skipped_window", std::to_string(skipped_window)},
                        {"skipped_in_a_row", std::to_string(guard.in_a_row)},
                        {"threads", std::to_string(omp_get_max_threads())}, {"device", o.device}});
    good = ckpt, good_step = trainer.step();
  };
  if (!o.resume.empty()) {
    const nn::Metadata m = trainer.load(o.resume);
    auto count = [&](const char* key) { return examples::meta_integer(m, key, o.resume, "char_lm"); };
    loss_sum = examples::meta_number(m, "loss_sum", o.resume, "char_lm");
    loss_count = count("loss_count"), skipped_window = count("skipped_window");
    guard.skipped = count("skipped"), guard.in_a_row = count("skipped_in_a_row");
    seconds = examples::meta_number(m, "seconds", o.resume, "char_lm");
    good_step = trainer.step();
    fmt::print("resumed from {} at step {}\n", o.resume, trainer.step());
    if (const std::string note = examples::resume_machine_note(m, o.resume, "char_lm", omp_get_max_threads(), o.device);
        !note.empty())
      fmt::print("{}\n", note);
  }

  // Everything loaded: the run starts, and only now writes its files.
  data::RunLock lock;  // under mpirun, rank 0 alone writes the run's files
  if (dist::is_main()) {
    lock = data::open_run_dir("char_lm", out, start,
                              {"config.txt", "vocab.json", "metrics.csv", "checkpoint.safetensors", "init.safetensors"});
    corpus.vocab().save(out + "/vocab.json");
    data::write_run_file("char_lm", out + "/config.txt", flags::flags_line(flag_table(), o) + "\n");
  }
  std::FILE* trace = nullptr;
  if (!o.trace.empty()) {
    trace = std::fopen(o.trace.c_str(), o.resume.empty() ? "w" : "a");
    if (trace == nullptr) fail("cannot write " + o.trace);
    if (o.resume.empty()) {
      save();  // the initial weights (step 0)
      if (dist::is_main()) std::filesystem::rename(ckpt, out + "/init.safetensors");
      good_step = -1;
      Generator gen(data::derive_seed(o.seed, 1, 2));  // fixed_batches' draws
      for (int64_t i = 0; i < o.eval_batches; ++i)
        fmt::print(trace, "val {}\n", fmt::join(window_offsets(corpus, "val", o, gen), " "));
    }
  }
  std::optional<data::MetricsCsv> csv;  // under mpirun, rank 0 alone writes the run's files
  if (dist::is_main())
    csv.emplace("char_lm", csv_path, "step,lr,train_loss,val_loss,val_bpc,seconds", !o.resume.empty(), "step",
                trainer.step());

  const std::string resume_cmd = fmt::format("{} --resume {}", data::sibling_program("char_lm"), ckpt);
  // A diverged run stops without saving: the checkpoint on disk stays the last good one.
  auto diverged = [&](const std::string& what) {
    if (dist::is_main())
      fmt::print(stderr, "{}{}\n", isatty(1) ? "\n" : "",
                 guard.stop_message("char_lm", data::sibling_program("char_lm"), what, good, good_step,
                                    fmt::format("step {}", std::min(o.eval_interval, o.steps))));
    return examples::leave_together(1);
  };
  data::Progress progress(o.steps, "train",
                          {.items_per_step = o.batch * o.context, .unit = "tok", .first_step = trainer.step()});
  double val = NAN, train_avg = NAN;
  auto t = Clock::now();
  while (trainer.step() < o.steps) {
    const data::TextBatch b = train_batch(corpus, o, trainer.step());
    const dist::Shard rows = dist::shard(o.batch);  // under mpirun: this rank's windows of the batch
    const double lr = trainer.lr();
    const gpt::StepStats st = trainer.train_step(b.x.narrow(0, rows.begin, rows.size).contiguous().to(dev),
                                                 b.y.narrow(0, rows.begin, rows.size).contiguous().to(dev));
    if (trace) {
      Generator gen(data::derive_seed(o.seed, static_cast<uint64_t>(trainer.step() - 1)));  // train_batch's draws
      fmt::print(trace, "step {} {:.9g} {:.9g} {:.9g} {}\n", trainer.step() - 1, lr, st.loss, st.grad_norm,
                 fmt::join(window_offsets(corpus, "train", o, gen), " "));
    }
    if (guard.must_stop(st.finite))
      return diverged(fmt::format("step {}: the loss is {} and the grad norm {}", trainer.step(), st.loss, st.grad_norm));
    if (st.finite) {
      loss_sum += st.loss;
      ++loss_count;
    } else {  // skipped: the weights are those of the step before
      ++skipped_window;
      fmt::print("{}step {}: the loss is {} and the grad norm {}: skipped ({} in a row, {} in all)\n",
                 isatty(1) ? "\r\x1b[K" : "", trainer.step(), st.loss, st.grad_norm, guard.in_a_row, guard.skipped);
    }
    progress.update(trainer.step(), {{"loss", loss_sum / double(std::max<int64_t>(loss_count, 1))},
                                     {"lr", trainer.lr()}});
    if (trainer.step() % o.eval_interval == 0 || trainer.step() == o.steps) {
      seconds += seconds_since(t);  // evaluation time is not training time
      val = mean_loss(val_batches);
      if (!std::isfinite(val) && o.on_nan == "stop")  // finite weights, but the model no longer computes
        return diverged(fmt::format("step {}: the val loss is {}", trainer.step(), val));
      train_avg = loss_count > 0 ? global_loss_sum() / double(loss_count) : NAN;  // NaN: every step skipped
      if (csv)
        csv->append(fmt::format("{},{:.6g},{:.6f},{:.6f},{:.6f},{:.1f}", trainer.step(), trainer.lr(), train_avg, val,
                                bits(val), seconds));
      // A line of its own (over the live progress line on a terminal, which redraws below it).
      // The train loss is the mean over the steps since the last estimate (the model improved
      // during them), the val loss that of the model now: early on, train > val is expected.
      fmt::print("{}step {}: train loss {:.4f} (mean of steps {}-{}{}), val loss {:.4f} ({:.3f} bpc)\n",
                 isatty(1) ? "\r\x1b[K" : "", trainer.step(), train_avg,
                 trainer.step() - loss_count - skipped_window + 1, trainer.step(),
                 skipped_window > 0 ? fmt::format(", {} skipped", skipped_window) : "", val, bits(val));
      loss_sum = 0, loss_count = 0, skipped_window = 0;
      save();
      t = Clock::now();
    }
    // A stop request (all ranks agree on it, and so on the step) after the step and its
    // evaluation, so the resumed run writes the metrics rows the uninterrupted run writes.
    if (const int sig = trainer.step() < o.steps ? examples::agreed_stop_signal(stop.load()) : 0) {
      seconds += seconds_since(t);
      save();
      fmt::print("{}stopped by {} at step {}: resume with {}\n", isatty(1) ? "\r\x1b[K" : "\n", data::signal_name(sig),
                 trainer.step(), resume_cmd);
      return examples::leave_together(data::stop_status(sig));
    }
  }
  if (trace) {
    fmt::print(trace, "val_loss {:.9g}\n", val);
    std::fclose(trace);
  }
  // The final estimates over the same number of windows in both splits (nanoGPT's estimate_loss).
  const double train = mean_loss(fixed_batches(corpus, "train", o, data::derive_seed(o.seed, 1, 3), dev));
  if (std::isnan(val)) val = mean_loss(val_batches);  // resumed a finished run
  progress.finish(fmt::format("| train loss {:.4f} ({:.3f} bpc) | val loss {:.4f} ({:.3f} bpc)", train, bits(train), val,
                              bits(val)));
  fmt::print("char_lm {}: val loss {:.4f} nats ({:.3f} bpc), train {:.4f}, after {} steps{}, {} of training ({:.1f} "
             "ms/step); {}\n", o.attn, val, bits(val), train, trainer.step(),
             guard.skipped > 0 ? fmt::format(" ({} skipped: non-finite loss or grad norm)", guard.skipped) : "",
             data::format_duration(seconds), 1e3 * seconds / double(std::max<int64_t>(trainer.step(), 1)), out);
  fmt::print("plot the loss curves: {}\n", plot::plot_metrics_command(out));
  if (o.sample > 0 && dist::is_main()) {
    nn::to(*model, Device::cpu());  // generation goes token by token: the CPU's job
    fmt::print("---- sample ----\n{}\n", sample_text(*model, corpus.vocab(), o));
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return flags::guarded_main("char_lm", [&] {
    const std::vector<std::string> args(argv + 1, argv + argc);
    if (flags::help_requested("char_lm", flag_table(), args)) return 0;
    examples::join_job();
    Config o = flags::parse_flags("char_lm", flag_table(), args);
    if (!o.resume.empty()) o = resume_config(o.resume, args);
    if (!o.load.empty()) o = load_config(o.load, args);
    check(o);
    check_memory(o);
    const Device dev = flags::parse_device("char_lm", o.device);
    flags::set_precision("char_lm", o.precision);
    if (o.threads > 0) omp_set_num_threads(static_cast<int>(o.threads));
    if (o.profile_shapes) o.profile = true;
    if (o.profile && o.bench == 0) o.bench = 5;
    if (o.bench > 0) return run_bench(o, dev);
    if (!o.load.empty()) return run_sample(o);
    return run_train(o, dev);
  });
}
