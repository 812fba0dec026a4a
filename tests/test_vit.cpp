// The Fashion-MNIST ViT of examples/vit_fmnist (examples/vit_model.h): it learns with each
// attention kind, a checkpoint resumes to the bit, and bad flags give clear errors.
#include <omp.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <map>

#include "helpers.h"
#include "flags.h"
#include "vit_model.h"

using namespace linea;

namespace {

// A model small enough for a unit test, with the example's defaults for everything else. Its
// ops are so small that OpenMP threads only add barrier waits: one thread keeps the file fast
// (measured on the shared 2-core machine: 0.3 s instead of 9.6 s).
vit::Config tiny(const std::string& attn) {
  omp_set_num_threads(1);
  return vit::parse_config({"--attn", attn, "--dim", "16", "--depth", "1", "--heads", "2", "--mlp-ratio", "2",
                             "--batch", "16", "--lr", "1e-2", "--warmup", "2", "--label-smoothing", "0"});
}

// 16 images whose class is written all over them: image i tiles the 4x4 pattern of its class
// (one fixed random pattern per class) across the picture, plus noise.
std::pair<Tensor, Tensor> learnable_batch(uint64_t seed) {
  Generator gen(seed), pattern_gen(1234);
  const std::vector<double> patterns = randn({10, 16}, pattern_gen).to_vector();
  Tensor x = randn({16, 1, 32, 32}, gen) * 0.5;
  std::vector<int64_t> labels(16);
  float* px = x.data<float>();
  for (int64_t i = 0; i < 16; ++i) {
    labels[i] = (i * 7 + static_cast<int64_t>(seed)) % 10;
    for (int64_t r = 0; r < 32; ++r)
      for (int64_t c = 0; c < 32; ++c)
        px[i * 1024 + r * 32 + c] += static_cast<float>(patterns[labels[i] * 16 + r % 4 * 4 + c % 4]);
  }
  return {x, from_vector(labels)};
}

std::string temp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() / fmt::format("linea_test_vit_{}_{}", getpid(), name)).string();
}

}  // namespace

TEST_CASE("vit: a few steps on a tiny batch lower the loss, for every attention kind") {
  for (const std::string attn : {"softmax", "linear", "mhla"}) {
    CAPTURE(attn);
    vit::Trainer trainer(tiny(attn), 40);
    auto [x, y] = learnable_batch(7);
    const double first = trainer.train_step(x, y).loss;
    double last = first;
    for (int i = 0; i < 20; ++i) last = trainer.train_step(x, y).loss;
    CHECK(last < first / 3);  // measured: 2.32 -> 0.53 for each kind
    CHECK(trainer.model->forward(x).shape() == Shape{16, 10});
  }
}

TEST_CASE("vit: the MHLA mixing matrix stays in [0, 1] (projected after every step)") {
  vit::Config o = tiny("mhla");
  o.lr = 0.5;  // large enough that unprojected steps would leave [0, 1]
  vit::Trainer trainer(o, 10);
  auto [x, y] = learnable_batch(3);
  for (int i = 0; i < 4; ++i) trainer.train_step(x, y);
  auto& mhla = dynamic_cast<nn::MHLA&>(*trainer.model->block(0).attn);
  CHECK(mhla.mix.shape() == Shape{4, 4});  // 8x8 patches in a 2x2 grid of 4x4-patch blocks
  for (double m : mhla.mix.to_vector()) CHECK((m >= 0 && m <= 1));
}

TEST_CASE("vit: a checkpoint resumes with the identical next-step loss") {
  for (const std::string attn : {"softmax", "mhla"}) {
    CAPTURE(attn);
    const vit::Config o = tiny(attn);
    auto [x1, y1] = learnable_batch(1);
    auto [x2, y2] = learnable_batch(2);
    const std::string path = temp_path(attn + ".safetensors");

    vit::Trainer a(o, 20);
    for (int i = 0; i < 3; ++i) a.train_step(x1, y1);
    a.save(path, {{"epoch", "0"}});
    const double lr = a.lr();
    const double expected = a.train_step(x2, y2).loss;
    const double expected_after = a.train_step(x1, y1).loss;

    vit::Config other = o;
    other.seed = 99;  // different starting weights, all overwritten by the checkpoint
    vit::Trainer b(other, 20);
    const nn::Metadata meta = b.load(path);
    CHECK(meta.at("epoch") == "0");
    CHECK(meta.at("config") == vit::config_line(o));
    CHECK(b.step() == 3);
    CHECK(b.lr() == lr);  // the same place in the schedule
    CHECK(b.train_step(x2, y2).loss == expected);  // bit for bit, not approximately
    CHECK(b.train_step(x1, y1).loss == expected_after);
    std::filesystem::remove(path);
  }
}

