// The library's GPT decoder (<linea/models/gpt.h>, the model of examples/char_lm and mqar): training lowers
// the loss for every attention kind, MHLA's streaming generation reproduces the full forward,
// a checkpoint resumes to the identical next step, and a tiny MQAR run learns to recall.
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>

#include <linea/models/gpt.h>

#include "data/mqar.h"
#include "data/sampling.h"
#include "helpers.h"

using namespace linea;
namespace gpt = linea::models::gpt;
using linea::testing::allclose;

namespace {

gpt::ModelConfig tiny(const std::string& attn) {
  return {.attn = attn, .vocab = 11, .layers = 2, .heads = 2, .dim = 16, .context = 32, .chunk = 8};
}

// A non-trivial causal mixing matrix (positive, lower triangular, unequal weights), so the
// streams must use every entry the way the chunkwise op does.
void randomize_mix(gpt::GPT& model, Generator& gen) {
  for (size_t i = 0; i < model.blocks->size(); ++i) {
    Tensor mix = dynamic_cast<nn::MHLA&>(*model.block(i).attn).mix;
    nn::uniform_(mix, 0.1, 1.0, gen);
    NoGradGuard no_grad;
    backend(mix.device()).copy(tril(mix.detach()), mix);  // causal: lower triangular, in place
  }
}

}  // namespace

TEST_CASE("GPT: a few steps lower the loss on a tiny batch, for each attention kind") {
  for (const char* attn : {"softmax", "linear", "mhla"}) {
    CAPTURE(attn);
    manual_seed(1);
    auto model = std::make_shared<gpt::GPT>(tiny(attn));
    gpt::Trainer trainer(model, {.steps = 40, .lr = 1e-2, .min_lr = 1e-3, .warmup = 5});
    Generator gen(7);
    const Tensor x = randint(0, 11, {4, 32}, gen), y = randint(0, 11, {4, 32}, gen);
    const double first = trainer.train_step(x, y).loss;
    CHECK(first == doctest::Approx(std::log(11.0)).epsilon(0.05));  // small init: near uniform
    double last = first;
    for (int i = 0; i < 39; ++i) last = trainer.train_step(x, y).loss;
    CHECK(last < 0.8 * first);
  }
}

TEST_CASE("GPT: tied head shares the embedding; untied has its own; logits shape; too long input throws") {
  gpt::GPT tied(tiny("softmax"));
  CHECK(tied.head == nullptr);
  auto untied_cfg = tiny("softmax");
  untied_cfg.tie = false;
  gpt::GPT untied(untied_cfg);
  CHECK(untied.num_parameters() == tied.num_parameters() + 11 * 16);
  CHECK(tied.forward(zeros({2, 5}, DType::Int64)).shape() == Shape{2, 5, 11});
  CHECK_THROWS_WITH_AS(tied.forward(zeros({1, 33}, DType::Int64)), doctest::Contains("[GPT]"), Error);
  CHECK_THROWS_WITH_AS(gpt::Trainer(nullptr, {}), doctest::Contains("[gpt::Trainer] needs a model"), Error);
}

TEST_CASE("GPT bias = false (nanoGPT's bias=False): biases stay zero and untrained, the loss still falls") {
  for (const char* attn : {"softmax", "mhla"}) {
    CAPTURE(attn);
    manual_seed(1);
    auto cfg = tiny(attn);
    cfg.bias = false;
    auto model = std::make_shared<gpt::GPT>(cfg);
    // Per block: qkv 3·16 + proj 16 + fc1 64 + fc2 16 + ln1, ln2 2·16 biases; ln_f 16.
    CHECK(model->num_trainable() == model->num_parameters() - 2 * (48 + 16 + 64 + 16 + 32) - 16);
    gpt::Trainer trainer(model, {.steps = 20, .lr = 1e-2, .min_lr = 1e-3, .warmup = 2});
    Generator gen(7);
    const Tensor x = randint(0, 11, {4, 32}, gen), y = randint(0, 11, {4, 32}, gen);
    const double first = trainer.train_step(x, y).loss;
    double last = first;
    for (int i = 0; i < 19; ++i) last = trainer.train_step(x, y).loss;
    CHECK(last < 0.8 * first);
    for (const auto& np : model->named_parameters()) {  // not [name, p]: clang < 16 cannot CAPTURE a binding
      const std::string& name = np.first;
      const Tensor& p = np.second;
      if (name.ends_with(".bias")) {
        CAPTURE(name);
        CHECK(!p.requires_grad());
        CHECK(sum(abs(p)).item() == 0.0);
      }
    }
  }
}

