// Views and copies: storage sharing, geometry, when reshape/contiguous copy, gradients, errors.
// Their float64 gradchecks are registry cases (check/ops_shape.cpp), run by ctest check_gradcheck.
#include "helpers.h"

using namespace linea;
using linea::testing::allclose;
using linea::testing::randn64;

namespace {

// 0, 1, ..., n-1 as float64 in the given shape.
Tensor iota(Shape shape) {
  std::vector<double> v(static_cast<size_t>(numel(shape)));
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<double>(i);
  return from_vector(v, shape);
}

std::vector<int64_t> sizes_along(const std::vector<Tensor>& parts, int64_t dim) {
  std::vector<int64_t> s;
  for (const Tensor& p : parts) s.push_back(p.shape()[dim]);
  return s;
}

}  // namespace

TEST_CASE("views share storage with their base") {
  Tensor x = iota({3, 4});
  Tensor v = x.view({4, 3});
  CHECK(v.storage() == x.storage());
  backend(Device::cpu()).fill(v.select(0, 1), 7.0);  // v's row 1 = x's elements 3, 4, 5
  CHECK(x.to_vector() == std::vector<double>{0, 1, 2, 7, 7, 7, 6, 7, 8, 9, 10, 11});

  Tensor t = x.t();
  CHECK(t.storage() == x.storage());
  backend(Device::cpu()).fill(t.select(0, 0), -1.0);  // t's row 0 is x's column 0
  for (int64_t i = 0; i < 3; ++i) CHECK(x.at({i, 0}) == -1.0);

  for (const Tensor& w : {x.permute({1, 0}), x.unsqueeze(0), x.expand({2, 3, 4}), x.narrow(1, 1, 2),
                          x.slice(0, 0, 3, 2), x.select(1, 3), x.flatten(), x.unflatten(1, {2, 2}), x.squeeze(),
                          x.chunk(2, 1)[1], x.split(1, 0)[2]})
    CHECK(w.storage() == x.storage());
}

TEST_CASE("view geometry: shapes, strides, offsets") {
  Tensor x = iota({2, 3, 4});
  CHECK(x.strides() == Strides{12, 4, 1});

  Tensor p = x.permute({2, 0, 1});
  CHECK(p.shape() == Shape{4, 2, 3});
  CHECK(p.strides() == Strides{1, 12, 4});
  CHECK(p.at({3, 1, 2}) == x.at({1, 2, 3}));
  CHECK(x.transpose(0, -1).strides() == Strides{1, 4, 12});

  Tensor s = x.slice(2, 1, 4, 2);  // columns 1 and 3
  CHECK(s.shape() == Shape{2, 3, 2});
  CHECK(s.strides() == Strides{12, 4, 2});
  CHECK(s.offset() == 1);
  CHECK(s.at({1, 2, 1}) == 23.0);
  CHECK(x.slice(2, -3, 100).shape() == Shape{2, 3, 3});  // Python-style clamping
  CHECK(x.slice(2, -3, 100).offset() == 1);
  CHECK(x.slice(1, 2, 1).shape() == Shape{2, 0, 4});  // end before start: empty

  Tensor sel = x.select(1, -1);
  CHECK(sel.shape() == Shape{2, 4});
  CHECK(sel.strides() == Strides{12, 1});
  CHECK(sel.offset() == 8);
  CHECK(x.narrow(0, 1, 1).offset() == 12);
  CHECK(x.narrow(2, -2, 2).offset() == 2);

  Tensor u = x.unsqueeze(1);
  CHECK(u.shape() == Shape{2, 1, 3, 4});
  CHECK(u.is_contiguous());
  CHECK(x.unsqueeze(-1).shape() == Shape{2, 3, 4, 1});
  CHECK(u.squeeze(1).shape() == Shape{2, 3, 4});
  CHECK(u.squeeze(0).shape() == Shape{2, 1, 3, 4});  // not a size-1 dim: left alone, like PyTorch
  CHECK(iota({1, 3, 1}).squeeze().shape() == Shape{3});

  Tensor e = iota({3, 1}).expand({2, 3, 4});
  CHECK(e.strides() == Strides{0, 1, 0});
  CHECK(e.at({1, 2, 3}) == 2.0);
  CHECK(iota({3, 1}).expand({-1, 5}).shape() == Shape{3, 5});

  CHECK(x.flatten(1).shape() == Shape{2, 12});
  CHECK(x.flatten().shape() == Shape{24});
  CHECK(x.flatten(0, 1).shape() == Shape{6, 4});
  CHECK(scalar(3.0).flatten().shape() == Shape{1});
  CHECK(x.unflatten(2, {2, -1}).shape() == Shape{2, 3, 2, 2});
  CHECK(x.view({-1, 6}).shape() == Shape{4, 6});
}

