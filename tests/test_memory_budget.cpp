// The examples' memory estimates (examples/data/memory_budget.h) of the library's models: each
// covers at least the weights with their gradients and AdamW's moments, stays finite for absurd
// sizes, and counts the attention probabilities the CPU keeps.
#include <cmath>

#include <linea/tensor/backend.h>

#include "data/memory_budget.h"
#include "helpers.h"

using namespace linea;
namespace gpt = linea::models::gpt;

TEST_CASE("ViT: the memory estimate covers at least the weights, their gradients and AdamW's moments") {
  using linea::models::vit::ModelConfig;
  for (const ModelConfig& c : {ModelConfig{}, ModelConfig{.attn = "softmax", .depth = 2},
                               ModelConfig{.dim = 128, .mlp_ratio = 4}, ModelConfig{.patch = 2}}) {
    const auto params = static_cast<double>(linea::models::vit::ViT(c).num_parameters());
    CAPTURE(c.attn);
    CAPTURE(c.patch);
    CHECK(data::vit_training_bytes(c, 128, true) >= 16 * params);
    CHECK(data::vit_training_bytes(c, 128, true) < 16 * params + 4e9);  // and it is not absurd for a small model
  }
}

TEST_CASE("ViT: the memory estimate counts the attention probabilities the CPU keeps for the backward") {
  // The bench's softmax ViT: few tokens, so the CPU keeps P (float32); on a GPU nothing is kept.
  const linea::models::vit::ModelConfig c{.attn = "softmax"};
  // The one-tile form that keeps P runs where the direct GEMM does (AVX2, AVX-512); the generic
  // kernels keep none, and the CPU's estimate is then the GPU's.
  const int64_t tokens = (c.image / c.patch) * (c.image / c.patch);
  const int64_t per_head = backend(Device::cpu()).attention_probs_size(tokens, DType::Float32);
  if (cpu_isa() == CpuIsa::Generic) REQUIRE(per_head == 0);
  else REQUIRE(per_head >= tokens * tokens);
  const double probs = 4.0 * double(c.depth) * 128 * double(c.heads) * double(per_head);
  CHECK(data::vit_training_bytes(c, 128, true) - data::vit_training_bytes(c, 128, false) ==
        doctest::Approx(probs).epsilon(1e-12));
  // Linear attention keeps no probabilities on either device.
  const linea::models::vit::ModelConfig lin{.attn = "linear"};
  CHECK(data::vit_training_bytes(lin, 128, true) == data::vit_training_bytes(lin, 128, false));
}

TEST_CASE("GPT: the memory estimate covers at least the weights, their gradients and AdamW's moments") {
  for (const char* attn : {"softmax", "linear", "mhla"})
    for (bool tie : {true, false}) {
      const gpt::ModelConfig c{.attn = attn, .vocab = 65, .layers = 2, .heads = 4, .dim = 64, .context = 256,
                               .chunk = 16, .tie = tie};
      const auto params = static_cast<double>(gpt::GPT(c).num_parameters());
      CAPTURE(attn);
      CAPTURE(tie);
      CHECK(data::gpt_training_bytes(c, 12) >= 16 * params);
      CHECK(data::gpt_training_bytes(c, 12) < 16 * params + 1e9);
    }
  // Sizes far past any machine's memory stay finite (no integer overflow on the way).
  const double huge = data::gpt_training_bytes({.attn = "mhla", .vocab = 256, .context = 100000000, .chunk = 16}, 12);
  CHECK(std::isfinite(huge));
  CHECK(huge > 1e15);
}