TEST_CASE("MHLA streaming generation gives the full forward's logits, across chunks and past the context") {
  for (DType dtype : {DType::Float64, DType::Float32}) {
    CAPTURE(dtype);
    manual_seed(3);
    gpt::GPT model(tiny("mhla"));
    nn::to(model, dtype);
    Generator gen(11);
    randomize_mix(model, gen);
    model.eval();
    const double tol = dtype == DType::Float64 ? 1e-10 : 1e-5;
    std::vector<int64_t> tokens = randint(0, 11, {45}, gen).to_vector_as<int64_t>();

    NoGradGuard no_grad;
    const Tensor full = model.forward(from_vector(std::vector<int64_t>(tokens.begin(), tokens.begin() + 32), {1, 32}));
    gpt::Decoder decoder(model);
    for (int64_t t = 0; t < 32; ++t) {  // 4 chunks of 8: within-chunk and mixed-prefix paths
      CAPTURE(t);
      CHECK(allclose(decoder.push(tokens[t]), full.select(1, t).view({-1}), tol, tol));
    }
    // Past the 32 positions the stream restarts on the last 16 tokens: the logits are the forward's
    // over that window.
    for (int64_t t = 32; t < 45; ++t) {
      CAPTURE(t);
      const Tensor got = decoder.push(tokens[t]);
      const int64_t start = 32 - 16 + 1 + ((t - 32) / 16) * 16, n = t - start + 1;
      const Tensor window = from_vector(std::vector<int64_t>(tokens.begin() + start, tokens.begin() + t + 1), {1, n});
      CHECK(allclose(got, model.forward(window).select(1, n - 1).view({-1}), tol, tol));
    }
  }
}

TEST_CASE("Softmax decoder recomputes the last context tokens; generate is seeded and in range") {
  manual_seed(4);
  gpt::GPT model(tiny("softmax"));
  model.eval();
  Generator gen(5);
  const std::vector<int64_t> tokens = randint(0, 11, {40}, gen).to_vector_as<int64_t>();
  gpt::Decoder decoder(model);
  Tensor got;
  for (int64_t t : tokens) got = decoder.push(t);
  NoGradGuard no_grad;
  const Tensor window = from_vector(std::vector<int64_t>(tokens.end() - 32, tokens.end()), {1, 32});
  CHECK(allclose(got, model.forward(window).select(1, 31).view({-1}), 1e-6, 1e-6));

  Generator g1(9), g2(9);
  const auto a = gpt::generate(model, {1, 2}, 50, 1.0, 0, g1), b = gpt::generate(model, {1, 2}, 50, 1.0, 0, g2);
  CHECK(a == b);
  CHECK(a.size() == 50);
  for (int64_t t : a) CHECK((t >= 0 && t < 11));
  Generator g3(9);
  for (int64_t t : gpt::generate(model, {1}, 20, 1.0, 1, g3))  // top-1: always the argmax
    CHECK(t >= 0);
  CHECK_THROWS_WITH_AS(gpt::generate(model, {}, 5, 1.0, 0, g3), doctest::Contains("[generate]"), Error);
}

