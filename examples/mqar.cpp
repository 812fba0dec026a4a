// mqar: multi-query associative recall (examples/data/mqar.h) as Zoology sets it up, the standard
// synthetic test of whether a sequence model can look things up in its context. Zoology's model:
// a 2-layer GPT (<linea/models/gpt.h>) without MLPs, tied embeddings, learned positions, AdamW (weight
// decay 0.1, no warm-up) with a cosine schedule to 0, over a fixed split of training examples;
// the score is the accuracy at the query positions of a fixed test split. Every kind gets a
// kernel-3 short convolution before block 0 (Based's first layer): without it linear attention
// and MHLA cannot tell which value followed which key, and sit at 1/num-kv.
//
//   mqar                                     MHLA at seq-len 64 with 4 pairs
//   mqar --attn softmax --seq-len 128 --num-kv 8
//   mqar --sweep on                          softmax, linear, MHLA at 4, 8, 16 pairs x 2 seeds (`make mqar`)
//   mqar --sweep on --quick on               4 pairs only, one seed
//
// Softmax attention keeps every key, so recall is easy for it; linear attention squeezes the
// context into one d×d state per head and forgets; MHLA keeps one state per chunk and mixes them.
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <linea/linea.h>
#include <linea/models/gpt.h>

#include "data/memory_budget.h"
#include "data/mqar.h"
#include "data/output_paths.h"
#include "data/plot.h"
#include "data/progress.h"
#include "data/sampling.h"
#include "flags.h"

using namespace linea;
namespace gpt = linea::models::gpt;

namespace {

struct Config {
  std::string attn = "mhla";  // softmax | linear | mhla
  int64_t layers = 2, heads = 1, dim = 64, chunk = 16;
  double mlp_ratio = 0;
  int64_t short_conv = 3;
  int64_t vocab = 8192, seq_len = 64, num_kv = 4;
  double power_a = 0.01;
  bool random_non_queries = false;
  int64_t train_examples = 44800, test_examples = 1000, epochs = 1, batch = 64;
  double lr = 3e-3, weight_decay = 0.1;
  bool lr_given = false;  // --lr on the command line; else each kind trains at its own lr (kind_lr)
  uint64_t seed = 1, data_seed = 0;
  bool sweep = false, quick = false;
  std::string kinds = "softmax,linear,mhla";
  int64_t seeds = 2;
  std::string csv = "runs/mqar/results.csv";
  int64_t threads = 0;
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
      flag("mlp-ratio", &Config::mlp_ratio, true, "MLP hidden size / dim (0: attention-only blocks, as Zoology)", flags::at_least(0)),
      flag("short-conv", &Config::short_conv, true, "taps of a causal depthwise convolution before block 0 (0: none)", flags::at_least(0, 64)),
      flag("vocab", &Config::vocab, true, "tokens: keys in [1, vocab/2), values in [vocab/2, vocab); > seq-len", flags::positive()),
      flag("seq-len", &Config::seq_len, true, "tokens per sequence (even)", flags::positive()),
      flag("num-kv", &Config::num_kv, true, "key-value pairs per sequence, each queried once", flags::positive()),
      flag("power-a", &Config::power_a, true, "query gaps drawn with weight (g+1)^(a-1)", flags::positive(1)),
      flag("random-non-queries", &Config::random_non_queries, true,
           "on: random tokens instead of token 0 between the queries (Zoology's default; off: its figure 2)"),
      flag("train-examples", &Config::train_examples, true, "fixed training examples", flags::positive()),
      flag("test-examples", &Config::test_examples, false, "fixed test examples the accuracy is measured on", flags::positive()),
      flag("epochs", &Config::epochs, true, "passes over the training examples", flags::positive()),
      flag("batch", &Config::batch, true, "sequences per step", flags::positive()),
      flag("lr", &Config::lr, true,
           "peak learning rate (AdamW, no warm-up, cosine to 0); unset: softmax 3e-3, linear and MHLA 2e-3",
           flags::positive(1)),
      flag("weight-decay", &Config::weight_decay, true, "AdamW decoupled weight decay", flags::at_least(0)),
      flag("seed", &Config::seed, true, "seeds the weights and the order of the examples"),
      flag("data-seed", &Config::data_seed, true, "seeds the train and test examples"),
      flag("sweep", &Config::sweep, false, "on: softmax, linear and MHLA at the sweep's sizes and seeds"),
      flag("quick", &Config::quick, false, "on (with --sweep): the smallest size at one seed"),
      flag("kinds", &Config::kinds, false, "the attention kinds the sweep runs, comma-separated"),
      flag("seeds", &Config::seeds, false, "the sweep's seeds: --seed, --seed + 1, ...", flags::positive()),
      flag("csv", &Config::csv, false, "where --sweep writes its results (and a .png plot next to it)"),
      flag("threads", &Config::threads, false, "OpenMP threads (default: all cores)", flags::at_least(0, 1024)),
      flag("device", &Config::device, false, "cpu | cuda: where the models train"),
  };
  return t;
}

