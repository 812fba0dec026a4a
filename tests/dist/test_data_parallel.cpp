// DataParallel on 2+ ranks: rank 0's weights reach everyone; gradients come back as the mean
// over the ranks, with many buckets or one, with no_sync accumulation, and with a parameter only
// some ranks use.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include <linea/dist/data_parallel.h>
#include <linea/linea.h>

using namespace linea;
namespace dist = linea::dist;

namespace {

int R() { return dist::world().size; }  // a function: dist::init() runs in main
int rank() { return dist::world().rank; }

// Parameters of assorted sizes and both float dtypes, initialised differently on every rank.
class Toy : public nn::Module {
 public:
  Toy() : nn::Module("Toy") {
    Generator gen(100 + rank());
    const std::vector<Shape> shapes = {{3}, {1000}, {7, 5}, {257}, {64, 64}, {1}};
    for (size_t i = 0; i < shapes.size(); ++i)
      params.push_back(register_parameter("p" + std::to_string(i), randn(shapes[i], gen, i == 3 ? float64 : float32)));
  }
  // sum_i c_i * sum(p_i): the gradient of p_i is c_i everywhere.
  Tensor loss(const std::vector<double>& c, size_t skip = size_t(-1)) {
    Tensor total = zeros({}, {float64});
    for (size_t i = 0; i < params.size(); ++i)
      if (i != skip) total = total + sum(params[i]).to(float64) * c[i];
    return total;
  }
  std::vector<Tensor> params;
};

std::vector<double> coefficients(int r) {
  std::vector<double> c;
  for (int i = 0; i < 6; ++i) c.push_back((r + 1) * (i + 1) * 0.5);
  return c;
}

// The mean of coefficients(r) over the ranks, element i.
double mean_coefficient(size_t i) {
  double s = 0;
  for (int r = 0; r < R(); ++r) s += coefficients(r)[i];
  return s / R();
}

bool all_equal(const Tensor& t, double v) {
  for (double x : t.to_vector())
    if (x != doctest::Approx(v)) return false;
  return true;
}

// Every rank's tensor equals rank 0's (the same answer on every rank).
bool same_everywhere(const Tensor& t) {
  Tensor mine = t.detach().contiguous().clone(), root = mine.clone();
  dist::broadcast(root, 0);
  return !dist::any(max(abs(mine.to(float64) - root.to(float64))).item() != 0.0);
}

}  // namespace

TEST_CASE("DataParallel starts every rank from rank 0's parameters") {
  Toy toy;
  CHECK(!same_everywhere(toy.params[1]));  // made differently on each rank
  dist::DataParallel dp(toy);
  for (const Tensor& p : toy.params) CHECK(same_everywhere(p));
}

TEST_CASE("gradients are averaged over the ranks, across many small buckets or one large one") {
  for (int64_t bucket_bytes : {int64_t(256), int64_t(5000), int64_t(25) << 20}) {
    Toy toy;
    dist::DataParallel dp(toy, {.bucket_bytes = bucket_bytes});
    if (bucket_bytes == 256) CHECK(dp.num_buckets() == 6);  // each parameter alone (float32/float64 split too)
    if (bucket_bytes == (25 << 20)) CHECK(dp.num_buckets() == 3);  // dtype changes twice in registration order
    for (int step = 0; step < 2; ++step) {
      toy.loss(coefficients(rank())).backward();
      dp.synchronize();
      for (size_t i = 0; i < toy.params.size(); ++i)
        CHECK_MESSAGE(all_equal(toy.params[i].grad(), mean_coefficient(i)), "bucket_bytes " << bucket_bytes << " p" << i);
      toy.zero_grad();
    }
    CHECK(dp.stats().steps == 2);
  }
}

TEST_CASE("no_sync accumulates locally; the next synchronized backward reduces the sums") {
  Toy toy;
  dist::DataParallel dp(toy, {.bucket_bytes = 4096});
  {
    auto guard = dp.no_sync();
    toy.loss(coefficients(rank())).backward();
    CHECK(all_equal(toy.params[2].grad(), coefficients(rank())[2]));  // still this rank's own
    CHECK_THROWS_WITH_AS(dp.synchronize(), doctest::Contains("inside no_sync"), Error);
  }
  toy.loss(coefficients(rank())).backward();
  dp.synchronize();
  for (size_t i = 0; i < toy.params.size(); ++i) CHECK(all_equal(toy.params[i].grad(), 2 * mean_coefficient(i)));
}

TEST_CASE("a parameter that one rank does not use contributes zeros there") {
  Toy toy;
  dist::DataParallel dp(toy, {.bucket_bytes = 4096});
  toy.loss(coefficients(rank()), rank() == 0 ? 4 : size_t(-1)).backward();  // rank 0 skips p4
  dp.synchronize();
  CHECK(all_equal(toy.params[4].grad(), (mean_coefficient(4) * R() - coefficients(0)[4]) / R()));
  CHECK(all_equal(toy.params[0].grad(), mean_coefficient(0)));
}

TEST_CASE("two backwards without no_sync are an error, not a silent double reduction") {
  Toy toy;
  dist::DataParallel dp(toy);
  toy.loss(coefficients(rank())).backward();
  CHECK_THROWS_WITH_AS(toy.loss(coefficients(rank())).backward(), doctest::Contains("second backward"), Error);
  dp.synchronize();  // what was started still completes on every rank
}
