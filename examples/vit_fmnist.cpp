// vit_fmnist: train a small vision transformer on Fashion-MNIST with softmax, linear or MHLA
// attention, on the CPU in a few minutes (or on a GPU with --device cuda).
//
//   vit_fmnist                          the default run: MHLA, 7 epochs (what `make train` runs,
//                                       with --time-budget 300)
//   vit_fmnist --attn softmax --epochs 30 --out runs/softmax30
//   vit_fmnist --resume runs/vit_fmnist_mhla/checkpoint.safetensors   continue, bit for bit
//   vit_fmnist --eval runs/vit_fmnist_mhla/checkpoint.safetensors     test accuracy only
//   vit_fmnist --bench 20 --attn all    median time per training step of each attention kind
//   vit_fmnist --help                   every flag with its default
//   mpirun -np 2 vit_fmnist --threads 1 data-parallel: each process trains on half of every batch
//
// The model and its training step are the library's (<linea/models/vit.h>), the options are
// vit_config.h's; this file is the program around them: data, the epoch loop, evaluation,
// checkpoints, metrics and the benchmark.
// A run writes into --out (default runs/vit_fmnist_<attn>):
//   config.txt               the flags of the run (model and recipe), one line
//   metrics.csv              one row per epoch: epoch, step, train/test loss and accuracy, seconds
//   checkpoint.safetensors   model + AdamW state + data position and checksum, after every epoch and
//                            on SIGINT (Ctrl-C) or SIGTERM; never with a NaN or an infinity
//   run.lock                 held while the run runs: a second run into the same --out is refused
// (--resume continues in the checkpoint's folder).
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <optional>

#include <fmt/core.h>
#include <fmt/ranges.h>
#include <linea/linea.h>

#include "data/dataloader.h"
#include "data/idx.h"
#include "data/memory_budget.h"
#include "data/plot.h"
#include "data/progress.h"
#include "data/run_files.h"
#include "flags.h"
#include "bench_steps.h"
#include "dist_run.h"
#include "run_checkpoint.h"
#include "vit_config.h"

using namespace linea;
using vit::Config;