TEST_CASE("contiguous() returns the same handle only when already contiguous") {
  Tensor x = iota({3, 4});
  CHECK(x.contiguous().same(x));
  Tensor xt = x.t();
  Tensor c = xt.contiguous();
  CHECK_FALSE(c.same(xt));
  CHECK(c.storage() != x.storage());
  CHECK(c.is_contiguous());
  CHECK(c.to_vector() == std::vector<double>{0, 4, 8, 1, 5, 9, 2, 6, 10, 3, 7, 11});
  Tensor k = x.clone();  // clone always copies
  CHECK(k.storage() != x.storage());
  CHECK(k.to_vector() == x.to_vector());
}

TEST_CASE("reshape views when it can and copies when it must") {
  Tensor x = iota({2, 3, 4});
  CHECK(x.reshape({4, 6}).storage() == x.storage());
  Tensor r = x.transpose(0, 2).reshape({-1});
  CHECK(r.storage() != x.storage());
  CHECK(r.at({1}) == 12.0);  // x[0,0,0], x[1,0,0], ...

  // Non-contiguous tensors can still be viewed inside their contiguous chunks.
  Tensor s = x.slice(2, 0, 2);  // strides (12, 4, 1), shape (2, 3, 2): dims 0 and 1 merge
  CHECK(s.view({6, 2}).strides() == Strides{4, 1});
  CHECK(s.view({2, 3, 2, 1}).storage() == x.storage());
  CHECK(x.transpose(0, 1).view({3, 2, 2, 2}).strides() == Strides{4, 12, 2, 1});
  CHECK(x.expand({5, 2, 3, 4}).view({5, 6, 4}).strides() == Strides{0, 4, 1});
  CHECK_THROWS_WITH_AS(s.view({12}), doctest::Contains("reshape()"), linea::Error);
  CHECK_THROWS_WITH_AS(x.transpose(0, 2).view({-1}), doctest::Contains("[view]"), linea::Error);
  CHECK(s.reshape({12}).to_vector() == std::vector<double>{0, 1, 4, 5, 8, 9, 12, 13, 16, 17, 20, 21});
}

TEST_CASE("chunk and split sizes, with remainders") {
  Tensor x = iota({10, 3});
  CHECK(sizes_along(x.chunk(3), 0) == std::vector<int64_t>{4, 4, 2});
  CHECK(sizes_along(x.chunk(4), 0) == std::vector<int64_t>{3, 3, 3, 1});
  CHECK(sizes_along(x.chunk(5), 0) == std::vector<int64_t>{2, 2, 2, 2, 2});
  CHECK(sizes_along(x.chunk(20), 0).size() == 10);
  CHECK(sizes_along(x.chunk(2, -1), 1) == std::vector<int64_t>{2, 1});
  CHECK(sizes_along(x.split(4), 0) == std::vector<int64_t>{4, 4, 2});
  CHECK(sizes_along(x.split(10), 0) == std::vector<int64_t>{10});
  CHECK(sizes_along(x.split(1, 1), 1) == std::vector<int64_t>{1, 1, 1});
  std::vector<Tensor> parts = x.split(4);
  CHECK(parts[2].offset() == 24);
  CHECK(parts[2].at({1, 2}) == 29.0);
}

TEST_CASE("to(dtype) converts, round-trips and carries the gradient back") {
  Tensor x = from_vector<double>({1.5, -2.25, 3.0, 2.75, -2.75}, {5});
  Tensor f = x.to(float32);
  CHECK(f.dtype() == DType::Float32);
  CHECK(f.to(float64).to_vector() == x.to_vector());  // exactly representable in float32
  CHECK(x.to(int64).to_vector() == std::vector<double>{1, -2, 3, 2, -2});  // truncation
  CHECK(x.to(float64).same(x));
  CHECK(x.to(Device::cpu()).same(x));

  Tensor leaf = randn64({2, 3}, 1);
  Tensor y = leaf.to(float32);
  CHECK(y.requires_grad());
  y.backward(full({2, 3}, 2.0, float32));
  CHECK(leaf.grad().dtype() == DType::Float64);
  CHECK(leaf.grad().to_vector() == std::vector<double>(6, 2.0));
  CHECK_FALSE(leaf.to(int64).requires_grad());  // integers carry no gradient
}