std::vector<std::string> split_kinds(const std::string& list) {
  std::vector<std::string> out;
  for (size_t start = 0; start <= list.size();) {
    const size_t end = std::min(list.find(',', start), list.size());
    out.push_back(list.substr(start, end - start));
    start = end + 1;
  }
  return out;
}

void check(const Config& o) {
  auto fail = [](const std::string& msg) { flags::fail("mqar", msg); };
  if (o.attn != "softmax" && o.attn != "linear" && o.attn != "mhla")
    fail(fmt::format("--attn must be softmax, linear or mhla, got '{}'", o.attn));
  if (o.dim % o.heads != 0) fail(fmt::format("--dim {} is not a multiple of --heads {}", o.dim, o.heads));
  if (o.lr * o.weight_decay >= 1)  // AdamW scales the weights by 1 - lr·wd every step
    fail(fmt::format("--weight-decay {} x --lr {} must be < 1", o.weight_decay, o.lr));
  const gpt::ModelConfig model{.attn = o.attn, .vocab = o.vocab, .layers = o.layers, .heads = o.heads, .dim = o.dim,
                               .context = o.seq_len, .chunk = o.chunk, .tie = true};
  data::check_memory_budget("mqar", data::gpt_training_bytes(model, o.batch),
                            "--vocab, --seq-len, --layers, --dim or --batch");
  for (const std::string& k : split_kinds(o.kinds))
    if (k != "softmax" && k != "linear" && k != "mhla")
      fail(fmt::format("--kinds takes softmax, linear and mhla, got '{}'", k));
  if (o.quick && !o.sweep) fail("--quick on goes with --sweep on");
}

// The peak lr each kind trains at unless --lr is given: the best of 1e-3, 2e-3, 3e-3 and 1e-2 at
// 16 pairs over seeds 1 and 2 (docs/examples.md, "mqar"), per kind as Zoology's figure 2 takes the best lr per model.
// Softmax learns only at 3e-3 within the budget; linear and MHLA lose their recall there.
double kind_lr(const std::string& attn) { return attn == "softmax" ? 3e-3 : 2e-3; }

data::MqarConfig task_of(const Config& o) {
  return {.vocab = o.vocab, .seq_len = o.seq_len, .num_kv = o.num_kv, .power_a = o.power_a,
          .random_non_queries = o.random_non_queries};
}

// The fixed splits: both drawn from data_seed, on streams of their own.
uint64_t train_split(const Config& o) { return data::derive_seed(o.data_seed, 0, 1); }
uint64_t test_split(const Config& o) { return data::derive_seed(o.data_seed, 1, 1); }

struct Result {
  double accuracy = 0, loss = 0, seconds = 0;
  int64_t steps = 0;
  int stopped_by = 0;  // the signal (SIGINT, SIGTERM) that stopped the run after step `steps`, or 0
};

