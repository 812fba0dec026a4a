// mqar: multi-query associative recall (examples/data/mqar.h), the standard synthetic test of
// whether a sequence model can look things up in its context. A 2-layer GPT (gpt_model.h) with
// softmax, linear or causal MHLA attention learns to answer each queried key with the value it
// was paired with earlier; the score is the accuracy on the queried positions.
//
//   mqar                          MHLA at the default length
//   mqar --attn softmax --seq-len 128 --num-kv 16
//   mqar --sweep on               the three kinds side by side at lengths 64, 128, 256 (`make mqar`)
//
// Softmax attention keeps every key, so recall is easy for it; linear attention squeezes the
// context into one d×d state per head and forgets; MHLA keeps one state per chunk and mixes them.
#include <omp.h>

#include <algorithm>
#include <chrono>

#include <fmt/core.h>
#include <linea/linea.h>

#include "data/memory_budget.h"
#include "data/mqar.h"
#include "data/progress.h"
#include "data/sampling.h"
#include "flags.h"
#include "gpt_model.h"

using namespace linea;

namespace {

struct Config {
  std::string attn = "mhla";  // softmax | linear | mhla
  int64_t layers = 2, heads = 2, dim = 64, chunk = 16;
  int64_t vocab = 64, seq_len = 64, num_kv = 4;  // queries: every key
  bool noise = true;  // fill the gaps with random tokens (off: token 0)
  int64_t steps = 500, batch = 32, warmup = 50;
  double lr = 3e-3, weight_decay = 0.1;
  uint64_t seed = 1;
  bool sweep = false;
  int64_t eval_batches = 16, threads = 0;
  std::string device = "cpu";
};

const std::vector<flags::Flag<Config>>& flag_table() {
  using flags::flag;
  static const std::vector<flags::Flag<Config>> t = {
      flag("attn", &Config::attn, true, "softmax | linear | mhla"),
      flag("layers", &Config::layers, true, "transformer blocks", flags::positive()),
      flag("heads", &Config::heads, true, "attention heads", flags::positive()),
      flag("dim", &Config::dim, true, "model width", flags::positive()),
      flag("chunk", &Config::chunk, true, "MHLA: tokens per chunk", flags::positive()),
      flag("vocab", &Config::vocab, true, "tokens: keys in [1, vocab/2), values in [vocab/2, vocab)",
           flags::positive()),
      flag("seq-len", &Config::seq_len, true, "tokens per sequence", flags::positive()),
      flag("num-kv", &Config::num_kv, true, "key-value pairs per sequence (each one queried)", flags::positive()),
      flag("noise", &Config::noise, true, "on | off: random tokens between the queries (off: token 0)"),
      flag("steps", &Config::steps, true, "optimizer steps (fresh sequences each step)", flags::positive()),
      flag("batch", &Config::batch, true, "sequences per step", flags::positive()),
      flag("warmup", &Config::warmup, true, "linear warm-up steps, then cosine decay", flags::at_least(0)),
      flag("lr", &Config::lr, true, "peak learning rate (AdamW)", flags::positive(1)),
      flag("weight-decay", &Config::weight_decay, true, "AdamW decoupled weight decay", flags::at_least(0)),
      flag("seed", &Config::seed, true, "seeds the weights and the data"),
      flag("sweep", &Config::sweep, false, "on: softmax, linear and MHLA at seq-len 64, 128, 256 (num-kv = len/16, batch x 64/len)"),
      flag("eval-batches", &Config::eval_batches, false, "held-out batches the accuracy is measured on",
           flags::positive()),
      flag("threads", &Config::threads, false, "OpenMP threads (default: all cores)", flags::at_least(0, 1024)),
      flag("device", &Config::device, false, "cpu | cuda: where the models train"),
  };
  return t;
}

// What the flags' ranges cannot see: values that depend on each other, and the memory a run needs.
void check(const Config& o) {
  auto fail = [](const std::string& msg) { flags::fail("mqar", msg); };
  if (o.attn != "softmax" && o.attn != "linear" && o.attn != "mhla")
    fail(fmt::format("--attn must be softmax, linear or mhla, got '{}'", o.attn));
  if (o.dim % o.heads != 0) fail(fmt::format("--dim {} is not a multiple of --heads {}", o.dim, o.heads));
  if (o.warmup > o.steps) fail(fmt::format("--warmup {} is more than --steps {}", o.warmup, o.steps));
  if (o.lr * o.weight_decay >= 1)  // AdamW scales the weights by 1 - lr·wd every step
    fail(fmt::format("--weight-decay {} x --lr {} must be < 1", o.weight_decay, o.lr));
  // The sweep's longest run (256 tokens) holds as many tokens per step as the others.
  const int64_t len = o.sweep ? 256 : o.seq_len, batch = o.sweep ? std::max<int64_t>(1, o.batch / 4) : o.batch;
  const gpt::ModelConfig model{.attn = o.attn, .vocab = o.vocab, .layers = o.layers, .heads = o.heads, .dim = o.dim,
                               .context = len, .chunk = o.chunk, .tie = false};
  data::check_memory_budget("mqar", gpt::training_bytes(model, batch),
                            "--vocab, --seq-len, --layers, --dim or --batch");
}

struct Result {
  double accuracy = 0, loss = 0, seconds = 0;
};

// Trains one model on fresh MQAR batches and measures its query accuracy on held-out ones.
Result run(const Config& o, Device dev) {
  const data::MqarConfig task{
      .vocab = o.vocab, .seq_len = o.seq_len, .num_kv = o.num_kv, .num_queries = o.num_kv, .noise = o.noise};
  manual_seed(o.seed);
  auto model = std::make_shared<gpt::GPT>(gpt::ModelConfig{.attn = o.attn, .vocab = o.vocab, .layers = o.layers,
                                                           .heads = o.heads, .dim = o.dim, .context = o.seq_len,
                                                           .chunk = o.chunk, .tie = false});
  nn::to(*model, dev);  // before the optimizer, which then keeps its state on dev too
  gpt::Trainer trainer(model, {.steps = o.steps, .lr = o.lr, .min_lr = o.lr / 10, .warmup = o.warmup,
                               .weight_decay = o.weight_decay, .beta2 = 0.99, .grad_clip = 1.0});
  data::Progress progress(o.steps, fmt::format("mqar {} len {}", o.attn, o.seq_len),
                          {.items_per_step = o.batch * o.seq_len, .unit = "tok"});
  std::atomic<bool>& interrupted = data::install_sigint_flag();
  Result r;
  const auto t = std::chrono::steady_clock::now();
  for (int64_t step = 0; step < o.steps && !interrupted; ++step) {
    Generator gen(data::derive_seed(o.seed, static_cast<uint64_t>(step)));
    const data::MqarBatch b = data::make_mqar(task, o.batch, gen);
    r.loss = trainer.train_step(b.inputs.to(dev), b.targets.to(dev)).loss;
    progress.update(step + 1, {{"loss", r.loss}});
  }
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();

  NoGradGuard no_grad;
  model->eval();
  data::Accuracy acc;
  Generator test_gen(data::derive_seed(o.seed, 0, 1));  // a stream training never draws from
  for (int64_t i = 0; i < o.eval_batches; ++i) {
    const data::MqarBatch b = data::make_mqar(task, o.batch, test_gen);
    const Tensor pred = argmax(model->forward(b.inputs.to(dev)), -1).to(Device::cpu());
    const data::Accuracy a = data::masked_accuracy(pred, b.targets);
    acc.correct += a.correct, acc.total += a.total;
  }
  r.accuracy = acc.value();
  progress.finish(fmt::format("| loss {:.4f} | query accuracy {:.1f}%", r.loss, 100 * r.accuracy));
  return r;
}

int run_sweep(Config o, Device dev) {
  const std::vector<int64_t> lengths = {64, 128, 256};
  const std::vector<std::string> kinds = {"softmax", "linear", "mhla"};
  fmt::print("mqar sweep: {} layers, dim {}, heads {}, vocab {}, {} steps x {} tokens, chunk {} (MHLA)\n", o.layers,
             o.dim, o.heads, o.vocab, o.steps, o.batch * 64, o.chunk);
  std::vector<std::vector<Result>> table;
  for (int64_t len : lengths) {
    table.emplace_back();
    for (const std::string& kind : kinds) {
      // The same number of tokens per step at every length; num_kv grows with the length.
      Config c = o;
      c.attn = kind, c.seq_len = len, c.num_kv = len / 16, c.batch = std::max<int64_t>(1, o.batch * 64 / len);
      table.back().push_back(run(c, dev));
    }
  }
  // Guessing one of the sequence's num_kv values without matching keys scores 1/num_kv.
  // Guessing any value token scores 2/vocab. Only accuracy well above 1/num_kv shows recall.
  fmt::print("\nquery accuracy on held-out sequences (a random value: {:.1f}%; a random value of the sequence: "
             "1/num-kv)\n", 200.0 / double(o.vocab));
  fmt::print("{:>7} {:>6} {:>8} | {:>14} {:>14} {:>14}\n", "seq-len", "num-kv", "1/num-kv", "softmax", "linear", "mhla");
  for (size_t i = 0; i < lengths.size(); ++i) {
    fmt::print("{:>7} {:>6} {:>7.1f}% |", lengths[i], lengths[i] / 16, 1600.0 / double(lengths[i]));
    for (const Result& r : table[i]) fmt::print(" {:>6.1f}% ({:>4.0f}s)", 100 * r.accuracy, r.seconds);
    fmt::print("\n");
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return flags::guarded_main("mqar", [&] {
    const std::vector<std::string> args(argv + 1, argv + argc);
    if (flags::help_requested("mqar", flag_table(), args)) return 0;
    const Config o = flags::parse_flags("mqar", flag_table(), args);
    check(o);
    const Device dev = flags::parse_device("mqar", o.device);
    if (o.threads > 0) omp_set_num_threads(static_cast<int>(o.threads));
    if (o.sweep) return run_sweep(o, dev);
    const Result r = run(o, dev);
    fmt::print("mqar {}: query accuracy {:.1f}% at seq-len {}, {} key-value pairs ({} steps, {:.1f}s)\n", o.attn,
               100 * r.accuracy, o.seq_len, o.num_kv, o.steps, r.seconds);
    return 0;
  });
}
