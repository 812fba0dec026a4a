// The library's ViT (<linea/models/vit.h>, the model of examples/vit_fmnist): it learns with each
// attention kind, a checkpoint resumes to the bit, and a config that does not fit is a clear error.
#include <omp.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <map>

#include <linea/models/vit.h>

#include "helpers.h"

using namespace linea;
namespace vit = linea::models::vit;

namespace {

// A model small enough for a unit test, with the example's defaults for everything else. Its
// ops are so small that OpenMP threads only add barrier waits: one thread keeps the file fast
// (measured on the shared 2-core machine: 0.3 s instead of 9.6 s).
vit::ModelConfig tiny(const std::string& attn) {
  omp_set_num_threads(1);
  return {.attn = attn, .dim = 16, .depth = 1, .heads = 2, .mlp_ratio = 2};
}
const vit::OptimConfig kRecipe{.steps = 20, .lr = 1e-2, .warmup = 2, .label_smoothing = 0};

// A trainer of a fresh model whose weights `seed` draws.
vit::Trainer trainer_of(const vit::ModelConfig& c, const vit::OptimConfig& o = kRecipe, uint64_t seed = 1) {
  manual_seed(seed);
  return vit::Trainer(std::make_shared<vit::ViT>(c), o);
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
    vit::Trainer trainer = trainer_of(tiny(attn), {.steps = 40, .lr = 1e-2, .warmup = 2, .label_smoothing = 0});
    auto [x, y] = learnable_batch(7);
    const double first = trainer.train_step(x, y).loss;
    double last = first;
    for (int i = 0; i < 20; ++i) last = trainer.train_step(x, y).loss;
    CHECK(last < first / 3);  // measured: 2.32 -> 0.53 for each kind
    CHECK(trainer.model->forward(x).shape() == Shape{16, 10});
  }
}

TEST_CASE("vit: the MHLA mixing matrix stays in [0, 1] (projected after every step)") {
  // lr 0.5: large enough that unprojected steps would leave [0, 1]
  vit::Trainer trainer = trainer_of(tiny("mhla"), {.steps = 10, .lr = 0.5, .warmup = 2, .label_smoothing = 0});
  auto [x, y] = learnable_batch(3);
  for (int i = 0; i < 4; ++i) trainer.train_step(x, y);
  auto& mhla = dynamic_cast<nn::MHLA&>(*trainer.model->block(0).attn);
  CHECK(mhla.mix.shape() == Shape{4, 4});  // 8x8 patches in a 2x2 grid of 4x4-patch blocks
  for (double m : mhla.mix.to_vector()) CHECK((m >= 0 && m <= 1));
}

TEST_CASE("vit: a checkpoint resumes with the identical next-step loss") {
  for (const std::string attn : {"softmax", "mhla"}) {
    CAPTURE(attn);
    const vit::ModelConfig c = tiny(attn);
    auto [x1, y1] = learnable_batch(1);
    auto [x2, y2] = learnable_batch(2);
    const std::string path = temp_path(attn + ".safetensors");

    vit::Trainer a = trainer_of(c);
    for (int i = 0; i < 3; ++i) a.train_step(x1, y1);
    a.save(path, {{"epoch", "0"}});
    const double lr = a.lr();
    const double expected = a.train_step(x2, y2).loss;
    const double expected_after = a.train_step(x1, y1).loss;

    vit::Trainer b = trainer_of(c, kRecipe, 99);  // other starting weights, all overwritten by the checkpoint
    const nn::Metadata meta = b.load(path);
    CHECK(meta.at("epoch") == "0");
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
  auto [x, y] = learnable_batch(1);
  const std::string path = temp_path("nan.safetensors");
  vit::Trainer trainer = trainer_of(tiny("mhla"));
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

  trainer.save(path, {{"program", "my_run"}});
  const std::string good = testing::read_bytes(path);
  trainer.model->head->bias.data<float>()[3] = INFINITY;
  CHECK_THROWS_WITH_AS(trainer.save(path, {{"program", "my_run"}}), doctest::Contains("[my_run] step 3: model.head.bias holds a NaN or an "
                                                             "infinity (the run diverged), so it is not saved"), Error);
  CHECK(testing::read_bytes(path) == good);
  std::filesystem::remove(path);
}

TEST_CASE("vit: any image size, channel count and class count that the patches divide") {
  manual_seed(1);
  vit::ViT model({.attn = "mhla", .image = 16, .channels = 3, .classes = 5, .patch = 4, .dim = 8, .depth = 1,
                  .heads = 2});
  CHECK(model.forward(randn({2, 3, 16, 16})).shape() == Shape{2, 5});
  CHECK(model.config().grid() == 2);  // 4x4 patches in 2x2 blocks
}

TEST_CASE("vit: a config whose sizes do not fit together is a clear error") {
  auto fails = [](const vit::ModelConfig& c, const char* msg) {
    CAPTURE(msg);
    CHECK_THROWS_WITH_AS(vit::ViT{c}, doctest::Contains(msg), Error);
  };
  fails({.attn = "flash"}, "[ViT] attn must be softmax, linear or mhla, got 'flash'");
  fails({.dim = 30}, "[ViT] dim 30 is not a multiple of heads 4");
  fails({.patch = 5}, "[ViT] patch 5 must divide the 32-pixel images");
  fails({.block = 3}, "block 3 the 4x4 patch grid");
  fails({.depth = 0}, "[ViT] every size must be > 0");
  fails({.classes = -1}, "[ViT] every size must be > 0");
  CHECK_THROWS_WITH_AS(vit::Trainer(nullptr, kRecipe), doctest::Contains("[vit::Trainer] needs a model"), Error);
}