namespace {

// A copy of every tensor of a state dict (state_dict() hands out the live tensors).
std::map<std::string, Tensor> snapshot(const nn::StateDict& state) {
  std::map<std::string, Tensor> out;
  for (const auto& entry : state) out.emplace(entry.first, entry.second.clone());
  return out;
}

bool same(const nn::StateDict& state, const std::map<std::string, Tensor>& copy) {
  for (const auto& entry : state)
    if (!testing::allclose(entry.second, copy.at(entry.first), 0, 0)) return false;
  return state.size() == copy.size();
}

}  // namespace

TEST_CASE("vit: a step whose loss is not finite changes nothing; a model holding a NaN is not saved") {
  const vit::Config o = tiny("mhla");
  auto [x, y] = learnable_batch(1);
  const std::string path = temp_path("nan.safetensors");
  vit::Trainer trainer(o, 20);
  trainer.train_step(x, y);
  const auto weights = snapshot(trainer.model->state_dict()), moments = snapshot(trainer.optimizer->state_dict());
  const vit::StepStats s = trainer.train_step(x * NAN, y);  // a NaN input: the loss and every gradient NaN
  CHECK_FALSE(s.finite);
  CHECK(std::isnan(s.loss));
  CHECK(trainer.step() == 2);  // the step is spent (its batch and lr), its update is not made
  CHECK(same(trainer.model->state_dict(), weights));
  CHECK(same(trainer.optimizer->state_dict(), moments));
  CHECK(trainer.train_step(x, y).finite);  // and the next step trains
  CHECK_FALSE(same(trainer.model->state_dict(), weights));

  trainer.save(path);
  const std::string good = testing::read_bytes(path);
  trainer.model->head->bias.data<float>()[3] = INFINITY;
  CHECK_THROWS_WITH_AS(trainer.save(path), doctest::Contains("[vit_fmnist] step 3: model.head.bias holds a NaN or an "
                                                             "infinity (the run diverged), so it is not saved"), Error);
  CHECK(testing::read_bytes(path) == good);
  std::filesystem::remove(path);
}

TEST_CASE("vit: a resumed run may change --epochs and no other saved flag") {
  const vit::Config saved = tiny("mhla");
  CHECK(vit::resume_changes(saved, vit::parse_config({"--threads", "3", "--on-nan", "skip-step"}, saved)).empty());
  const std::vector<std::string> changed = vit::resume_changes(saved, vit::parse_config({"--epochs", "9"}, saved));
  CHECK(changed == std::vector<std::string>{"--epochs 9 (the checkpoint's: 7)"});
  for (const std::vector<std::string>& args : {std::vector<std::string>{"--lr", "0.001"}, {"--precision", "bf16"},
                                              {"--seed", "2"}, {"--holdout", "100"}}) {
    CAPTURE(args[0]);
    const std::string msg = args[0] + " " + args[1] + ": the checkpoint was trained with " + args[0];
    CHECK_THROWS_WITH_AS(vit::resume_changes(saved, vit::parse_config(args, saved)), doctest::Contains(msg.c_str()),
                         Error);
  }
  CHECK_THROWS_WITH_AS(vit::parse_config({"--on-nan", "ignore"}), doctest::Contains("--on-nan takes stop or skip-step"),
                       Error);
}

TEST_CASE("vit: config line round trip") {
  const vit::Config o = vit::parse_config(
      {"--attn", "linear", "--dim", "96", "--heads", "3", "--lr", "0.0007", "--augment", "off", "--seed", "5"});
  CHECK(o.dim == 96);
  CHECK(o.heads == 3);
  CHECK(o.lr == 0.0007);
  CHECK_FALSE(o.augment);
  const vit::Config back = vit::parse_config(flags::split_words(vit::config_line(o)));
  CHECK(vit::config_line(back) == vit::config_line(o));
  CHECK(back.lr == o.lr);
  // Later flags win, so the command line can override a checkpoint's config.
  CHECK(vit::parse_config({"--epochs", "3"}, o).epochs == 3);
  CHECK(vit::parse_config({"--epochs", "3"}, o).dim == 96);
}

