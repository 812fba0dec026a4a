// dist without mpirun: a world of one where every collective is a no-op and DataParallel adds
// no hooks; and the data loader's shards, which together are exactly the unsharded batches.
#include <doctest/doctest.h>

#include <cstdlib>

#include <linea/dist/data_parallel.h>
#include <linea/linea.h>

#include "data/dataloader.h"

using namespace linea;
namespace dist = linea::dist;

// First in the file (doctest runs a file's cases in order): init() checks the environment only
// until it has joined.
TEST_CASE("init() refuses a bad LINEA_DIST_TIMEOUT or launcher world size, naming the variable and value") {
  for (const char* bad : {"abc", "0", "-5", "1e-9", "nan", "inf", "5s", "1e7"}) {
    ::setenv("LINEA_DIST_TIMEOUT", bad, 1);
    const std::string want = fmt::format("[env] LINEA_DIST_TIMEOUT='{}' is not allowed: expected a number of "
                                         "seconds from 0.1 to 1000000", bad);
    CHECK_THROWS_WITH_AS(dist::init(), doctest::Contains(want.c_str()), Error);
    CHECK_THROWS_WITH_AS(dist::timeout_seconds(), doctest::Contains(want.c_str()), Error);
  }
  ::setenv("LINEA_DIST_TIMEOUT", "0.5", 1);
  CHECK(dist::timeout_seconds() == 0.5);
  ::unsetenv("LINEA_DIST_TIMEOUT");
  CHECK(dist::timeout_seconds() == 300);
  for (const char* bad : {"abc", "0", "-2", "2x"}) {
    ::setenv("PMI_SIZE", bad, 1);
    const std::string want = fmt::format("[env] PMI_SIZE='{}' is not allowed", bad);
    CHECK_THROWS_WITH_AS(dist::init(), doctest::Contains(want.c_str()), Error);
  }
  ::unsetenv("PMI_SIZE");
}

TEST_CASE("without mpirun the world is one process and collectives change nothing") {
  const dist::World& w = dist::init();
  CHECK(w.size == 1);
  CHECK(w.rank == 0);
  CHECK(dist::is_main());
  Tensor t = arange(5).to(float32);
  dist::all_reduce(t, dist::ReduceOp::Mean);
  dist::broadcast(t);
  dist::barrier();
  CHECK(t.to_vector() == std::vector<double>{0, 1, 2, 3, 4});
  CHECK(dist::any(true));
  CHECK(dist::shard(7).begin == 0);
  CHECK(dist::shard(7).size == 7);
  CHECK_THROWS_WITH_AS(dist::all_reduce(zeros({2}, {int64}), dist::ReduceOp::Mean), doctest::Contains("mean needs"),
                       Error);
}

TEST_CASE("DataParallel in a world of one leaves backward alone") {
  nn::Linear lin(3, 2);
  dist::DataParallel dp(lin);
  CHECK(dp.num_buckets() == 0);
  sum(lin.forward(ones({4, 3}))).backward();
  const std::vector<double> g = lin.parameters()[0].grad().to_vector();
  dp.synchronize();
  CHECK(lin.parameters()[0].grad().to_vector() == g);
}

TEST_CASE("the shards of a data loader's batches are the unsharded batches, split in rank order") {
  const Tensor x = arange(40).to(float32).view({20, 2}), y = arange(20);
  data::DataLoaderOptions whole{.batch_size = 8, .seed = 3};
  data::DataLoader all(x, y, whole);
  data::DataLoaderOptions half0 = whole, half1 = whole;
  half0.shards = half1.shards = 2, half1.shard = 1;
  data::DataLoader s0(x, y, half0), s1(x, y, half1);
  CHECK(s0.batches_per_epoch() == all.batches_per_epoch());
  for (int64_t epoch : {0, 1}) {
    all.start_epoch(epoch), s0.start_epoch(epoch), s1.start_epoch(epoch);
    int64_t batches = 0;
    while (auto b = all.next()) {
      auto b0 = s0.next(), b1 = s1.next();
      REQUIRE((b0 && b1));
      CHECK(cat({b0->y, b1->y}, 0).to_vector() == b->y.to_vector());  // 8 = 4 + 4, the last 4 = 2 + 2
      CHECK(cat({b0->x, b1->x}, 0).to_vector() == b->x.to_vector());
      ++batches;
    }
    CHECK(batches == 3);
    CHECK_FALSE(s0.next());
  }
}

TEST_CASE("a batch that does not split evenly over the shards is refused") {
  const Tensor x = zeros({20, 2}), y = zeros({20}, {int64});
  data::DataLoaderOptions o{.batch_size = 8, .shards = 3};
  CHECK_THROWS_WITH_AS(data::DataLoader(x, y, o), doctest::Contains("do not split evenly over 3 shards"), Error);
  o.batch_size = 6;  // 20 = 3 x 6 + 2: the last batch of 2 cannot be split in 3
  CHECK_THROWS_WITH_AS(data::DataLoader(x, y, o), doctest::Contains("the last of 20 samples: 2"), Error);
  o.drop_last = true;
  CHECK_NOTHROW(data::DataLoader(x, y, o));
}
