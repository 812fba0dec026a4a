// Tensor's math members, libtorch's spellings (x.sum(1), x.mm(w), x += y): declared in
// tensor/tensor.h, defined here. Each method is the free function of the same name (autograd/ops_*.h)
// or a composition of them, so there is one implementation and the gradient is the free function's.
//
// In place: x op= y computes the op out of place and writes the result into x's storage, then
// counts a new version of that storage. When the op records a node, the node reads a copy of x,
// not the storage it overwrites; and x takes the node's Meta, so it joins the graph as libtorch's
// x does. Backward refuses a node whose inputs (or output, where its backward keeps it) were
// overwritten since it ran (autograd/engine.cpp, check_versions): a stale value is an error, never
// a wrong gradient.
#include <cmath>
#include <functional>
#include <limits>

#include "linea/autograd/function.h"
#include "linea/autograd/ops_elementwise.h"
#include "linea/autograd/ops_index.h"
#include "linea/autograd/ops_matmul.h"
#include "linea/autograd/ops_reduce.h"
#include "linea/tensor/backend.h"
#include "linea/tensor/creation.h"
#include "linea/tensor/error.h"

namespace linea {

namespace {

// A 0-d tensor of value v in x's dtype and device (a double operand, as the operators take it).
Tensor like(const Tensor& x, double v) { return scalar(v, Options(x.dtype(), x.device())); }

// What every in-place op checks: under grad mode, a leaf that requires grad must not change (its
// gradient would describe a value it no longer has), nor a view in a graph (the graph of the
// tensor it views would not learn of the write); and no two elements may share memory.
void check_writable(const char* op, const Tensor& x) {
  LINEA_CHECK(x.defined(), "[{}] the tensor is undefined", op);
  if (autograd::grad_enabled() && x.requires_grad()) {
    LINEA_CHECK(!x.is_leaf(), "[{}] a leaf tensor that requires grad (shape {}) is being used in an in-place "
                "operation; update it under NoGradGuard, as optimizers do", op, shape_str(x.shape()));
    LINEA_CHECK(!x.grad_fn()->is_view, "[{}] this tensor is a view (made by {}) that is part of a graph, and "
                "linea does not carry an in-place write into the graph of the tensor it views; write the "
                "result out of place (x = x + y)", op, x.grad_fn()->op);
  }
  for (int64_t d = 0; d < x.dim(); ++d)
    LINEA_CHECK(x.strides()[d] != 0 || x.shape()[d] <= 1, "[{}] cannot write in place into a tensor whose "
                "elements share memory (stride 0 in dim {} of shape {}, an expand()ed view); clone() it first",
                op, d, shape_str(x.shape()));
}

// x <- f(x) in x's storage, b being f's tensor operand (undefined for a double one).
Tensor& in_place(const char* op, Tensor& x, const Tensor& b, const std::function<Tensor(const Tensor&)>& f) {
  check_writable(op, x);
  const bool records = autograd::needs_grad({x, b});
  const Tensor out = f(records ? x.clone() : x);
  LINEA_CHECK(out.shape() == x.shape(), "[{}] the result has shape {} but the tensor has shape {}: an in-place "
              "op cannot broadcast the tensor it writes", op, shape_str(out.shape()), shape_str(x.shape()));
  LINEA_CHECK(out.dtype() == x.dtype(), "[{}] the result's dtype {} cannot be written into this {} tensor in "
              "place; convert it with to() first", op, out.dtype(), x.dtype());
  backend(x.device()).copy(out, x);
  ++x.storage()->version;
  if (records) x.impl().autograd = out.impl().autograd;
  return x;
}

// zero_ and fill_ cut the tensor off from any gradient, so they refuse a tensor that requires
// grad under grad mode (under NoGradGuard, e.g. for a parameter's initialisation, they write).
Tensor& fill(const char* op, Tensor& x, double value) {
  check_writable(op, x);
  LINEA_CHECK(!(autograd::grad_enabled() && x.requires_grad()), "[{}] the tensor requires grad; fill it under "
              "NoGradGuard", op);
  return in_place(op, x, Tensor(), [value](const Tensor& t) { return full_like(t, value); });
}

}  // namespace

// ---- in place ----

Tensor& Tensor::operator+=(const Tensor& b) {
  return in_place("operator+=", *this, b, [&](const Tensor& t) { return t + b; });
}
Tensor& Tensor::operator-=(const Tensor& b) {
  return in_place("operator-=", *this, b, [&](const Tensor& t) { return t - b; });
}
Tensor& Tensor::operator*=(const Tensor& b) {
  return in_place("operator*=", *this, b, [&](const Tensor& t) { return t * b; });
}
Tensor& Tensor::operator/=(const Tensor& b) {
  return in_place("operator/=", *this, b, [&](const Tensor& t) { return t / b; });
}
Tensor& Tensor::operator+=(double b) {
  return in_place("operator+=", *this, Tensor(), [b](const Tensor& t) { return t + b; });
}
Tensor& Tensor::operator-=(double b) {
  return in_place("operator-=", *this, Tensor(), [b](const Tensor& t) { return t - b; });
}
Tensor& Tensor::operator*=(double b) {
  return in_place("operator*=", *this, Tensor(), [b](const Tensor& t) { return t * b; });
}
Tensor& Tensor::operator/=(double b) {
  return in_place("operator/=", *this, Tensor(), [b](const Tensor& t) { return t / b; });
}
Tensor& Tensor::zero_() { return fill("zero_", *this, 0); }
Tensor& Tensor::fill_(double value) { return fill("fill_", *this, value); }

// ---- indexing ----

Tensor Tensor::operator[](int64_t i) const { return select(0, i); }

Tensor Tensor::operator[](const Tensor& idx) const {
  LINEA_CHECK(idx.defined() && idx.dtype() == DType::Int64 && idx.dim() <= 1,
              "[operator[]] indexes dim 0 with an int64 tensor of 0 or 1 dims, got {}",
              idx.defined() ? fmt::format("{} of shape {}", idx.dtype(), shape_str(idx.shape())) : "an undefined one");
  return idx.dim() == 0 ? select(0, static_cast<int64_t>(idx.item())) : linea::index_select(*this, 0, idx);
}

// ---- reductions ----

Tensor Tensor::sum() const { return linea::sum(*this); }
Tensor Tensor::sum(int64_t dim, bool keepdim) const { return linea::sum(*this, {dim}, keepdim); }
Tensor Tensor::sum(std::vector<int64_t> dims, bool keepdim) const {
  return linea::sum(*this, std::move(dims), keepdim);
}
Tensor Tensor::sum(std::initializer_list<int64_t> dims, bool keepdim) const {
  return linea::sum(*this, dims, keepdim);
}
Tensor Tensor::mean() const { return linea::mean(*this); }
Tensor Tensor::mean(int64_t dim, bool keepdim) const { return linea::mean(*this, {dim}, keepdim); }
Tensor Tensor::mean(std::vector<int64_t> dims, bool keepdim) const {
  return linea::mean(*this, std::move(dims), keepdim);
}
Tensor Tensor::mean(std::initializer_list<int64_t> dims, bool keepdim) const {
  return linea::mean(*this, dims, keepdim);
}
Tensor Tensor::var() const { return linea::var(*this); }
Tensor Tensor::max() const { return linea::max(*this); }
Tensor Tensor::min() const { return linea::min(*this); }
Tensor Tensor::max(const Tensor& other) const { return maximum(*this, other); }
Tensor Tensor::min(const Tensor& other) const { return minimum(*this, other); }

std::tuple<Tensor, Tensor> Tensor::max(int64_t dim, bool keepdim) const {
  return {linea::max(*this, {dim}, keepdim), linea::argmax(*this, dim, keepdim)};
}

std::tuple<Tensor, Tensor> Tensor::min(int64_t dim, bool keepdim) const {
  const Tensor values = linea::min(*this, {dim}, true);
  // The first index holding the minimum: argmax over the 0/1 "is the minimum" mask.
  const Tensor first = linea::argmax(linea::eq(detach(), values.detach()).to(DType::Int64), dim, keepdim);
  return {keepdim ? values : values.squeeze(dim), first};
}

Tensor Tensor::argmax() const { return linea::argmax(reshape({-1}), 0); }
Tensor Tensor::argmax(int64_t dim, bool keepdim) const { return linea::argmax(*this, dim, keepdim); }

Tensor Tensor::norm(double p) const {
  const Tensor& x = *this;
  LINEA_CHECK(is_floating(x.dtype()) && p > 0, "[norm] needs a floating tensor and p > 0, got {} and p = {}",
              x.dtype(), p);
  if (std::isinf(p)) return linea::max(linea::abs(x));
  if (p == 1) return linea::sum(linea::abs(x));
  if (p == 2) return linea::sqrt(linea::sum(x * x));
  return linea::pow(linea::sum(linea::pow(linea::abs(x), p)), 1 / p);
}

// The number of nonzero elements (int64, 0-d) compared with the count wanted.
Tensor Tensor::all() const {
  return linea::eq(linea::sum(linea::ne(*this, like(*this, 0))), scalar(double(numel()), {DType::Int64, device()}));
}
Tensor Tensor::any() const {
  return linea::gt(linea::sum(linea::ne(*this, like(*this, 0))), scalar(0, {DType::Int64, device()}));
}
Tensor Tensor::softmax(int64_t dim) const { return linea::softmax(*this, dim); }
Tensor Tensor::log_softmax(int64_t dim) const { return linea::log_softmax(*this, dim); }

// ---- elementwise and products ----

Tensor Tensor::pow(double exponent) const { return linea::pow(*this, exponent); }
Tensor Tensor::pow(const Tensor& exponent) const { return linea::pow(*this, exponent); }

Tensor Tensor::mm(const Tensor& b) const {
  LINEA_CHECK(dim() == 2 && b.defined() && b.dim() == 2, "[mm] expects two 2-d tensors, got shapes {} and {} (matmul "
              "takes any ranks)", shape_str(shape()), b.defined() ? shape_str(b.shape()) : "undefined");
  return linea::matmul(*this, b);
}
Tensor Tensor::matmul(const Tensor& b) const { return linea::matmul(*this, b); }
Tensor Tensor::add(const Tensor& b) const { return linea::add(*this, b); }
Tensor Tensor::sub(const Tensor& b) const { return linea::sub(*this, b); }
Tensor Tensor::mul(const Tensor& b) const { return linea::mul(*this, b); }
Tensor Tensor::div(const Tensor& b) const { return linea::div(*this, b); }
Tensor Tensor::eq(const Tensor& b) const { return linea::eq(*this, b); }
Tensor Tensor::ne(const Tensor& b) const { return linea::ne(*this, b); }
Tensor Tensor::lt(const Tensor& b) const { return linea::lt(*this, b); }
Tensor Tensor::le(const Tensor& b) const { return linea::le(*this, b); }
Tensor Tensor::gt(const Tensor& b) const { return linea::gt(*this, b); }
Tensor Tensor::ge(const Tensor& b) const { return linea::ge(*this, b); }
Tensor Tensor::eq(double b) const { return linea::eq(*this, like(*this, b)); }
Tensor Tensor::ne(double b) const { return linea::ne(*this, like(*this, b)); }
Tensor Tensor::lt(double b) const { return linea::lt(*this, like(*this, b)); }
Tensor Tensor::le(double b) const { return linea::le(*this, like(*this, b)); }
Tensor Tensor::gt(double b) const { return linea::gt(*this, like(*this, b)); }
Tensor Tensor::ge(double b) const { return linea::ge(*this, like(*this, b)); }
Tensor Tensor::neg() const { return linea::neg(*this); }
Tensor Tensor::abs() const { return linea::abs(*this); }
Tensor Tensor::exp() const { return linea::exp(*this); }
Tensor Tensor::log() const { return linea::log(*this); }
Tensor Tensor::sqrt() const { return linea::sqrt(*this); }
Tensor Tensor::tanh() const { return linea::tanh(*this); }
Tensor Tensor::sin() const { return linea::sin(*this); }
Tensor Tensor::cos() const { return linea::cos(*this); }
Tensor Tensor::sigmoid() const { return linea::sigmoid(*this); }
Tensor Tensor::relu() const { return linea::relu(*this); }
Tensor Tensor::clamp(double lo, double hi) const { return linea::clamp(*this, lo, hi); }
Tensor Tensor::index_select(int64_t dim, const Tensor& idx) const { return linea::index_select(*this, dim, idx); }
Tensor Tensor::gather(int64_t dim, const Tensor& idx) const { return linea::gather(*this, dim, idx); }

}  // namespace linea