namespace {

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// ---------------------------------------------------------------- data

// Fashion-MNIST as float32 [N, 1, 32, 32]: pixels normalised with the training set's mean and
// std, then padded 28 -> 32 with the normalised value of black (so padding looks like border).
struct Data {
  Tensor train_x, train_y, test_x, test_y;
  double black = 0;  // what a black pixel becomes after normalisation
  std::string checksum;  // of the images and labels as read (data::Checksum): a resumed run checks it
};

Data load_data(const std::string& dir, int64_t holdout) {
  data::ImageDataset train = data::load_fashion_mnist("train", dir), test = data::load_fashion_mnist("test", dir);
  data::Checksum sum;
  for (const Tensor& t : {train.images, train.labels, test.images, test.labels}) {
    const Tensor c = t.contiguous();
    sum.add(c.data_ptr(), static_cast<size_t>(c.numel()) * itemsize(c.dtype()));
  }
  if (holdout > 0) {  // tuning: the last `holdout` training images stand in for the test set
    const int64_t n = train.images.size(0) - holdout;
    test = {train.images.narrow(0, n, holdout), train.labels.narrow(0, n, holdout)};
    train = {train.images.narrow(0, 0, n), train.labels.narrow(0, 0, n)};
  }
  const data::PixelStats stats = data::pixel_stats(train.images);
  Data d;
  d.checksum = sum.str();
  d.black = -stats.mean / stats.std;
  d.train_x = data::pad_images(data::normalize_images(train.images, stats), 2, d.black);
  d.test_x = data::pad_images(data::normalize_images(test.images, stats), 2, d.black);
  d.train_y = train.labels.contiguous();
  d.test_y = test.labels.contiguous();
  return d;
}

// ---------------------------------------------------------------- metadata helpers

// Checkpoint metadata is text; numbers are written with fmt's shortest exact form so that the
// running sums a resumed run continues from are bit-identical.
std::string num(double v) { return fmt::format("{}", v); }

// The saved flags of a vit_fmnist checkpoint.
Config saved_config(const nn::Metadata& meta, const std::string& path) {
  examples::check_program(meta, path, "vit_fmnist");
  auto it = meta.find("config");
  LINEA_CHECK(it != meta.end(), "[vit_fmnist] '{}' has no config: not a vit_fmnist checkpoint", path);
  try {
    return vit::parse_config(flags::split_words(it->second));
  } catch (const Error&) {  // another program's flags
    throw Error(fmt::format("[vit_fmnist] '{}' is not a vit_fmnist checkpoint (its config has flags vit_fmnist does "
                            "not know)", path));
  }
}

// --eval: the checkpoint's flags with the command line on top.
Config eval_config(const std::string& path, const std::vector<std::string>& args) {
  return vit::parse_config(args, saved_config(nn::load_safetensors(path).metadata, path));
}

// --resume: the checkpoint's flags, of which only --epochs may be given another value, and by
// default its data directory (run_train checks the data's checksum once loaded).
Config resume_config(const std::string& path, const std::vector<std::string>& args) {
  const nn::Metadata meta = nn::load_safetensors(path).metadata;
  const Config saved = saved_config(meta, path);
  Config o = vit::parse_config(args, saved);
  const std::vector<std::string> changed = vit::resume_changes(saved, o);
  if (o.data_dir.empty()) o.data_dir = examples::meta_text(meta, "data_dir", path, "vit_fmnist");
  if (!changed.empty())
    fmt::print("vit_fmnist: resuming with {} (the other flags that change the numbers are the checkpoint's)\n",
               fmt::join(changed, ", "));
  return o;
}

// ---------------------------------------------------------------- --bench

// Times o.bench training steps on a random batch.
BenchRow bench_one(Config o, const std::string& attn, Device dev) {
  o.attn = attn;
  vit::Trainer trainer = vit::make_trainer(o, 1000000);
  nn::to(*trainer.model, dev);  // in place: the optimizer's handles follow, its state is made at step 1
  if (dist::world().size > 1) trainer.distribute();
  Generator gen(o.seed);
  const int64_t rows = dist::shard(o.batch).size;  // under mpirun: this rank's share of the batch
  const Tensor x = randn({rows, 1, o.img(), o.img()}, gen).to(dev), y = randint(0, 10, {rows}, gen).to(dev);
  BenchRow row = time_steps(o.bench, double(o.batch), dev, [&] { return trainer.train_step(x, y); },
                            o.profile ? attn : "", o.profile_shapes);
  row.params = trainer.model->num_parameters();
  if (trainer.data_parallel) print_comm_share(*trainer.data_parallel, row);
  return row;
}

int run_bench(const Config& o, Device dev) {
  fmt::print("vit_fmnist --bench {}: batch {}, dim {}, depth {}, heads {}, on {}, {} threads, {} CPU kernels, {} matmuls; "
             "median ms per step\n", o.bench, o.batch, o.dim, o.depth, o.heads, dev, omp_get_max_threads(),
             cpu_isa_name(cpu_isa()), o.precision);
  print_bench_header("img/s", dev);
  return run_bench_rows(o.attn, dev, [&](const std::string& attn) { return bench_one(o, attn, dev); });
}

// ---------------------------------------------------------------- --time-budget

// The most whole epochs, at most o.epochs, that fit in o.time_budget seconds on this machine: a
// probe times the training step (bench_one, on a random batch) before the run starts, and an
// evaluation is estimated as forward passes over the test set. Whole epochs, so that the run is
// exactly the `--epochs N` run and can be repeated bit for bit on any machine.
int64_t epochs_within_budget(const Config& o, Device dev, int64_t steps_per_epoch, int64_t test_images,
                             Clock::time_point program_start) {
  Config timed = o;
  timed.bench = 10;
  const BenchRow probe = bench_one(timed, o.attn, dev);
  const double spent = seconds_since(program_start);  // loading the data and the probe
  const double step_s = probe.step_ms / 1e3, eval_s = double(test_images) / double(o.batch) * probe.forward_ms / 1e3;
  // 15% on top for what the probe's median does not see: batching, slower steps, checkpoint
  // writes. Measured: three `make train` runs took 4-11% longer than the estimate with 5%.
  const double epoch_s = 1.15 * (double(steps_per_epoch) * step_s + eval_s);
  const double left = o.time_budget - spent;
  const int64_t fit = std::clamp<int64_t>(int64_t(left / epoch_s), 1, o.epochs);
  // Under mpirun every rank must run the same epochs: rank 0's choice.
  const int64_t epochs = int64_t(examples::sum_over_ranks({dist::is_main() ? double(fit) : 0.0})[0]);
  fmt::print("--time-budget {}: a step takes {:.0f} ms here and an evaluation about {:.1f} s, so {} of {} epochs "
             "fit (about {}); `--epochs {}` repeats this run exactly\n",
             data::format_duration(o.time_budget), probe.step_ms, eval_s, epochs, o.epochs,
             data::format_duration(spent + double(epochs) * epoch_s), epochs);
  if (left < epoch_s) fmt::print("--time-budget: even one epoch does not fit; training one\n");
  return epochs;
}

// ---------------------------------------------------------------- --eval

int run_eval(const Config& o, Device dev) {
  vit::Trainer trainer = vit::make_trainer(o, 1);
  nn::to(*trainer.model, dev);
  trainer.load(o.eval);
  const Data data = load_data(o.data_dir, o.holdout);
  const auto t = Clock::now();
  const vit::EvalStats ev = trainer.evaluate(data.test_x.to(dev), data.test_y.to(dev));
  fmt::print("vit_fmnist --eval {}: {} after {} steps: {} loss {:.4f}, accuracy {:.2f}% ({:.1f}s)\n", o.eval,
             o.attn, trainer.step(), o.holdout > 0 ? "held-out" : "test", ev.loss, 100 * ev.accuracy, seconds_since(t));
  return 0;
}

// ---------------------------------------------------------------- training

int run_train(Config o, Device dev) {
  const auto program_start = Clock::now();
  // From here on SIGINT and SIGTERM stop the run after the step they arrive in, with a checkpoint.
  std::atomic<int>& stop = data::install_stop_signals();
  // A resumed run keeps writing beside its checkpoint unless told otherwise.
  std::string out = o.out;
  if (out.empty() && !o.resume.empty()) out = std::filesystem::path(o.resume).parent_path().string();
  if (out.empty()) out = o.resume.empty() ? "runs/vit_fmnist_" + o.attn : ".";
  const data::RunStart start = data::run_start(out, o.resume, o.overwrite);
  data::check_run_dir("vit_fmnist", out, start);  // before anything is loaded
  const std::string ckpt = out + "/checkpoint.safetensors", csv_path = out + "/metrics.csv";

  const Data data = load_data(o.data_dir, o.holdout);
  const char* split = o.holdout > 0 ? "held-out" : "test";  // what the evaluation runs on
  data::DataLoaderOptions lo;
  lo.batch_size = o.batch;
  lo.seed = o.seed;
  lo.shard = dist::world().rank, lo.shards = dist::world().size;  // each rank its rows of every batch
  if (o.augment)
    lo.transform = [black = data.black](const Tensor& x, Generator& gen) {
      return data::random_crop_flip(x, {.pad = 2, .flip = true, .fill = black}, gen);
    };
  data::DataLoader loader(data.train_x, data.train_y, lo);
  const int64_t steps_per_epoch = loader.batches_per_epoch();
  if (o.time_budget > 0) o.epochs = epochs_within_budget(o, dev, steps_per_epoch, data.test_x.size(0), program_start);
  const int64_t total_steps = o.epochs * steps_per_epoch;
  vit::Trainer trainer = vit::make_trainer(o, total_steps);
  nn::to(*trainer.model, dev);  // in place: the optimizer's handles follow, its state is made at step 1
  if (dist::world().size > 1) trainer.distribute();
  // The loader's batches move one by one; each rank evaluates its part of the test set.
  const dist::Shard test_part = dist::shard(data.test_x.size(0));
  const Tensor test_x = data.test_x.narrow(0, test_part.begin, test_part.size).to(dev);
  const Tensor test_y = data.test_y.narrow(0, test_part.begin, test_part.size).to(dev);
  auto evaluate = [&] {  // over the whole test set: the ranks' parts weighted by their sizes
    const vit::EvalStats ev = trainer.evaluate(test_x, test_y);
    const double n = double(test_part.size), total = double(data.test_x.size(0));
    const std::vector<double> s = examples::sum_over_ranks({ev.loss * n, ev.accuracy * n});
    return vit::EvalStats{s[0] / total, s[1] / total};
  };
  fmt::print("vit_fmnist: {} attention, {} parameters, {} epochs x {} steps of {} images, {} process(es) x {} threads, {} "
             "CPU kernels, {} matmuls\n", o.attn, trainer.model->num_parameters(), o.epochs, steps_per_epoch, o.batch,
             dist::world().size, omp_get_max_threads(), cpu_isa_name(cpu_isa()), o.precision);

  // Where the run stands: the epoch and batch to do next, this epoch's running sums (over the steps
  // that trained, not those skipped for a non-finite loss or grad norm), the clock.
  int64_t epoch = 0, batch = 0, correct = 0, seen = 0;
  double loss_sum = 0, seconds = 0;
  examples::NanGuard guard{.policy = o.on_nan};
  // The last good checkpoint: the file and its step (-1: none yet).
  std::string good = o.resume;
  int64_t good_step = -1;
  const std::string data_dir = o.data_dir.empty() ? data::kFashionMnistDir : std::filesystem::absolute(o.data_dir).string();
  if (!o.resume.empty()) {
    const nn::Metadata m = trainer.load(o.resume);
    const std::string want = examples::meta_text(m, "data_checksum", o.resume, "vit_fmnist");
    LINEA_CHECK(data.checksum == want, "[vit_fmnist] the data in '{}' ({}) is not what '{}' was trained on: '{}' ({})",
                data_dir, data.checksum, o.resume, examples::meta_text(m, "data_dir", o.resume, "vit_fmnist"), want);
    auto count = [&](const char* key) { return examples::meta_integer(m, key, o.resume, "vit_fmnist"); };
    epoch = count("epoch"), batch = count("batch"), correct = count("correct"), seen = count("seen");
    guard.skipped = count("skipped"), guard.in_a_row = count("skipped_in_a_row");
    loss_sum = examples::meta_number(m, "loss_sum", o.resume, "vit_fmnist");
    seconds = examples::meta_number(m, "seconds", o.resume, "vit_fmnist");
    if (!dist::is_main()) loss_sum = 0, correct = 0, seen = 0;  // the saved sums count once, on rank 0
    good_step = trainer.step();
    fmt::print("resumed from {} at epoch {}, batch {} (step {})\n", o.resume, epoch + 1, batch, trainer.step());
    if (const std::string note = examples::resume_machine_note(m, o.resume, "vit_fmnist", omp_get_max_threads(),
                                                               o.device); !note.empty())
      fmt::print("{}\n", note);
  }
  auto save = [&] {  // the running sums of all ranks, saved by rank 0
    const std::vector<double> s = examples::sum_over_ranks({loss_sum, double(correct), double(seen)});
    if (!dist::is_main()) return;
    vit::save(trainer, o, ckpt, {{"epoch", num(epoch)}, {"batch", num(batch)}, {"loss_sum", num(s[0])},
                                 {"correct", num(s[1])}, {"seen", num(s[2])}, {"seconds", num(seconds)},
                                 {"data_dir", data_dir}, {"data_checksum", data.checksum},
                                 {"skipped", num(guard.skipped)}, {"skipped_in_a_row", num(guard.in_a_row)},
                                 {"threads", num(omp_get_max_threads())}, {"device", o.device}});
    good = ckpt, good_step = trainer.step();
  };
  const std::string self = data::sibling_program("vit_fmnist");
  // A diverged run stops without saving: the checkpoint on disk stays the last good one.
  auto diverged = [&](const std::string& what) {
    if (dist::is_main())
      fmt::print(stderr, "\n{}\n", guard.stop_message("vit_fmnist", self, what, good, good_step, "the end of epoch 1"));
    return examples::leave_together(1);
  };

  // Everything loaded: the run starts, and only now writes its files (under mpirun, rank 0 alone).
  std::optional<data::MetricsCsv> csv;
  data::RunLock lock;
  if (dist::is_main()) {
    lock = data::open_run_dir("vit_fmnist", out, start, {"config.txt", "metrics.csv", "checkpoint.safetensors"});
    data::write_run_file("vit_fmnist", out + "/config.txt", vit::config_line(o) + "\n");
    csv.emplace("vit_fmnist", csv_path, "epoch,step,train_loss,train_acc,test_loss,test_acc,seconds",
                !o.resume.empty(), "step", trainer.step());
  }

  double test_acc = 0;
  while (epoch < o.epochs) {
    data::Progress progress(steps_per_epoch, fmt::format("epoch {}/{}", epoch + 1, o.epochs),
                            {.items_per_step = o.batch, .unit = "img", .first_step = batch});
    loader.start_epoch(epoch, batch);
    auto t = Clock::now();
    while (auto b = loader.next()) {
      const vit::StepStats s = trainer.train_step(b->x.to(dev), b->y.to(dev));
      ++batch;
      if (guard.must_stop(s.finite))
        return diverged(fmt::format("step {} (epoch {}, batch {}): the loss is {} and the grad norm {}",
                                    trainer.step(), epoch + 1, batch, s.loss, s.grad_norm));
      if (s.finite) {
        loss_sum += s.loss * static_cast<double>(b->y.size(0));
        correct += s.correct;
        seen += b->y.size(0);
      } else {  // skipped: the weights are those of the step before
        fmt::print("\nstep {} (epoch {}, batch {}): the loss is {} and the grad norm {}: skipped ({} in a row, {} in "
                   "all)\n", trainer.step(), epoch + 1, batch, s.loss, s.grad_norm, guard.in_a_row, guard.skipped);
      }
      progress.update(batch, {{"loss", loss_sum / double(std::max<int64_t>(seen, 1))},
                              {"acc", double(correct) / double(std::max<int64_t>(seen, 1))}});  // rank 0's rows
      // All ranks agree on the stop, and so on the step; the checkpoint holds the data position.
      if (const int sig = examples::agreed_stop_signal(stop.load())) {
        seconds += seconds_since(t);
        save();
        fmt::print("\nstopped by {} at epoch {}, batch {}: resume with {} --resume {}\n", data::signal_name(sig),
                   epoch + 1, batch, self, ckpt);
        return examples::leave_together(data::stop_status(sig));
      }
    }
    const vit::EvalStats ev = evaluate();
    seconds += seconds_since(t);
    if (!std::isfinite(ev.loss) && o.on_nan == "stop")  // finite weights, but the model no longer computes
      return diverged(fmt::format("epoch {}: the {} loss is {}", epoch + 1, split, ev.loss));
    test_acc = ev.accuracy;
    const std::vector<double> sums = examples::sum_over_ranks({loss_sum, double(correct), double(seen)});
    const double train_loss = sums[0] / sums[2], train_acc = sums[1] / sums[2];
    progress.finish(fmt::format("| train loss {:.4f} acc {:.4f} | {} loss {:.4f} acc {:.4f}", train_loss, train_acc,
                                split, ev.loss, ev.accuracy));
    if (csv)
      csv->append(fmt::format("{},{},{:.6f},{:.6f},{:.6f},{:.6f},{:.1f}", epoch + 1, trainer.step(), train_loss,
                              train_acc, ev.loss, ev.accuracy, seconds));
    // The checkpoint points at the start of the next epoch.
    ++epoch, batch = 0, loss_sum = 0, correct = 0, seen = 0;
    save();
  }
  if (test_acc == 0) test_acc = evaluate().accuracy;  // resumed a finished run
  if (!dist::is_main()) return 0;
  // How it went, and what to do with the run next.
  fmt::print("\nvit_fmnist {}: {} accuracy {:.2f}% after {} epochs ({} steps{}); {} of training, {} in all\n", o.attn,
             split, 100 * test_acc, o.epochs, trainer.step(),
             guard.skipped > 0 ? fmt::format(", {} skipped: non-finite loss or grad norm", guard.skipped) : "",
             data::format_duration(seconds), data::format_duration(seconds_since(program_start)));
  fmt::print("  checkpoint  {}  (model + AdamW state, after every epoch)\n", ckpt);
  fmt::print("  metrics     {}  (one row per epoch)\n", csv_path);
  fmt::print("  evaluate    {} --eval {}\n", self, ckpt);
  fmt::print("  plot        {}\n", plot::plot_metrics_command(out));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return flags::guarded_main("vit_fmnist", [&] {
    const std::vector<std::string> args(argv + 1, argv + argc);
    if (std::find(args.begin(), args.end(), "--help") != args.end()) {
      fmt::print("{}", vit::usage());
      return 0;
    }
    examples::join_job();
    Config o = vit::parse_config(args);
    if (!o.resume.empty()) o = resume_config(o.resume, args);
    if (!o.eval.empty()) o = eval_config(o.eval, args);
    data::check_memory_budget("vit_fmnist", vit::training_bytes(o), "--dim, --depth, --batch or --mlp-ratio");
    const Device dev = flags::parse_device("vit_fmnist", o.device);
    flags::set_precision("vit_fmnist", o.precision);
    if (o.threads > 0) omp_set_num_threads(static_cast<int>(o.threads));
    if (o.profile_shapes) o.profile = true;
    if (o.profile && o.bench == 0) o.bench = 5;
    if (o.bench > 0) return run_bench(o, dev);
    if (!o.eval.empty()) return run_eval(o, dev);
    return run_train(o, dev);
  });
}