TEST_CASE("Checkpoint resume gives the identical next-step loss") {
  const std::string path = (std::filesystem::temp_directory_path() / "linea_test_lm_ckpt.safetensors").string();
  Generator gen(21);
  std::vector<std::pair<Tensor, Tensor>> batches;
  for (int i = 0; i < 5; ++i) batches.emplace_back(randint(0, 11, {3, 32}, gen), randint(0, 11, {3, 32}, gen));
  const gpt::OptimConfig oc{.steps = 10, .lr = 5e-3, .min_lr = 1e-4, .warmup = 2};

  manual_seed(8);
  auto model = std::make_shared<gpt::GPT>(tiny("mhla"));
  gpt::Trainer trainer(model, oc);
  for (int i = 0; i < 3; ++i) trainer.train_step(batches[i].first, batches[i].second);
  trainer.save(path, {{"note", "x"}});
  const double next = trainer.train_step(batches[3].first, batches[3].second).loss;
  const double after = trainer.train_step(batches[4].first, batches[4].second).loss;

  manual_seed(99);  // different initial weights: everything must come from the file
  auto model2 = std::make_shared<gpt::GPT>(tiny("mhla"));
  gpt::Trainer resumed(model2, oc);
  const nn::Metadata meta = resumed.load(path);
  CHECK(meta.at("note") == "x");
  CHECK(resumed.step() == 3);
  gpt::GPT weights_only(tiny("mhla"));  // load_weights: the model part alone, for sampling
  gpt::load_weights(weights_only, path);
  for (const auto& entry : model2->state_dict()) {  // not [name, t]: clang < 16 cannot CAPTURE a binding
    const std::string& name = entry.first;
    const Tensor& t = entry.second;
    CAPTURE(name);
    CHECK(allclose(weights_only.state_dict().at(name), t, 0, 0));
  }
  CHECK(resumed.train_step(batches[3].first, batches[3].second).loss == next);
  CHECK(resumed.train_step(batches[4].first, batches[4].second).loss == after);

  std::filesystem::remove(path);
}

TEST_CASE("Trainer: a step whose loss or grad norm is not finite updates nothing, with or without clipping") {
  Generator gen(5);
  const Tensor x = randint(0, 11, {2, 16}, gen), y = randint(0, 11, {2, 16}, gen);
  for (double clip : {0.0, 1.0}) {
    CAPTURE(clip);
    manual_seed(3);
    auto model = std::make_shared<gpt::GPT>(tiny("softmax"));
    gpt::Trainer trainer(model, {.steps = 10, .lr = 1e-2, .warmup = 0, .grad_clip = clip});
    CHECK(trainer.train_step(x, y).finite);
    std::map<std::string, Tensor> before;
    for (const auto& entry : model->state_dict()) before.emplace(entry.first, entry.second.clone());
    for (const auto& entry : trainer.optimizer->state_dict()) before.emplace("optim." + entry.first, entry.second.clone());
    // A finite loss whose gradient is NaN: d sqrt(u)/du at u = 0 is infinite, times 0.
    const gpt::StepStats s = trainer.train_step([&] {
      return nn::cross_entropy(model->forward(x), y) + sum(sqrt(model->ln_f->weight * 0.0));
    });
    CHECK(std::isfinite(s.loss));
    CHECK(std::isnan(s.grad_norm));
    CHECK_FALSE(s.finite);
    CHECK(trainer.step() == 2);
    for (const auto& entry : model->state_dict()) {
      CAPTURE(entry.first);
      CHECK(allclose(entry.second, before.at(entry.first), 0, 0));
    }
    for (const auto& entry : trainer.optimizer->state_dict()) {
      CAPTURE(entry.first);
      CHECK(allclose(entry.second, before.at("optim." + entry.first), 0, 0));
    }
    const gpt::StepStats next = trainer.train_step(x, y);
    CHECK(next.finite);
    CHECK(std::isfinite(next.grad_norm));  // measured without clipping too
  }
}

TEST_CASE("GPT: scored_logits are forward's logits at the scored positions; attention-only blocks") {
  for (const double mlp_ratio : {4.0, 0.0}) {
    CAPTURE(mlp_ratio);
    manual_seed(3);
    gpt::ModelConfig c = tiny("softmax");
    c.mlp_ratio = mlp_ratio;
    gpt::GPT model(c);
    int64_t mlp_params = 0;
    for (auto& [name, p] : model.named_parameters()) mlp_params += name.find(".mlp.") != std::string::npos;
    CHECK((mlp_params == 0) == (mlp_ratio == 0));
    Generator gen(4);
    const Tensor x = randint(0, 11, {3, 10}, gen);
    Tensor y = full({3, 10}, -100.0, DType::Int64);
    y.data<int64_t>()[4] = 7, y.data<int64_t>()[12] = 2, y.data<int64_t>()[29] = 0;  // rows 0, 1, 2
    auto [logits, targets] = model.scored_logits(x, y);
    CHECK(logits.shape() == Shape{3, 11});
    CHECK(targets.to_vector_as<int64_t>() == std::vector<int64_t>{7, 2, 0});
    const Tensor full_logits = model.forward(x).reshape({30, 11});
    CHECK(allclose(logits, index_select(full_logits, 0, from_vector(std::vector<int64_t>{4, 12, 29}, {3})), 1e-6, 1e-6));
    CHECK(nn::cross_entropy(logits, targets).item() ==
          doctest::Approx(nn::cross_entropy(model.forward(x), y).item()).epsilon(1e-6));
    CHECK_THROWS_WITH_AS(model.scored_logits(x, full({3, 10}, -100.0, DType::Int64)),
                         doctest::Contains("every target of (3, 10) is ignored"), linea::Error);
  }
}