// Query accuracy on the test split, in batches of o.batch.
double evaluate(gpt::GPT& model, const Config& o, Device dev) {
  NoGradGuard no_grad;
  model.eval();
  data::Accuracy acc;
  for (int64_t first = 0; first < o.test_examples; first += o.batch) {
    std::vector<int64_t> ids;
    for (int64_t i = first; i < std::min(first + o.batch, o.test_examples); ++i) ids.push_back(i);
    const data::MqarBatch b = data::make_mqar(task_of(o), test_split(o), ids);
    auto [logits, targets] = model.scored_logits(b.inputs.to(dev), b.targets.to(dev));
    const Tensor pred = argmax(logits, -1).to(Device::cpu());
    const data::Accuracy a = data::masked_accuracy(pred, targets.to(Device::cpu()));
    acc.correct += a.correct, acc.total += a.total;
  }
  model.train();
  return acc.value();
}

// Trains one model for o.epochs over the training split (shuffled each epoch) and measures it.
Result run(const Config& o, Device dev) {
  data::check_mqar(task_of(o));
  manual_seed(o.seed);
  auto model = std::make_shared<gpt::GPT>(gpt::ModelConfig{.attn = o.attn, .vocab = o.vocab, .layers = o.layers,
                                                           .heads = o.heads, .dim = o.dim, .context = o.seq_len,
                                                           .chunk = o.chunk, .mlp_ratio = o.mlp_ratio,
                                                           .short_conv = o.short_conv, .tie = true});
  nn::to(*model, dev);  // before the optimizer, which then keeps its state on dev too
  const int64_t per_epoch = (o.train_examples + o.batch - 1) / o.batch;
  Result r{.steps = per_epoch * o.epochs};
  gpt::Trainer trainer(model, {.steps = r.steps, .lr = o.lr, .min_lr = 0, .warmup = 0,
                               .weight_decay = o.weight_decay, .beta2 = 0.999, .grad_clip = 0});
  data::Progress progress(r.steps, fmt::format("mqar {} len {} kv {}", o.attn, o.seq_len, o.num_kv),
                          {.items_per_step = o.batch * o.seq_len, .unit = "tok"});
  std::atomic<int>& stop = data::install_stop_signals();
  std::vector<int64_t> order(o.train_examples);
  for (int64_t i = 0; i < o.train_examples; ++i) order[i] = i;
  const auto t = std::chrono::steady_clock::now();
  for (int64_t epoch = 0; epoch < o.epochs; ++epoch) {
    Generator gen(data::derive_seed(o.seed, static_cast<uint64_t>(epoch)));
    data::shuffle(order, gen);
    for (int64_t first = 0; first < o.train_examples; first += o.batch) {
      const std::vector<int64_t> ids(order.begin() + first,
                                     order.begin() + std::min(first + o.batch, o.train_examples));
      const data::MqarBatch b = data::make_mqar(task_of(o), train_split(o), ids);
      const Tensor x = b.inputs.to(dev), y = b.targets.to(dev);
      r.loss = trainer.train_step([&] {
                        auto [logits, targets] = model->scored_logits(x, y);
                        return nn::cross_entropy(logits, targets);
                      }).loss;
      progress.update(trainer.step(), {{"loss", r.loss}});
      if ((r.stopped_by = stop.load()) != 0) {  // a run is minutes: no checkpoint, the step ends it
        r.steps = trainer.step();
        return r;
      }
    }
  }
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
  r.accuracy = evaluate(*model, o, dev);
  progress.finish(fmt::format("| loss {:.4f} | test accuracy {:.1f}%", r.loss, 100 * r.accuracy));
  return r;
}

// What a run or sweep a signal stopped prints; returns its exit status (128 + the signal).
int stopped(const Result& r, const std::string& where) {
  fmt::print("\nmqar: stopped by {} after step {}{}; mqar keeps no checkpoint, so no result was written\n",
             data::signal_name(r.stopped_by), r.steps, where);
  return data::stop_status(r.stopped_by);
}

