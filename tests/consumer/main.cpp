// A user program against an installed linea: autograd (y = sum(x * x) has dy/dx = 2x), a matmul,
// which runs on OpenBLAS, linea::dist started without mpirun (a world of one, whose all_reduce
// leaves a tensor as it is), and the library's ViT (linea::models) trained data-parallel in that
// world for a few steps. Exit code 0 when all match hand-computed values and the ViT learns.
#include <cmath>
#include <cstdio>

#include <linea/dist/dist.h>
#include <linea/linea.h>
#include <linea/models/vit.h>

int main() {
  linea::Generator gen(1);
  linea::Tensor x = linea::randn({3, 4}, gen, linea::float64).requires_grad_();
  linea::Tensor y = linea::sum(x * x);
  y.backward();
  auto xs = x.grad().to_vector(), xv = x.to_vector();
  for (size_t i = 0; i < xv.size(); ++i) {
    if (std::abs(xs[i] - 2 * xv[i]) > 1e-12) {
      std::printf("consumer: FAILED: grad[%zu] = %g, expected %g\n", i, xs[i], 2 * xv[i]);
      return 1;
    }
  }

  // [[1, 2], [3, 4]] @ [[5, 6], [7, 8]] = [[19, 22], [43, 50]]
  linea::Tensor a = linea::from_vector(std::vector<double>{1, 2, 3, 4}, {2, 2});
  linea::Tensor b = linea::from_vector(std::vector<double>{5, 6, 7, 8}, {2, 2});
  if (linea::matmul(a, b).to_vector() != std::vector<double>{19, 22, 43, 50}) {
    std::printf("consumer: FAILED: matmul gave %s\n", linea::to_string(linea::matmul(a, b)).c_str());
    return 1;
  }
  const linea::dist::World& world = linea::dist::init();
  linea::Tensor c = a.clone();
  linea::dist::all_reduce(c);
  if (world.size != 1 || c.to_vector() != a.to_vector()) {
    std::printf("consumer: FAILED: a world of %d, all_reduce gave %s\n", world.size, linea::to_string(c).c_str());
    return 1;
  }

  // 16 random 16x16 images with random labels, fitted by a small MHLA ViT: the loss must fall.
  namespace vit = linea::models::vit;
  linea::manual_seed(1);
  auto model = std::make_shared<vit::ViT>(vit::ModelConfig{.image = 16, .patch = 4, .dim = 16, .depth = 1, .heads = 2});
  vit::Trainer trainer(model, {.steps = 20, .lr = 1e-2, .warmup = 2, .label_smoothing = 0});
  trainer.distribute();
  linea::Tensor images = linea::randn({16, 1, 16, 16}, gen), labels = linea::randint(0, 10, {16}, gen);
  const double first = trainer.train_step(images, labels).loss;
  double last = first;
  for (int i = 1; i < 20; ++i) last = trainer.train_step(images, labels).loss;
  if (!(last < first / 2)) {
    std::printf("consumer: FAILED: the ViT's loss went from %g to %g in 20 steps\n", first, last);
    return 1;
  }
  std::printf("consumer: ok (grad == 2x, matmul right, dist a world of one%s, ViT loss %.3f -> %.3f; CUDA device: %s)\n",
              linea::dist::built_with_mpi() ? " over MPI" : "", first, last, linea::cuda::is_available() ? "yes" : "no");
  return 0;
}
