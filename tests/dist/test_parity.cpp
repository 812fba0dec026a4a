// Data parallelism changes nothing but the speed: R ranks, each training on its B/R rows of every
// global batch, end at the parameters one process reaches on the whole batches (B rows), after 20
// AdamW steps, for the library's ViT and GPT (linea::models, small configs).
//
// Tolerance: float32 sums in a different order (a batch mean computed as the mean of R partial
// means, GEMMs over B/R rows instead of B) differ by a few ulps per step; AdamW, which divides by
// sqrt(v), passes those on at up to lr scale. Measured on 2 ranks (ctest dist): max |difference|
// 6.0e-8 (ViT) and 1.2e-7 (GPT), against parameter changes of 3.6e-2 and 2.6e-2 over the 20
// steps. The bound below, 1e-5, is about a hundred times the measured difference and more than
// a thousand times below the change itself (also checked, so a run that did not train fails).
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <functional>

#include <linea/dist/dist.h>
#include <linea/linea.h>
#include <linea/models/gpt.h>
#include <linea/models/vit.h>

using namespace linea;
namespace dist = linea::dist;
namespace gpt = linea::models::gpt;
namespace vit = linea::models::vit;

namespace {

constexpr int kSteps = 20;
constexpr double kTolerance = 1e-5;

// max |a - b| over the parameters of two models of one architecture.
double max_difference(const nn::Module& a, const nn::Module& b) {
  const auto pa = a.named_parameters(), pb = b.named_parameters();
  double worst = 0;
  for (size_t i = 0; i < pa.size(); ++i)
    worst = std::max(worst, max(abs(pa[i].second.to(float64) - pb[i].second.to(float64))).item());
  return worst;
}

// Fails unless every rank holds rank 0's parameters (DataParallel keeps them in lockstep).
void check_same_on_every_rank(const nn::Module& m) {
  double worst = 0;
  for (const auto& [name, p] : m.named_parameters()) {
    Tensor root = p.detach().clone();
    dist::broadcast(root, 0);
    worst = std::max(worst, max(abs(root - p.detach())).item());
  }
  CHECK(dist::any(worst != 0) == false);
}

// This rank's rows of a global batch.
Tensor my_rows(const Tensor& t) {
  const dist::Shard s = dist::shard(t.size(0));
  return t.narrow(0, s.begin, s.size).contiguous();
}

struct Parity {
  double difference;  // distributed vs one process
  double moved;       // how far the one-process run moved the parameters from their start
};

}  // namespace

TEST_CASE("ViT: R ranks x B/R follow 1 rank x B for 20 AdamW steps") {
  const vit::ModelConfig mc{.attn = "mhla", .dim = 32, .depth = 2, .heads = 2};
  const vit::OptimConfig oc{.steps = kSteps, .lr = 4e-3, .warmup = 5};
  const int64_t rows = 16;
  auto make = [&] {
    manual_seed(1);  // the same starting weights for each
    return vit::Trainer(std::make_shared<vit::ViT>(mc), oc);
  };
  auto batch = [&](int step) {
    Generator gen(1000 + step);
    Tensor x = randn({rows, 1, mc.image, mc.image}, gen), y = randint(0, 10, {rows}, gen);
    return std::pair{x, y};
  };
  vit::Trainer parallel = make();
  parallel.distribute();
  for (int step = 0; step < kSteps; ++step) {
    auto [x, y] = batch(step);
    parallel.train_step(my_rows(x), my_rows(y));
  }
  check_same_on_every_rank(*parallel.model);
  if (!dist::is_main()) return;
  vit::Trainer single = make(), start = make();
  for (int step = 0; step < kSteps; ++step) {
    auto [x, y] = batch(step);
    single.train_step(x, y);
  }
  const Parity r{max_difference(*parallel.model, *single.model), max_difference(*single.model, *start.model)};
  MESSAGE("ViT, " << dist::world().size << " ranks: max |parallel - single| " << r.difference << ", max change "
                  << r.moved);
  CHECK(r.difference <= kTolerance);
  CHECK(r.moved > 1000 * kTolerance);
}

TEST_CASE("GPT: R ranks x B/R follow 1 rank x B for 20 AdamW steps, grad clipping included") {
  const gpt::ModelConfig mc{.attn = "mhla", .vocab = 16, .layers = 2, .heads = 2, .dim = 32, .context = 16, .chunk = 4};
  // grad_clip 0.5 clips every step here: the clip must see the averaged gradients.
  const gpt::OptimConfig oc{.steps = kSteps, .lr = 3e-3, .warmup = 5, .grad_clip = 0.5};
  auto make = [&] {
    manual_seed(1337);
    return gpt::Trainer(std::make_shared<gpt::GPT>(mc), oc);
  };
  auto batch = [&](int step) {
    Generator gen(2000 + step);
    Tensor x = randint(0, mc.vocab, {8, mc.context}, gen), y = randint(0, mc.vocab, {8, mc.context}, gen);
    return std::pair{x, y};
  };
  gpt::Trainer parallel = make();
  parallel.distribute();
  std::vector<double> norms;
  for (int step = 0; step < kSteps; ++step) {
    auto [x, y] = batch(step);
    norms.push_back(parallel.train_step(my_rows(x), my_rows(y)).grad_norm);
  }
  check_same_on_every_rank(*parallel.model);
  if (!dist::is_main()) return;
  gpt::Trainer single = make(), start = make();
  double worst_norm = 0;
  int clipped = 0;
  for (int step = 0; step < kSteps; ++step) {
    auto [x, y] = batch(step);
    const double norm = single.train_step(x, y).grad_norm;
    worst_norm = std::max(worst_norm, std::abs(norm - norms[step]) / norm);
    clipped += norm > oc.grad_clip;
  }
  const Parity r{max_difference(*parallel.model, *single.model), max_difference(*single.model, *start.model)};
  MESSAGE("GPT, " << dist::world().size << " ranks: max |parallel - single| " << r.difference << ", max change "
                  << r.moved << ", grad norms agree to " << worst_norm << " (relative), " << clipped << " of "
                  << kSteps << " steps clipped");
  CHECK(worst_norm < 1e-5);  // the norm clipping saw is the whole batch's
  CHECK(clipped > 0);
  CHECK(r.difference <= kTolerance);
  CHECK(r.moved > 1000 * kTolerance);
}