// ---------------------------------------------------------------- the sweep (`make mqar`)

struct Size {
  int64_t seq_len, num_kv;
};

struct Row {
  std::string attn;
  Size size;
  uint64_t seed;
  Config config;
  Result result;
};

// The sweep's runs: every kind at every size and seed. Each size gets the same number of steps
// with the same number of queries per step (batch · num_kv = o.batch · 4) over the same number
// of epochs, so the pairs grow while the training signal stays.
std::vector<Row> sweep_rows(const Config& o) {
  const std::vector<Size> sizes = o.quick ? std::vector<Size>{{64, 4}} : std::vector<Size>{{64, 4}, {64, 8}, {64, 16}};
  std::vector<Row> rows;
  for (const Size& z : sizes)
    for (const std::string& attn : split_kinds(o.kinds))
      for (int64_t s = 0; s < (o.quick ? 1 : o.seeds); ++s) {
        Config c = o;
        c.attn = attn, c.seq_len = z.seq_len, c.num_kv = z.num_kv, c.seed = o.seed + static_cast<uint64_t>(s);
        c.lr = o.lr_given ? o.lr : kind_lr(attn);
        c.batch = std::max<int64_t>(1, o.batch * 4 / z.num_kv);
        c.train_examples = o.train_examples * c.batch / o.batch;  // the same steps per epoch
        rows.push_back({attn, z, c.seed, c, {}});
      }
  return rows;
}

// The sweep's outputs: the CSV and the PNG beside it (results.csv -> results.png).
std::string png_path(const std::string& csv) {
  const std::filesystem::path p(csv);
  return (p.parent_path() / (p.stem().string() + ".png")).string();
}

// Both outputs of the sweep can be written: checked before it trains, not after its minutes.
void check_sweep_outputs(const Config& o) {
  if (png_path(o.csv) == o.csv)
    flags::fail("mqar", fmt::format("--csv '{}': its plot would overwrite it (a .png)", o.csv));
  data::check_output_file("mqar", "--csv", o.csv);
  data::check_output_file("mqar", "--csv's plot", png_path(o.csv));
}

void write_csv(const std::string& path, const std::vector<Row>& rows) {
  std::string text =
      "attn,seq_len,num_kv,dim,lr,seed,batch,train_examples,epochs,steps,test_accuracy,train_loss,seconds\n";
  for (const Row& r : rows)
    text += fmt::format("{},{},{},{},{},{},{},{},{},{},{:.4f},{:.4f},{:.1f}\n", r.attn, r.size.seq_len, r.size.num_kv,
                        r.config.dim, r.config.lr, r.seed, r.config.batch, r.config.train_examples, r.config.epochs,
                        r.result.steps, r.result.accuracy, r.result.loss, r.result.seconds);
  write_file_atomically(path, {text}, "mqar");  // never a half-written file
}

std::string seed_list(const Config& o) {
  std::vector<uint64_t> s;
  for (int64_t i = 0; i < (o.quick ? 1 : o.seeds); ++i) s.push_back(o.seed + static_cast<uint64_t>(i));
  return fmt::format("{}", fmt::join(s, " / "));
}