TEST_CASE("vit: bad flags are clear errors") {
  auto fails = [](std::vector<std::string> args, const char* msg) {
    CAPTURE(msg);
    CHECK_THROWS_WITH_AS(vit::parse_config(args), doctest::Contains(msg), Error);
  };
  fails({"--depht", "4"}, "[vit_fmnist] unknown flag '--depht'");
  fails({"--dim"}, "--dim needs a value");
  fails({"dim", "64"}, "expected a --flag, got 'dim'");
  fails({"--dim", "6x"}, "--dim takes an integer, got '6x'");
  fails({"--lr", "fast"}, "--lr takes a finite number, got 'fast'");
  fails({"--seed", "-1"}, "--seed takes a non-negative integer, got '-1'");
  fails({"--attn", "flash"}, "--attn must be softmax, linear or mhla");
  fails({"--attn", "all"}, "--attn all only goes with --bench N");
  fails({"--augment", "yes"}, "--augment takes on or off, got 'yes'");
  fails({"--dim", "30"}, "--dim 30 is not a multiple of --heads 4");
  fails({"--patch", "5"}, "--patch 5 does not divide the 32-pixel images");
  fails({"--block", "3"}, "--block 3 does not divide the 4x4 patch grid");
  fails({"--epochs", "0"}, "--epochs must be in (0, 100000], got 0");
  fails({"--label-smoothing", "1"}, "--label-smoothing must be in [0, 1)");
  fails({"--min-lr", "0.1"}, "--min-lr 0.1 is above --lr 0.002");
  fails({"--resume", "a", "--eval", "b"}, "--resume and --eval do not go together");
  fails({"--weight-decay", "inf"}, "--weight-decay takes a finite number, got 'inf'");
  fails({"--lr", "nan"}, "--lr takes a finite number, got 'nan'");
  fails({"--weight-decay", "600"}, "--weight-decay 600 x --lr 0.002 must be < 1");
  fails({"--warmup", "4000"}, "--warmup 4000 is more than the run's 3283 steps");  // 7 x 469 batches
}

TEST_CASE("vit: the memory estimate covers at least the weights, their gradients and AdamW's moments") {
  for (const auto& args : std::vector<std::vector<std::string>>{
           {}, {"--attn", "softmax", "--depth", "2"}, {"--dim", "128", "--mlp-ratio", "4"}, {"--patch", "2"}}) {
    const vit::Config o = vit::parse_config(args);
    const auto params = static_cast<double>(vit::ViT(o).num_parameters());
    CAPTURE(vit::config_line(o));
    CHECK(vit::training_bytes(o) >= 16 * params);
    CHECK(vit::training_bytes(o) < 16 * params + 4e9);  // and it is not absurd for a small model
  }
}

TEST_CASE("vit: the memory estimate counts the attention probabilities the CPU keeps for the backward") {
  // The bench's softmax ViT: few tokens, so the CPU keeps P (float32); on a GPU nothing is kept.
  const vit::Config cpu = vit::parse_config({"--attn", "softmax"});
  vit::Config gpu = cpu;
  gpu.device = "cuda";
  // The one-tile form that keeps P runs where the direct GEMM does (AVX2, AVX-512); the generic
  // kernels keep none, and the CPU's estimate is then the GPU's.
  const int64_t tokens = (cpu.img() / cpu.patch) * (cpu.img() / cpu.patch);
  const int64_t per_head = backend(Device::cpu()).attention_probs_size(tokens, DType::Float32);
  if (cpu_isa() == CpuIsa::Generic) REQUIRE(per_head == 0);
  else REQUIRE(per_head >= tokens * tokens);
  const double probs = 4.0 * double(cpu.depth) * double(cpu.batch) * double(cpu.heads) * double(per_head);
  CHECK(vit::training_bytes(cpu) - vit::training_bytes(gpu) == doctest::Approx(probs).epsilon(1e-12));
  // Linear attention keeps no probabilities on either device.
  vit::Config lin = vit::parse_config({"--attn", "linear"}), lin_gpu = lin;
  lin_gpu.device = "cuda";
  CHECK(vit::training_bytes(lin) == vit::training_bytes(lin_gpu));
}
