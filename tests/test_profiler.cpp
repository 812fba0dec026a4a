// linea::Profiler (tensor/profiler.h): the kernels of a tiny model's training step, counted per
// phase; and the host caching allocator (tensor/cpu/cpu_allocator.h): a repeated training step
// takes no new block from the C library, and the cache gives memory back on demand.
#include <string>

#include "helpers.h"

using namespace linea;

namespace {

// A 2-layer MLP, 8 -> 16 -> 4, trained with AdamW on one fixed batch of 32.
struct Mlp {
  std::shared_ptr<nn::Linear> l1 = std::make_shared<nn::Linear>(8, 16), l2 = std::make_shared<nn::Linear>(16, 4);
  nn::AdamW opt{{{"l1.weight", l1->weight}, {"l1.bias", l1->bias}, {"l2.weight", l2->weight}, {"l2.bias", l2->bias}}};
  Tensor x, y;
  Mlp() {
    Generator gen(3);
    x = randn({32, 8}, gen);
    y = randint(0, 4, {32}, gen);
  }
  void step() {
    Tensor loss;
    {
      Profiler::Scope s("forward");
      loss = nn::cross_entropy(l2->forward(relu(l1->forward(x))), y);
    }
    {
      Profiler::Scope s("backward");
      loss.backward();
    }
    Profiler::Scope s("update");
    opt.step();
    opt.zero_grad();
  }
};

const ProfileRow* find(const std::vector<ProfileRow>& rows, const std::string& phase, const std::string& op) {
  for (const ProfileRow& r : rows)
    if (r.phase == phase && r.op == op) return &r;
  return nullptr;
}

}  // namespace

TEST_CASE("the profile of a 2-layer MLP step has exactly its matmuls, per phase") {
  Mlp m;
  m.step();
  Profiler::start();
  m.step();
  Profiler::stop();
  const auto rows = Profiler::rows();
  // Forward: x W1ᵀ and h W2ᵀ. Backward: dW2 and dh through layer 2, only dW1 through layer 1
  // (x needs no gradient).
  const ProfileRow* fwd = find(rows, "forward", "gemm");
  const ProfileRow* bwd = find(rows, "backward", "gemm");
  REQUIRE(fwd != nullptr);
  REQUIRE(bwd != nullptr);
  CHECK(fwd->calls == 2);
  CHECK(bwd->calls == 3);
  CHECK(fwd->flops == doctest::Approx(2.0 * 32 * 8 * 16 + 2.0 * 32 * 16 * 4));
  CHECK(bwd->flops == doctest::Approx(2.0 * 16 * 32 * 4 + 2.0 * 32 * 4 * 16 + 2.0 * 16 * 32 * 8));
  // No bias add (each gemm adds its bias), one add in cross_entropy's target check (below 0 + at
  // or above the class count, nn/loss.cpp), the relu and its gradient, and one fused AdamW step for
  // all four parameters.
  REQUIRE(find(rows, "forward", "binary.add") != nullptr);
  CHECK(find(rows, "forward", "binary.add")->calls == 1);
  CHECK(find(rows, "forward", "unary.relu")->calls == 1);
  REQUIRE(find(rows, "backward", "binary.relu_backward") != nullptr);
  REQUIRE(find(rows, "update", "adamw_step") != nullptr);
  CHECK(find(rows, "update", "adamw_step")->calls == 1);
  for (const ProfileRow& r : rows) CHECK(r.phase != "step");  // every kernel ran inside a scope

  // Once stopped, nothing more is recorded.
  m.step();
  CHECK(Profiler::rows().size() == rows.size());
  CHECK(find(Profiler::rows(), "forward", "gemm")->calls == 2);

  const std::string table = profile_table(rows, 1e-3, {.gflops = 100, .gbps = 10});
  CHECK(table.find("-- forward") != std::string::npos);
  CHECK(table.find("GFLOP/s") != std::string::npos);
  CHECK(table.find("(outside kernels)") != std::string::npos);
}