TEST_CASE("to(Device): CUDA without a backend is a clear error") {
  Tensor x = randn64({2, 3}, 2);
  if (!cuda::is_available()) {
    CHECK_THROWS_WITH_AS(x.to(Device::cuda()), doctest::Contains("CUDA"), linea::Error);
  } else {
    Tensor g = x.to(Device::cuda());
    CHECK(g.device() == Device::cuda());
    CHECK(g.to(Device::cpu()).to_vector() == x.to_vector());
    sum(g).backward();
    CHECK(x.grad().device() == Device::cpu());
    CHECK(x.grad().to_vector() == std::vector<double>(6, 1.0));
  }
}

TEST_CASE("contiguous() of a contiguous tensor adds no graph node") {
  Tensor x = randn64({2, 3}, 3);
  Tensor c = x.contiguous();
  CHECK(c.same(x));
  CHECK(c.is_leaf());
}

TEST_CASE("view errors name the op") {
  Tensor x = iota({2, 3, 4});
  CHECK_THROWS_WITH_AS(x.view({-1, -1}), doctest::Contains("[view]"), linea::Error);
  CHECK_THROWS_WITH_AS(x.view({5, 5}), doctest::Contains("[view]"), linea::Error);
  CHECK_THROWS_WITH_AS(x.view({-1, 5}), doctest::Contains("[view]"), linea::Error);
  CHECK_THROWS_WITH_AS(x.reshape({7, -1}), doctest::Contains("[reshape]"), linea::Error);
  CHECK_THROWS_WITH_AS(x.reshape({-2, 12}), doctest::Contains("[reshape]"), linea::Error);
  CHECK_THROWS_WITH_AS(x.permute({0, 1}), doctest::Contains("[permute]"), linea::Error);
  CHECK_THROWS_WITH_AS(x.permute({0, 1, 1}), doctest::Contains("[permute]"), linea::Error);
  CHECK_THROWS_WITH_AS(x.permute({0, 1, 3}), doctest::Contains("[permute]"), linea::Error);
  CHECK_THROWS_WITH_AS(x.transpose(0, 3), doctest::Contains("[transpose]"), linea::Error);
  CHECK_THROWS_WITH_AS(x.t(), doctest::Contains("[t]"), linea::Error);
  CHECK_THROWS_WITH_AS(x.unsqueeze(4), doctest::Contains("[unsqueeze]"), linea::Error);
  CHECK_THROWS_WITH_AS(x.squeeze(-4), doctest::Contains("[squeeze]"), linea::Error);
  CHECK_THROWS_WITH_AS(x.expand({2, 5, 4}), doctest::Contains("[expand]"), linea::Error);
  CHECK_THROWS_WITH_AS(x.expand({3, 4}), doctest::Contains("[expand]"), linea::Error);
  CHECK_THROWS_WITH_AS(x.expand({-1, 2, 3, 4}), doctest::Contains("[expand]"), linea::Error);
  CHECK_THROWS_WITH_AS(x.select(1, 3), doctest::Contains("[select] index 3 out of range for dim 1 of size 3"),
                       linea::Error);
  CHECK_THROWS_WITH_AS(x.select(0, -3), doctest::Contains("[select]"), linea::Error);
  CHECK_THROWS_WITH_AS(x.select(3, 0), doctest::Contains("[select]"), linea::Error);
  CHECK_THROWS_WITH_AS(x.narrow(2, 2, 3), doctest::Contains("[narrow]"), linea::Error);
  CHECK_THROWS_WITH_AS(x.narrow(2, 0, -1), doctest::Contains("[narrow]"), linea::Error);
  CHECK_THROWS_WITH_AS(x.slice(0, 0, 2, 0), doctest::Contains("[slice]"), linea::Error);
  CHECK_THROWS_WITH_AS(x.slice(0, 0, 2, -1), doctest::Contains("[slice]"), linea::Error);
  CHECK_THROWS_WITH_AS(x.flatten(2, 1), doctest::Contains("[flatten]"), linea::Error);
  CHECK_THROWS_WITH_AS(x.unflatten(1, {2, 2}), doctest::Contains("[unflatten]"), linea::Error);
  CHECK_THROWS_WITH_AS(x.unflatten(1, {}), doctest::Contains("[unflatten]"), linea::Error);
  CHECK_THROWS_WITH_AS(x.chunk(0), doctest::Contains("[chunk]"), linea::Error);
  CHECK_THROWS_WITH_AS(x.split(0, 1), doctest::Contains("[split]"), linea::Error);
  CHECK_THROWS_WITH_AS(x.split(1, 5), doctest::Contains("[split]"), linea::Error);
}
