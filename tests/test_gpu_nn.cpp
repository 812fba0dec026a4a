// Models on the GPU: nn::to(model, Device::cuda()) moves parameters and buffers in place (an
// optimizer built afterwards updates the device tensors), checkpoints written from a GPU model
// load on the CPU with identical values, and a few AdamW steps of a small transformer give the
// CPU's losses on the GPU for each attention kind. Runs only where a GPU is present.
#include "helpers.h"

using namespace linea;
using namespace linea::testing;

namespace {

// A small classifier: tokens [B, N, dim] -> TransformerBlock -> mean over tokens -> Linear.
class TinyModel : public nn::Module {
 public:
  TinyModel(const std::string& attention, int64_t dim, int64_t classes) : Module("TinyModel") {
    block = register_module("block", std::make_shared<nn::TransformerBlock>(nn::TransformerBlockConfig{
                                         .dim = dim, .heads = 2, .mlp_ratio = 2, .attention = attention, .grid = 2}));
    norm = register_module("norm", std::make_shared<nn::LayerNorm>(dim));
    head = register_module("head", std::make_shared<nn::Linear>(dim, classes));
  }
  Tensor forward(const Tensor& x) override { return head->forward(norm->forward(mean(block->forward(x), {1}))); }
  std::shared_ptr<nn::TransformerBlock> block;
  std::shared_ptr<nn::LayerNorm> norm;
  std::shared_ptr<nn::Linear> head;
};

constexpr int64_t kBatch = 4, kTokens = 16, kDim = 16, kClasses = 5;

std::shared_ptr<TinyModel> make_model(const std::string& attention) {
  manual_seed(42);  // the same weights for every call
  return std::make_shared<TinyModel>(attention, kDim, kClasses);
}

// Losses of `steps` AdamW steps on fixed random data, on `device`.
std::vector<double> train_losses(const std::string& attention, Device device, int steps) {
  auto model = make_model(attention);
  nn::to(*model, device);
  nn::AdamW opt(model->named_parameters(), {.lr = 3e-3, .weight_decay = 0.01});
  Generator gen(7);
  const Tensor x = randn({kBatch, kTokens, kDim}, gen).to(device);
  const Tensor y = randint(0, kClasses, {kBatch}, gen).to(device);
  std::vector<double> losses;
  for (int s = 0; s < steps; ++s) {
    Tensor loss = nn::cross_entropy(model->forward(x), y);
    losses.push_back(loss.item());
    loss.backward();
    opt.step();
    opt.zero_grad();
  }
  return losses;
}

}  // namespace

TEST_CASE("nn::to(model, cuda) moves parameters and buffers in place, dropping grads") {
  auto model = make_model("mhla");
  const auto before = model->named_parameters();
  const nn::StateDict host = model->state_dict();
  sum(model->forward(randn({2, kTokens, kDim}))).backward();
  REQUIRE(model->head->weight.grad().defined());

  nn::to(*model, Device::cuda());
  const auto after = model->named_parameters();
  REQUIRE(after.size() == before.size());
  for (size_t i = 0; i < after.size(); ++i) {
    INFO(after[i].first);
    CHECK(after[i].second.same(before[i].second));  // the same handle: registrations follow
    CHECK(after[i].second.device() == Device::cuda());
    CHECK(after[i].second.requires_grad());
    CHECK(!after[i].second.grad().defined());
  }
  for (const auto& entry : model->named_buffers()) {  // not [name, t]: clang < 16 cannot INFO a binding
    const std::string& name = entry.first;
    const Tensor& t = entry.second;
    INFO(name);
    CHECK(t.device() == Device::cuda());
  }
  for (const auto& entry : model->state_dict()) {
    const std::string& name = entry.first;
    const Tensor& t = entry.second;
    INFO(name);
    CHECK(t.to(Device::cpu()).to_vector() == host.at(name).to_vector());  // the values travel exactly
  }
  // The forward runs on the GPU, and back on the CPU after moving back.
  const Tensor x = randn({2, kTokens, kDim}, Device::cuda());
  CHECK(model->forward(x).device() == Device::cuda());
  nn::to(*model, Device::cpu());
  CHECK(model->head->weight.device().is_cpu());
  CHECK(model->forward(x.to(Device::cpu())).device().is_cpu());
}

