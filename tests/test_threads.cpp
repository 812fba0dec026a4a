// Kernels that call OpenBLAS start no threads once the OpenMP team exists. A BLAS call inside a
// parallel region whose if-clause is false (a team of one) runs OpenBLAS's own region as a nested
// team, whose thread libgomp creates and joins on every call: the char-GPT's weight gradients
// started 137 threads in 8 steps that way (blas.h, parallel_if). This file counts the threads the
// process starts by standing in for pthread_create, which libgomp calls through the dynamic linker.
#include <dlfcn.h>
#include <omp.h>
#include <pthread.h>

#include <atomic>

#include "helpers.h"

namespace {
std::atomic<int> g_started{0};
}

extern "C" int pthread_create(pthread_t* thread, const pthread_attr_t* attr, void* (*start)(void*), void* arg) {
  using Create = int (*)(pthread_t*, const pthread_attr_t*, void* (*)(void*), void*);
  static const auto real = reinterpret_cast<Create>(dlsym(RTLD_NEXT, "pthread_create"));
  ++g_started;
  return real(thread, attr, start, arg);
}

using namespace linea;

namespace {

// Threads started by f, run `calls` times after one warm-up call (which may start the team).
template <class F>
int threads_started(int calls, F&& f) {
  omp_set_num_threads(2);
  f();
  const int before = g_started.load();
  for (int i = 0; i < calls; ++i) f();
  return g_started.load() - before;
}

}  // namespace

TEST_CASE("the interposed pthread_create sees the threads OpenMP starts") {
  // Guards the tests below: if libgomp's calls bypassed the stand-in, they could not fail.
  const int before = g_started.load();
  int team = 0;
#pragma omp parallel num_threads(2)
  {
#pragma omp parallel num_threads(2)  // a nested team: inactive unless nesting is on
    {
#pragma omp atomic
      ++team;
    }
  }
  omp_set_max_active_levels(2);
#pragma omp parallel num_threads(2)
  {
#pragma omp parallel num_threads(2)
    {
#pragma omp atomic
      ++team;
    }
  }
  omp_set_max_active_levels(1);
  CHECK(team == 2 * 1 + 2 * 2);
  CHECK(g_started.load() > before);
}

TEST_CASE("a weight gradient on OpenBLAS starts no thread per call") {
  // aᵀ·b with K = 768: the char-GPT's dW products, which the direct kernel leaves to OpenBLAS.
  Generator g(3);
  const Tensor a = randn({768, 512}, g), b = randn({768, 128}, g);
  Tensor out;
  CHECK(threads_started(5, [&] { out = matmul(a.t(), b); }) == 0);
  const Tensor ref = matmul(a.to(DType::Float64).t(), b.to(DType::Float64));
  CHECK(testing::allclose(out.to(DType::Float64), ref, 1e-3, 1e-4));
}

TEST_CASE("softmax attention's tiled form on OpenBLAS starts no thread per call") {
  // float64 and below the kernels' parallel threshold (64·64·(100+16) < 2^20 multiply-adds), with
  // tiles large enough (64x64x100) for OpenBLAS to thread a product on its own.
  const Tensor q = testing::randn64({1, 1, 64, 100}, 1), k = testing::randn64({1, 1, 64, 100}, 2),
               v = testing::randn64({1, 1, 64, 16}, 3);
  CHECK(threads_started(3, [&] {
          Tensor o = nn::functional::softmax_attention(q, k, v, {.causal = true});
          sum(o).backward();
        }) == 0);
}
