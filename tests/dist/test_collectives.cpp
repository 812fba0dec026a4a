// all_reduce, broadcast, barrier and any() between the ranks of the job (run on 2 or more ranks:
// every expected value is computed for the world size at hand).
#include <doctest/doctest.h>

#include <numeric>
#include <vector>

#include <linea/dist/dist.h>
#include <linea/linea.h>

using namespace linea;
namespace dist = linea::dist;

namespace {

int R() { return dist::world().size; }  // a function: dist::init() runs in main
int rank() { return dist::world().rank; }

// Sizes on both sides of what one MPI message or one shared-memory fragment carries.
const std::vector<int64_t> kSizes = {1, 7, 1000, 65537, 300000};

// Element i on rank r: (r + 1) * (i % 13), as `dtype`.
Tensor rank_values(int64_t n, int r, DType dtype) {
  std::vector<double> v(n);
  for (int64_t i = 0; i < n; ++i) v[i] = (r + 1) * static_cast<double>(i % 13);
  return from_vector(v, {n}).to(dtype);
}

}  // namespace

TEST_CASE("all_reduce sums float32, float64 and int64 tensors of every size") {
  for (DType dt : {float32, float64, int64}) {
    for (int64_t n : kSizes) {
      Tensor t = rank_values(n, rank(), dt);
      dist::all_reduce(t);
      const double factor = R() * (R() + 1) / 2.0;  // sum of (r + 1) over the ranks
      const std::vector<double> got = t.to_vector();
      int64_t wrong = 0;
      for (int64_t i = 0; i < n; ++i) wrong += got[i] != factor * static_cast<double>(i % 13);
      CHECK_MESSAGE(wrong == 0, dtype_name(dt) << " n=" << n << ": " << wrong << " wrong elements");
      CHECK(t.dtype() == dt);
    }
  }
}

TEST_CASE("all_reduce mean divides the sum by the world size; integer means are refused") {
  for (DType dt : {float32, float64}) {
    Tensor t = rank_values(1000, rank(), dt);
    dist::all_reduce(t, dist::ReduceOp::Mean);
    const std::vector<double> got = t.to_vector();
    for (int64_t i : {0, 1, 12, 999}) CHECK(got[i] == doctest::Approx((R() + 1) / 2.0 * double(i % 13)));
  }
  CHECK_THROWS_WITH_AS(dist::all_reduce(zeros({3}, {int64}), dist::ReduceOp::Mean),
                       doctest::Contains("mean needs a floating tensor, got int64"), Error);
}

TEST_CASE("all_reduce of bool is logical or, of uint8 wraps around") {
  // bool: element i is true on rank i % R() only, and element R() on no rank.
  std::vector<double> mine(R() + 1, 0.0);
  mine[rank()] = 1;
  Tensor b = from_vector(mine, {R() + 1}).to(boolean);
  dist::all_reduce(b);
  std::vector<double> want(R() + 1, 1.0);
  want[R()] = 0;
  CHECK(b.to_vector() == want);

  Tensor u = full({300}, 200, {uint8});
  dist::all_reduce(u);
  CHECK(u.to_vector()[299] == double((200 * R()) % 256));
}

TEST_CASE("broadcast gives every rank the root's tensor, for every dtype and root") {
  for (int root = 0; root < R(); ++root) {
    for (DType dt : {float32, float64, int64, uint8}) {
      for (int64_t n : kSizes) {
        Tensor t = rank_values(n, rank(), dt);
        dist::broadcast(t, root);
        CHECK_MESSAGE(t.to_vector() == rank_values(n, root, dt).to_vector(), dtype_name(dt) << " n=" << n);
      }
    }
    Tensor b = full({5}, rank() == root ? 1.0 : 0.0, {boolean});
    dist::broadcast(b, root);
    CHECK(b.to_vector() == std::vector<double>(5, 1.0));
  }
  CHECK_THROWS_WITH_AS(dist::broadcast(zeros({2}), R()), doctest::Contains("root 2 is not a rank"), Error);
}

TEST_CASE("async all_reduces may overlap and finish in any order of waits") {
  std::vector<Tensor> ts;
  std::vector<dist::Work> works;
  for (int i = 0; i < 4; ++i) {
    ts.push_back(full({1000 * (i + 1)}, double(i + rank()), {float64}));
    works.push_back(dist::all_reduce_async(ts.back()));
  }
  for (int i = 3; i >= 0; --i) works[i].wait();
  const double rank_sum = R() * (R() - 1) / 2.0;
  for (int i = 0; i < 4; ++i) CHECK(ts[i].to_vector()[0] == R() * i + rank_sum);
}

TEST_CASE("barrier, any and shard") {
  dist::barrier();
  CHECK(dist::any(rank() == R() - 1));
  CHECK_FALSE(dist::any(false));
  // Shards of 10 tile [0, 10) in rank order.
  std::vector<double> mine(R(), 0.0);
  mine[rank()] = double(dist::shard(10).size);
  Tensor sizes = from_vector(mine, {R()});
  dist::all_reduce(sizes);
  CHECK(sum(sizes).item() == 10);
  CHECK(dist::shard(10).begin == 10 * rank() / R());
}

TEST_CASE("bad tensors are refused before any message is sent") {
  Tensor t = zeros({4, 4}).t();
  CHECK_THROWS_WITH_AS(dist::all_reduce(t), doctest::Contains("needs a contiguous tensor, got shape (4, 4) with strides (1, 4)"), Error);
  CHECK_THROWS_WITH_AS(dist::broadcast(Tensor()), doctest::Contains("undefined"), Error);
}