TEST_CASE("an optimizer built after the move keeps its state on the GPU") {
  auto model = make_model("linear");
  nn::to(*model, Device::cuda());
  nn::AdamW opt(model->named_parameters(), {.lr = 1e-2});
  sum(model->forward(randn({2, kTokens, kDim}, Device::cuda()))).backward();
  opt.step();
  for (const auto& entry : opt.state_dict()) {
    const std::string& key = entry.first;
    const Tensor& t = entry.second;
    INFO(key);
    if (key.ends_with(".step") || key.starts_with("param_groups.")) continue;  // host scalars are fine
    CHECK(t.device() == Device::cuda());
  }
}

TEST_CASE("a checkpoint saved from a GPU model loads on the CPU with identical values") {
  TempDir dir("gpu_nn");
  auto gpu = make_model("softmax");
  nn::to(*gpu, Device::cuda());
  nn::AdamW gpu_opt(gpu->named_parameters(), {.lr = 1e-2});
  sum(gpu->forward(randn({2, kTokens, kDim}, Device::cuda()))).backward();
  gpu_opt.step();
  nn::save_checkpoint(dir.file("ckpt.safetensors"), *gpu, gpu_opt, {{"note", "from the GPU"}});

  manual_seed(123);  // other weights, so the load must overwrite them
  TinyModel cpu("softmax", kDim, kClasses);
  nn::AdamW cpu_opt(cpu.named_parameters(), {.lr = 1e-2});
  const nn::Metadata meta = nn::load_checkpoint(dir.file("ckpt.safetensors"), cpu, cpu_opt);
  CHECK(meta.at("note") == "from the GPU");
  const nn::StateDict g = gpu->state_dict();
  for (const auto& entry : cpu.state_dict()) {
    const std::string& name = entry.first;
    const Tensor& t = entry.second;
    INFO(name);
    CHECK(t.device().is_cpu());
    CHECK(t.to_vector() == g.at(name).to(Device::cpu()).to_vector());
  }
  const nn::StateDict go = gpu_opt.state_dict(), co = cpu_opt.state_dict();
  REQUIRE(go.size() == co.size());
  for (const auto& entry : co) {
    const std::string& key = entry.first;
    const Tensor& t = entry.second;
    INFO(key);
    CHECK(t.to_vector() == go.at(key).to(Device::cpu()).to_vector());
  }
  // And back: the CPU checkpoint loads into the GPU model, whose tensors stay on the GPU.
  nn::save_checkpoint(dir.file("cpu.safetensors"), cpu, cpu_opt);
  nn::load_checkpoint(dir.file("cpu.safetensors"), *gpu, gpu_opt);
  CHECK(gpu->head->weight.device() == Device::cuda());
}

TEST_CASE("training steps on the GPU give the CPU's losses (float32, dropout 0)") {
  for (const char* kind : {"softmax", "linear", "mhla"}) {
    INFO(kind);
    const std::vector<double> cpu = train_losses(kind, Device::cpu(), 5), gpu = train_losses(kind, Device::cuda(), 5);
    for (size_t s = 0; s < cpu.size(); ++s) {
      INFO("step " << s << ": cpu " << cpu[s] << ", gpu " << gpu[s]);
      CHECK(std::abs(gpu[s] - cpu[s]) <= 1e-4 * std::abs(cpu[s]) + 1e-6);
    }
    CHECK(cpu.back() < cpu.front());  // it learns at all
  }
}

TEST_CASE("bf16 autocast on the GPU: the loss stays near the float32 loss") {
  auto model = make_model("mhla");
  nn::to(*model, Device::cuda());
  Generator gen(7);
  const Tensor x = randn({kBatch, kTokens, kDim}, gen).to(Device::cuda());
  const Tensor y = randint(0, kClasses, {kBatch}, gen).to(Device::cuda());
  NoGradGuard no_grad;
  const double full = nn::cross_entropy(model->forward(x), y).item();
  double bf16 = 0, tf32 = 0;
  {
    AutocastGuard autocast;  // bf16 products; parameters stay float32
    bf16 = nn::cross_entropy(model->forward(x), y).item();
  }
  {
    AutocastGuard guard(MatmulPrecision::TF32);
    tf32 = nn::cross_entropy(model->forward(x), y).item();
  }
  CHECK(matmul_precision() == MatmulPrecision::Highest);
  CHECK(model->head->weight.dtype() == DType::Float32);
  CHECK(std::abs(bf16 - full) <= 2e-2 * std::abs(full));
  CHECK(std::abs(tf32 - full) <= 2e-3 * std::abs(full));
}