int run_sweep(const Config& o, Device dev) {
  std::vector<Row> rows = sweep_rows(o);
  fmt::print("mqar sweep: {} runs; {} layers, dim {}, {} head(s), short conv {}, vocab {}, lr {}, {} epoch(s), "
             "{} steps of {} queries per run; {} threads, {} CPU kernels\n",
             rows.size(), o.layers, o.dim, o.heads, o.short_conv, o.vocab,
             o.lr_given ? fmt::format("{}", o.lr) : "per kind (softmax 3e-3, linear and MHLA 2e-3)", o.epochs,
             (o.train_examples + o.batch - 1) / o.batch * o.epochs, o.batch * 4, omp_get_max_threads(),
             cpu_isa_name(cpu_isa()));
  const auto t = std::chrono::steady_clock::now();
  for (size_t i = 0; i < rows.size(); ++i)
    if ((rows[i].result = run(rows[i].config, dev)).stopped_by != 0)
      return stopped(rows[i].result, fmt::format(" of run {} of {}", i + 1, rows.size()));
  const double minutes = std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count() / 60;

  std::vector<Size> sizes;
  for (const Row& r : rows)
    if (sizes.empty() || sizes.back().num_kv != r.size.num_kv) sizes.push_back(r.size);
  const std::vector<std::string> kinds = split_kinds(o.kinds);
  // Answering with one of the sequence's num_kv values at random scores 1/num_kv; only accuracy
  // well above it shows recall.
  fmt::print("\ntest accuracy at the queries ({} test examples; seeds {}), {:.1f} minutes\n", o.test_examples,
             seed_list(o), minutes);
  fmt::print("{:>7} {:>6} {:>8} |", "seq-len", "num-kv", "1/num-kv");
  for (const std::string& k : kinds) fmt::print(" {:>15}", k);
  fmt::print("\n");
  std::vector<plot::Series> series;
  for (const std::string& k : kinds) series.push_back({k, {}, {}});
  plot::Series chance{"1/num-kv (chance)", {}, {}};
  for (const Size& z : sizes) {
    fmt::print("{:>7} {:>6} {:>7.1f}% |", z.seq_len, z.num_kv, 100.0 / double(z.num_kv));
    chance.x.push_back(static_cast<double>(z.num_kv));
    chance.y.push_back(100.0 / double(z.num_kv));
    for (size_t i = 0; i < kinds.size(); ++i) {
      std::vector<std::string> accs;
      double sum = 0;
      for (const Row& r : rows)
        if (r.attn == kinds[i] && r.size.num_kv == z.num_kv) {
          accs.push_back(fmt::format("{:.1f}", 100 * r.result.accuracy));
          sum += 100 * r.result.accuracy;
        }
      fmt::print(" {:>14}%", fmt::format("{}", fmt::join(accs, " / ")));
      series[i].x.push_back(static_cast<double>(z.num_kv));
      series[i].y.push_back(sum / static_cast<double>(accs.size()));
    }
    fmt::print("\n");
  }
  series.push_back(chance);
  write_csv(o.csv, rows);
  fmt::print("results: {}\n", o.csv);
  // The table and the CSV are the results; the picture is a convenience, so no gnuplot is no error.
  const std::string png = png_path(o.csv);
  if (!plot::gnuplot_available()) {
    fmt::print("no gnuplot here (apt-get install gnuplot-nox): {} not drawn\n", png);
  } else {
    plot::line_plot(png, {.title = "MQAR: test accuracy at the queries (mean of seeds)",
                          .xlabel = "key-value pairs (seq-len 64)", .ylabel = "accuracy (%)", .logx = true,
                          .series = series});
    fmt::print("plot: {}\n", png);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return flags::guarded_main("mqar", [&] {
    const std::vector<std::string> args(argv + 1, argv + argc);
    if (flags::help_requested("mqar", flag_table(), args)) return 0;
    Config o = flags::parse_flags("mqar", flag_table(), args);
    o.lr_given = std::find(args.begin(), args.end(), "--lr") != args.end();
    if (!o.lr_given) o.lr = kind_lr(o.attn);
    check(o);
    const Device dev = flags::parse_device("mqar", o.device);
    if (o.sweep) check_sweep_outputs(o);
    if (o.threads > 0) omp_set_num_threads(static_cast<int>(o.threads));
    if (o.sweep) return run_sweep(o, dev);
    const Result r = run(o, dev);
    if (r.stopped_by != 0) return stopped(r, "");
    fmt::print("mqar {}: test accuracy {:.1f}% at seq-len {}, {} key-value pairs (lr {}, {} steps, {:.1f}s, {:.1f} steps/s)\n",
               o.attn, 100 * r.accuracy, o.seq_len, o.num_kv, o.lr, r.steps, r.seconds, r.steps / r.seconds);
    return 0;
  });
}
