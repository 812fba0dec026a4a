// A user program against an installed linea: autograd (y = sum(x * x) has dy/dx = 2x) and a
// matmul, which runs on OpenBLAS. Exit code 0 when both match hand-computed values.
#include <cmath>
#include <cstdio>

#include <linea/linea.h>

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
  std::printf("consumer: ok (grad == 2x, matmul right; CUDA device: %s)\n", linea::cuda::is_available() ? "yes" : "no");
  return 0;
}
