// Shapes and sizes that come from users and files: a size that overflows int64 (even beside a 0
// dim, where the strides still overflow) or that no host can allocate is a linea::Error naming the
// shape, never undefined behaviour, a wrapped-around byte count or a crash.
#include <cstdint>
#include <limits>

#include "helpers.h"

using namespace linea;

namespace {
constexpr int64_t kBig = int64_t{1} << 62;
constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
constexpr int64_t kMin = std::numeric_limits<int64_t>::min();
}  // namespace

TEST_CASE("numel, contiguous_strides and checked_nbytes refuse sizes past int64") {
  CHECK(numel({0, int64_t{1} << 31, 4}) == 0);
  CHECK(numel({int64_t{1} << 31, int64_t{1} << 31}) == kBig);  // large but representable
  CHECK(contiguous_strides({0, 3, 4}) == Strides{12, 4, 1});
  CHECK_THROWS_WITH_AS(numel({kBig, 4}), doctest::Contains("(4611686018427387904, 4) is too large"), Error);
  CHECK_THROWS_WITH_AS(numel({int64_t{1} << 32, int64_t{1} << 32}), doctest::Contains("too large"), Error);
  // No element, but the stride of the first dim would be 2^64.
  CHECK_THROWS_WITH_AS(contiguous_strides({0, kBig, 4}), doctest::Contains("(0, 4611686018427387904, 4)"), Error);
  CHECK_THROWS_WITH_AS(numel({2, -3}), doctest::Contains("negative"), Error);

  CHECK(checked_nbytes({3, 5}, 8) == 120);
  CHECK(checked_nbytes({int64_t{1} << 60}, 4) == kBig);
  CHECK(checked_nbytes({int64_t{1} << 61}, 4) == std::nullopt);
  CHECK(checked_nbytes({kMax}, 2) == std::nullopt);
  CHECK(checked_nbytes({0, kBig, 4}, 1) == std::nullopt);
  CHECK(checked_nbytes({4, -1}, 1) == std::nullopt);
}

TEST_CASE("zeros / ones / empty of an oversized shape is a linea::Error naming the shape") {
  for (const Shape& shape : {Shape{kBig, 4}, Shape{int64_t{1} << 32, int64_t{1} << 32}, Shape{kMax},
                             Shape{0, kBig, 4}, Shape{int64_t{1} << 61, 2}}) {
    CAPTURE(shape_str(shape));
    CHECK_THROWS_WITH_AS(zeros(shape), doctest::Contains(shape_str(shape).c_str()), Error);
    CHECK_THROWS_WITH_AS(ones(shape), doctest::Contains(shape_str(shape).c_str()), Error);
    CHECK_THROWS_WITH_AS(empty(shape, DType::UInt8), doctest::Contains("[empty]"), Error);
  }
  CHECK_THROWS_AS(zeros({kMax}).narrow(0, 1 << 20, 4).contiguous(), Error);
  // Representable, but more than any host holds: the allocator's failure names the shape too.
  CHECK_THROWS_WITH_AS(zeros({int64_t{1} << 50}), doctest::Contains("(1125899906842624,) of float32"), Error);
  CHECK(zeros({0, int64_t{1} << 40}).numel() == 0);  // an empty tensor with representable strides is fine
}

TEST_CASE("as_strided, from_blob and reshape refuse sizes that wrap around") {
  Tensor base = zeros({4});
  // 2 * (INT64_MIN + 1) wraps to 2, which would look like a view inside the 4 elements.
  CHECK_THROWS_WITH_AS(base.as_strided({3}, {kMin + 1}, 0), doctest::Contains("[as_strided]"), Error);
  // INT64_MAX + INT64_MAX wraps to -2, "below" the 4 elements.
  CHECK_THROWS_WITH_AS(base.as_strided({2, 2}, {kMax, kMax}, 0), doctest::Contains("[as_strided]"), Error);
  CHECK(base.as_strided({0, 2}, {kMax, kMax}, 0).numel() == 0);  // an empty view touches nothing

  float buf[4] = {};
  CHECK_THROWS_WITH_AS(from_blob(buf, {kBig, 4}, DType::Float32), doctest::Contains("[from_blob]"), Error);
  CHECK_THROWS_AS(zeros({0}).reshape({kBig, 4}), Error);
  CHECK_THROWS_AS(zeros({0}).view({0, kBig, 4}), Error);
}
