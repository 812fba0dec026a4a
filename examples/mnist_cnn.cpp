// mnist_cnn: a LeNet-style convnet on Fashion-MNIST, written as one would with PyTorch's C++
// frontend: Conv2d, BatchNorm2d, MaxPool2d, Dropout2d and Linear in a Sequential, Adam, and
// cross-entropy, on the CPU (or a GPU with --device cuda).
//
//   mnist_cnn                       3 epochs over the 60000 training images, then the test set
//   mnist_cnn --epochs 1 --threads 2
//   mnist_cnn --help                every flag with its default
//
// Model: conv 5x5 (1 -> 6, padding 2) ReLU, max-pool 2 -> conv 5x5 (6 -> 16), batch norm, ReLU,
// channel dropout, max-pool 2 -> 400 -> 120 -> 84 -> 10 (LeNet-5's sizes on 28x28 images).
#include <omp.h>

#include <algorithm>
#include <chrono>

#include <fmt/core.h>
#include <linea/linea.h>

#include "data/dataloader.h"
#include "data/idx.h"
#include "data/progress.h"
#include "flags.h"

using namespace linea;

namespace {

struct Config {
  int64_t epochs = 3;
  int64_t batch = 64;
  double lr = 1e-3;
  int64_t threads = 0;  // 0: OpenMP's default
  uint64_t seed = 0;
  std::string data;  // "" means the Debian package's folder
  std::string device = "cpu";
};

const std::vector<flags::Flag<Config>> kFlags = {
    flags::flag("epochs", &Config::epochs, true, "passes over the training set", flags::at_least(1)),
    flags::flag("batch", &Config::batch, true, "images per step", flags::at_least(1)),
    flags::flag("lr", &Config::lr, true, "Adam's learning rate", flags::positive(1)),
    flags::flag("threads", &Config::threads, false, "CPU threads (0: OpenMP's default)", flags::at_least(0)),
    flags::flag("seed", &Config::seed, true, "seeds the weights, the batch order and the dropout"),
    flags::flag("data", &Config::data, false, "folder of the Fashion-MNIST .gz files ('' = the package's)"),
    flags::flag("device", &Config::device, false, "cpu or cuda"),
};

std::shared_ptr<nn::Sequential> lenet() {
  using namespace nn;
  return std::make_shared<Sequential>(std::initializer_list<std::shared_ptr<Module>>{
      std::make_shared<Conv2d>(Conv2dOptions(1, 6, 5).padding(2)), std::make_shared<ReLU>(),
      std::make_shared<MaxPool2d>(2),
      std::make_shared<Conv2d>(6, 16, 5), std::make_shared<BatchNorm2d>(16), std::make_shared<ReLU>(),
      std::make_shared<Dropout2d>(0.1), std::make_shared<MaxPool2d>(2),
      std::make_shared<Functional>([](const Tensor& x) { return x.flatten(1); }),
      std::make_shared<Linear>(16 * 5 * 5, 120), std::make_shared<ReLU>(),
      std::make_shared<Linear>(120, 84), std::make_shared<ReLU>(),
      std::make_shared<Linear>(84, 10)});
}

// Accuracy and mean loss of the model in eval mode over (x, y), in batches.
std::pair<double, double> evaluate(nn::Module& model, const Tensor& x, const Tensor& y, int64_t batch, Device dev) {
  NoGradGuard no_grad;
  model.eval();
  double loss = 0;
  int64_t correct = 0;
  for (int64_t i = 0; i < x.size(0); i += batch) {
    const int64_t n = std::min(batch, x.size(0) - i);
    const Tensor logits = model(x.narrow(0, i, n).to(dev));
    const Tensor yb = y.narrow(0, i, n).to(dev);
    loss += nn::cross_entropy(logits, yb, {.reduction = nn::Reduction::Sum}).item();
    correct += static_cast<int64_t>(sum(eq(argmax(logits, 1), yb)).item());
  }
  model.train();
  return {double(correct) / double(x.size(0)), loss / double(x.size(0))};
}

int run(const Config& o) {
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  const Device dev = flags::parse_device("mnist_cnn", o.device);
  if (o.threads > 0) omp_set_num_threads(static_cast<int>(o.threads));
  manual_seed(o.seed);

  const data::ImageDataset train = data::load_fashion_mnist("train", o.data);
  const data::ImageDataset test = data::load_fashion_mnist("test", o.data);
  const data::PixelStats stats = data::pixel_stats(train.images);
  const Tensor train_x = data::normalize_images(train.images, stats), test_x = data::normalize_images(test.images, stats);
  data::DataLoaderOptions lo;
  lo.batch_size = o.batch;
  lo.seed = o.seed;
  data::DataLoader loader(train_x, train.labels.contiguous(), lo);

  auto model = lenet();
  nn::to(*model, dev);
  nn::Adam opt(model->parameters(), o.lr);
  fmt::print("mnist_cnn: {} parameters, {} epochs x {} steps of {} images, {} threads, on {}\n",
             model->num_parameters(), o.epochs, loader.batches_per_epoch(), o.batch, omp_get_max_threads(),
             dev.str());

  double train_seconds = 0, test_acc = 0;
  for (int64_t epoch = 0; epoch < o.epochs; ++epoch) {
    data::Progress progress(loader.batches_per_epoch(), fmt::format("epoch {}/{}", epoch + 1, o.epochs),
                            {.items_per_step = o.batch, .unit = "img"});
    loader.start_epoch(epoch);
    const auto t = Clock::now();
    double loss_sum = 0;
    int64_t correct = 0, seen = 0, step = 0;
    while (auto b = loader.next()) {
      const Tensor x = b->x.to(dev), y = b->y.to(dev);
      const Tensor logits = (*model)(x);
      const Tensor loss = nn::cross_entropy(logits, y);
      opt.zero_grad();
      loss.backward();
      opt.step();
      loss_sum += loss.item() * double(y.size(0));
      correct += static_cast<int64_t>(sum(eq(argmax(logits.detach(), 1), y)).item());
      seen += y.size(0);
      progress.update(++step, {{"loss", loss_sum / double(seen)}, {"acc", double(correct) / double(seen)}});
    }
    train_seconds += std::chrono::duration<double>(Clock::now() - t).count();
    const auto [acc, test_loss] = evaluate(*model, test_x, test.labels, 1000, dev);
    test_acc = acc;
    progress.finish(fmt::format("| train loss {:.4f} acc {:.4f} | test loss {:.4f} acc {:.4f}",
                                loss_sum / double(seen), double(correct) / double(seen), test_loss, acc));
  }
  fmt::print("\nmnist_cnn: test accuracy {:.2f}% after {} epochs; {} of training, {} in all\n", 100 * test_acc,
             o.epochs, data::format_duration(train_seconds),
             data::format_duration(std::chrono::duration<double>(Clock::now() - start).count()));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return flags::guarded_main("mnist_cnn", [&] {
    const std::vector<std::string> args(argv + 1, argv + argc);
    if (flags::help_requested("mnist_cnn", kFlags, args)) return 0;
    return run(flags::parse_flags("mnist_cnn", kFlags, args));
  });
}