TEST_CASE("ShortConv: y_t = x_t + sum_j w_j * x_{t-j}, causal, float64 gradcheck") {
  manual_seed(5);
  gpt::ShortConv conv(3, 4);
  Generator gen(6);
  const Tensor x = randn({2, 5, 4}, gen, float64);
  const Tensor w = conv.weight.detach().to(float64);
  conv.weight = w;  // float64 throughout for the checks below
  const Tensor y = conv.forward(x);
  const auto xv = x.to_vector_as<double>(), yv = y.to_vector_as<double>(), wv = w.to_vector_as<double>();
  for (int64_t b = 0; b < 2; ++b)
    for (int64_t t = 0; t < 5; ++t)
      for (int64_t c = 0; c < 4; ++c) {
        double want = xv[(b * 5 + t) * 4 + c];
        for (int64_t j = 0; j < 3 && j <= t; ++j) want += wv[j * 4 + c] * xv[(b * 5 + t - j) * 4 + c];
        CHECK(yv[(b * 5 + t) * 4 + c] == doctest::Approx(want).epsilon(1e-12));
      }
  CHECK_GRADCHECK(
      [](const std::vector<Tensor>& in) {
        gpt::ShortConv c(3, 4);
        c.weight = in[1];
        return sum(pow(c.forward(in[0]), 2.0));
      },
      {x.clone().requires_grad_(), w.clone().requires_grad_()});
  CHECK_THROWS_WITH_AS(conv.forward(randn({2, 5, 3}, gen)), doctest::Contains("[ShortConv] expected [B, T, 4]"),
                       linea::Error);

  // A GPT with it: MHLA's streaming decoder refuses it instead of computing something else.
  gpt::ModelConfig c = tiny("mhla");
  c.short_conv = 3;
  gpt::GPT model(c);
  CHECK(model.forward(randint(0, 11, {1, 8}, gen)).shape() == Shape{1, 8, 11});
  CHECK_THROWS_WITH_AS(gpt::Decoder{model}, doctest::Contains("no short convolution"), linea::Error);
}

// 300 steps teach a tiny model to answer with one of the sequence's values (half the time right
// with 2 pairs); recall itself (near 100%) takes the longer runs of `mqar --sweep`.
TEST_CASE("MQAR: a tiny attention-only softmax model learns to answer from the context") {
  const data::MqarConfig task{.vocab = 24, .seq_len = 16, .num_kv = 2};
  manual_seed(2);
  auto model = std::make_shared<gpt::GPT>(gpt::ModelConfig{
      .attn = "softmax", .vocab = 24, .layers = 2, .heads = 2, .dim = 32, .context = 16, .mlp_ratio = 0});
  gpt::Trainer trainer(model, {.steps = 300, .lr = 1e-2, .min_lr = 0, .warmup = 0, .grad_clip = 0});
  for (int64_t step = 0; step < 300; ++step) {
    std::vector<int64_t> ids(32);
    for (int64_t i = 0; i < 32; ++i) ids[i] = step * 32 + i;
    const data::MqarBatch b = data::make_mqar(task, 1, ids);
    trainer.train_step([&] {
      auto [logits, targets] = model->scored_logits(b.inputs, b.targets);
      return nn::cross_entropy(logits, targets);
    });
  }
  NoGradGuard no_grad;
  std::vector<int64_t> ids(256);
  for (int64_t i = 0; i < 256; ++i) ids[i] = i;
  const data::MqarBatch b = data::make_mqar(task, 2, ids);  // another split
  const double acc = data::masked_accuracy(argmax(model->forward(b.inputs), -1), b.targets).value();
  CHECK(acc > 4.0 / 12);  // guessing any value: 1/12
}