TEST_CASE("grouped by shape, the MLP's gemm rows name each product's operands and layout") {
  Mlp m;
  m.step();
  Profiler::start(/*by_shape=*/true);
  m.step();
  Profiler::stop();
  const auto rows = Profiler::rows();
  CHECK(find(rows, "forward", "gemm") == nullptr);
  // Forward x·W1ᵀ (W1 is [16, 8], read transposed) and h·W2ᵀ; backward dW2 = dyᵀ·h (dy read
  // transposed) with the bias gradient's column sums of dy in the same row, dh = dy·W2 (W2 as
  // stored), and dW1 = dhᵀ·x with the sums of dh.
  REQUIRE(find(rows, "forward", "gemm 1x[32x8]·[8x16]^T") != nullptr);
  CHECK(find(rows, "forward", "gemm 1x[32x8]·[8x16]^T")->flops == doctest::Approx(2.0 * 32 * 8 * 16));
  CHECK(find(rows, "forward", "gemm 1x[32x16]·[16x4]^T") != nullptr);
  CHECK(find(rows, "backward", "gemm 1x[4x32]^T·[32x16] + column sums") != nullptr);
  CHECK(find(rows, "backward", "gemm 1x[32x4]·[4x16]") != nullptr);
  CHECK(find(rows, "backward", "gemm 1x[16x32]^T·[32x8] + column sums") != nullptr);
  const std::string table = profile_table(rows, 1e-3, {.gflops = 100, .gbps = 10});
  CHECK(table.find("gemm 1x[32x16]·[16x4]^T") != std::string::npos);
  Profiler::start();  // a plain start groups by op again
  m.step();
  Profiler::stop();
  CHECK(find(Profiler::rows(), "forward", "gemm") != nullptr);
}

TEST_CASE("after two warm-up steps, an identical training step takes no block from the C library") {
  cpu::empty_host_cache();
  const auto s0 = cpu::host_memory_stats();
  Mlp m;
  // Step 1 makes AdamW's state, partly out of blocks its own activations just gave back, so step
  // 2 may still need a few new ones; from then on the same blocks go round.
  m.step();
  m.step();
  const auto s2 = cpu::host_memory_stats();
  m.step();
  const auto s3 = cpu::host_memory_stats();
  CHECK(s2.system_allocs > s0.system_allocs);
  CHECK(s3.system_allocs == s2.system_allocs);
  CHECK(s3.system_frees == s2.system_frees);
  CHECK(s3.cache_hits > s2.cache_hits);
  CHECK(s3.allocated == s2.allocated);  // nothing leaks from one step to the next
}

TEST_CASE("the host cache gives its memory back: empty_host_cache and the limit") {
  cpu::empty_host_cache();
  CHECK(cpu::host_memory_stats().cached == 0);
  { Tensor t = empty({1 << 16}); }  // 256 KiB, freed into the cache
  auto s = cpu::host_memory_stats();
  CHECK(s.cached >= (std::size_t(1) << 18));
  cpu::empty_host_cache();
  const auto e = cpu::host_memory_stats();
  CHECK(e.cached == 0);
  CHECK(e.system_frees > s.system_frees);

  // With a limit of 0 every free goes straight back; a request of the same size is a new block.
  const std::size_t limit = s.cache_limit;
  cpu::set_host_cache_limit(0);
  { Tensor t = empty({1 << 16}); }
  s = cpu::host_memory_stats();
  CHECK(s.cached == 0);
  { Tensor t = empty({1 << 16}); }
  CHECK(cpu::host_memory_stats().system_allocs == s.system_allocs + 1);
  cpu::set_host_cache_limit(limit);

  // Blocks of 64 MiB and more are never cached.
  s = cpu::host_memory_stats();
  { Tensor t = empty({int64_t(16) << 20}); }  // 64 MiB
  CHECK(cpu::host_memory_stats().cached == s.cached);
  CHECK(cpu::host_memory_stats().system_frees == s.system_frees + 1);

  // A size class holds at most 12.5% more than asked from 1 MiB up; reuse is within the class.
  { Tensor t = empty({(3 << 20) / 4 - 256}); }  // 3 MiB - 1 KiB: the 3 MiB class (256 KiB steps)
  s = cpu::host_memory_stats();
  { Tensor t = empty({(3 << 20) / 4 - 128}); }  // 512 bytes more: the same class
  CHECK(cpu::host_memory_stats().system_allocs == s.system_allocs);
  CHECK(cpu::host_memory_stats().cache_hits == s.cache_hits + 1);
}
