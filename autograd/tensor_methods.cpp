// Tensor's autograd members and its views and copies: declared with the rest of Tensor in
// tensor/tensor.h, defined here, so tensor/ declares them without knowing autograd.
//
// The autograd members read and write the Meta a tensor carries (graph.h); backward hands over to
// the engine (engine.cpp).
//
// A view is a new handle on the same storage with different shape/strides/offset, made by
// as_strided (bounds-checked); nothing is copied. Each view still records a backward, because the
// gradient has to find its way back to the viewed tensor's shape:
// - views that keep every element in order (view, unsqueeze, squeeze...) reshape the gradient back;
// - views that pick a part (narrow, slice, select) write the gradient into zeros of the input shape;
// - permute applies the inverse permutation; expand sums over the stretched dims.
#include <algorithm>
#include <functional>
#include <optional>

#include "linea/autograd/function.h"
#include "linea/tensor/backend.h"
#include "linea/tensor/creation.h"
#include "linea/tensor/error.h"

namespace linea {

namespace {

using autograd::record;
using autograd::record_view;

// Resolves the one allowed -1 in `shape` so that the result has `n` elements.
Shape infer_shape(const char* op, Shape shape, int64_t n) {
  int64_t infer = -1, known = 1;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == -1) {
      LINEA_CHECK(infer < 0, "[{}] only one dim may be -1, got shape {}", op, shape_str(shape));
      infer = static_cast<int64_t>(i);
    } else {
      LINEA_CHECK(shape[i] >= 0, "[{}] invalid size {} in shape {}", op, shape[i], shape_str(shape));
      LINEA_CHECK(!__builtin_mul_overflow(known, shape[i], &known), "[{}] shape {} is invalid for {} elements", op,
                  shape_str(shape), n);
    }
  }
  if (infer >= 0) {
    LINEA_CHECK(known != 0 && n % known == 0, "[{}] shape {} is invalid for {} elements", op, shape_str(shape), n);
    shape[infer] = n / known;
  }
  LINEA_CHECK(numel(shape) == n, "[{}] shape {} is invalid for {} elements", op, shape_str(shape), n);
  return shape;
}

// Strides that let x be seen with `shape` without copying, or nullopt when none exist.
// PyTorch's rule: x's dims fall into chunks that are contiguous among themselves; the new shape may
// split and merge dims freely inside a chunk but never across two chunks.
std::optional<Strides> view_strides(const Tensor& x, const Shape& shape) {
  const Shape& old = x.shape();
  const Strides& ost = x.strides();
  if (x.numel() == 0 || old.empty()) return contiguous_strides(shape);
  Strides st(shape.size());
  int64_t vd = static_cast<int64_t>(shape.size()) - 1;
  int64_t chunk_base = ost.back(), tensor_n = 1, view_n = 1;
  for (int64_t td = static_cast<int64_t>(old.size()) - 1; td >= 0; --td) {
    tensor_n *= old[td];
    // A chunk ends at dim 0 or where the dim to the left is not laid out right after this chunk.
    if (td == 0 || (old[td - 1] != 1 && ost[td - 1] != tensor_n * chunk_base)) {
      while (vd >= 0 && (view_n < tensor_n || shape[vd] == 1)) {
        st[vd] = view_n * chunk_base;
        view_n *= shape[vd];
        --vd;
      }
      if (view_n != tensor_n) return std::nullopt;
      if (td > 0) {
        chunk_base = ost[td - 1];
        tensor_n = view_n = 1;
      }
    }
  }
  if (vd != -1) return std::nullopt;
  return st;
}

// A view holding x's elements in the same row-major order: the gradient is g reshaped back.
Tensor same_order_view(const char* op, const Tensor& x, Shape shape, Strides strides) {
  Tensor out = x.as_strided(std::move(shape), std::move(strides), x.offset());
  return record_view(op, out, {x},
                     [in = x.shape()](const Tensor& g) -> std::vector<Tensor> { return {g.reshape(in)}; });
}

// The gradient of a view that picks part of its input: g written into the same part of zeros.
// Under create_graph (grad mode on in a backward) the write is recorded too: its own gradient
// reads the same part back. `part` is kept by that node, so it must own what it captures.
Tensor into_zeros(const Tensor& g, const Shape& in_shape, const std::function<Tensor(const Tensor&)>& part) {
  Tensor z = zeros(in_shape, {g.dtype(), g.device()});
  backend(g.device()).copy(g, part(z));
  if (!autograd::grad_enabled()) return z;
  return record_view("into_zeros", z, {g}, [part](const Tensor& gg) -> std::vector<Tensor> { return {part(gg)}; });
}

// dst <- src through the backend (any strides), recorded with an identity backward.
Tensor copy_of(const char* op, const Tensor& x) {
  Tensor out = empty(x.shape(), x.dtype(), x.device());
  backend(x.device()).copy(x, out);
  return record_view(op, out, {x}, [](const Tensor& g) -> std::vector<Tensor> { return {g}; });
}

}  // namespace

// Each member below names *this x: the input of the op it is, as in the free functions' bodies.

// ---- autograd ----

bool Tensor::requires_grad() const {
  const Tensor& x = *this;
  const auto& m = x.impl().autograd;
  return m && (m->requires_grad || m->grad_fn);
}

bool Tensor::is_leaf() const {
  const Tensor& x = *this;
  const auto& m = x.impl().autograd;
  return !m || !m->grad_fn;
}

Tensor& Tensor::requires_grad_(bool on) {
  const Tensor& x = *this;
  LINEA_CHECK(x.is_leaf(), "[requires_grad_] only leaf tensors can change requires_grad; this one was made by {} "
              "(use detach() first)", x.impl().autograd->grad_fn->op);
  LINEA_CHECK(!on || is_floating(x.dtype()), "[requires_grad_] only floating tensors can require grad, got {}",
              x.dtype());
  if (!x.impl().autograd) x.impl().autograd = std::make_shared<autograd::Meta>();
  x.impl().autograd->requires_grad = on;
  return *this;
}

std::shared_ptr<autograd::Node> Tensor::grad_fn() const {
  const auto& m = impl().autograd;
  return m ? m->grad_fn : nullptr;
}

Tensor Tensor::grad() const {
  const Tensor& x = *this;
  const auto& m = x.impl().autograd;
  return m ? m->grad : Tensor();
}

void Tensor::zero_grad() {
  const Tensor& x = *this;
  if (x.impl().autograd) x.impl().autograd->grad = Tensor();
}

void Tensor::backward(const Tensor& gradient, std::optional<bool> retain_graph, bool create_graph) const {
  const Tensor& x = *this;
  LINEA_CHECK(x.requires_grad(), "[backward] this tensor (shape {}) does not require grad: no input of the ops "
              "that made it had requires_grad_() set, or it was made under NoGradGuard", shape_str(x.shape()));
  Tensor g = gradient;
  if (!g.defined()) {
    LINEA_CHECK(x.numel() == 1, "[backward] a gradient must be passed for a non-scalar output of shape {}",
                shape_str(x.shape()));
    g = ones(x.shape(), {x.dtype(), x.device()});
  }
  LINEA_CHECK(g.shape() == x.shape() && g.dtype() == x.dtype() && g.device() == x.device(),
              "[backward] gradient of shape {} {} on {} does not match the output's shape {} {} on {}",
              shape_str(g.shape()), g.dtype(), g.device(), shape_str(x.shape()), x.dtype(), x.device());
  autograd::run_backward(x, std::move(g), retain_graph.value_or(create_graph), create_graph);
}

// ---- reshaping ----

Tensor Tensor::view(Shape shape) const {
  const Tensor& x = *this;
  shape = infer_shape("view", std::move(shape), x.numel());
  std::optional<Strides> st = view_strides(x, shape);
  LINEA_CHECK(st.has_value(),
              "[view] cannot view a tensor of shape {} with strides {} as {}: the shape spans dims that are not "
              "contiguous with each other; use reshape() (which copies) instead",
              shape_str(x.shape()), shape_str(x.strides()), shape_str(shape));
  return same_order_view("view", x, std::move(shape), std::move(*st));
}

Tensor Tensor::reshape(Shape shape) const {
  const Tensor& x = *this;
  shape = infer_shape("reshape", std::move(shape), x.numel());
  if (std::optional<Strides> st = view_strides(x, shape))
    return same_order_view("reshape", x, std::move(shape), std::move(*st));
  return x.contiguous().view(std::move(shape));
}

Tensor Tensor::flatten(int64_t start, int64_t end) const {
  const Tensor& x = *this;
  if (x.dim() == 0) return x.reshape({1});
  start = wrap_dim("flatten", start, x.dim());
  end = wrap_dim("flatten", end, x.dim());
  LINEA_CHECK(start <= end, "[flatten] start dim {} comes after end dim {} (shape {})", start, end,
              shape_str(x.shape()));
  Shape s(x.shape().begin(), x.shape().begin() + start);
  int64_t n = 1;
  for (int64_t d = start; d <= end; ++d) n *= x.shape()[d];
  s.push_back(n);
  s.insert(s.end(), x.shape().begin() + end + 1, x.shape().end());
  return x.reshape(std::move(s));
}

Tensor Tensor::unflatten(int64_t d, Shape sizes) const {
  const Tensor& x = *this;
  d = wrap_dim("unflatten", d, x.dim());
  LINEA_CHECK(!sizes.empty(), "[unflatten] sizes must not be empty");
  sizes = infer_shape("unflatten", std::move(sizes), x.shape()[d]);
  Shape s(x.shape().begin(), x.shape().begin() + d);
  s.insert(s.end(), sizes.begin(), sizes.end());
  s.insert(s.end(), x.shape().begin() + d + 1, x.shape().end());
  return x.view(std::move(s));  // splitting one dim is always a valid view
}

Tensor Tensor::unsqueeze(int64_t d) const {
  const Tensor& x = *this;
  d = wrap_dim("unsqueeze", d, x.dim() + 1);
  Shape s = x.shape();
  Strides st = x.strides();
  // Any stride works for a size-1 dim; this one keeps a contiguous tensor contiguous.
  int64_t stride = d < x.dim() ? s[d] * st[d] : 1;
  s.insert(s.begin() + d, 1);
  st.insert(st.begin() + d, stride);
  return same_order_view("unsqueeze", x, std::move(s), std::move(st));
}

Tensor Tensor::squeeze(int64_t d) const {
  const Tensor& x = *this;
  d = wrap_dim("squeeze", d, x.dim());
  Shape s = x.shape();
  Strides st = x.strides();
  if (x.dim() > 0 && s[d] == 1) {  // like PyTorch, squeezing a dim that is not 1 leaves it alone
    s.erase(s.begin() + d);
    st.erase(st.begin() + d);
  }
  return same_order_view("squeeze", x, std::move(s), std::move(st));
}

Tensor Tensor::squeeze() const {
  const Tensor& x = *this;
  Shape s;
  Strides st;
  for (int64_t d = 0; d < x.dim(); ++d)
    if (x.shape()[d] != 1) {
      s.push_back(x.shape()[d]);
      st.push_back(x.strides()[d]);
    }
  return same_order_view("squeeze", x, std::move(s), std::move(st));
}

// ---- reordering and broadcasting ----

Tensor Tensor::permute(std::vector<int64_t> dims) const {
  const Tensor& x = *this;
  LINEA_CHECK(static_cast<int64_t>(dims.size()) == x.dim(), "[permute] got {} dims {} for a tensor of shape {}",
              dims.size(), shape_str(dims), shape_str(x.shape()));
  std::vector<int64_t> inverse(dims.size(), -1);
  Shape s(dims.size());
  Strides st(dims.size());
  for (size_t i = 0; i < dims.size(); ++i) {
    int64_t d = wrap_dim("permute", dims[i], x.dim());
    LINEA_CHECK(inverse[d] < 0, "[permute] dim {} appears twice in {}", d, shape_str(dims));
    inverse[d] = static_cast<int64_t>(i);
    s[i] = x.shape()[d];
    st[i] = x.strides()[d];
  }
  Tensor out = x.as_strided(std::move(s), std::move(st), x.offset());
  return record_view("permute", out, {x},
                [inverse](const Tensor& g) -> std::vector<Tensor> { return {g.permute(inverse)}; });
}

Tensor Tensor::transpose(int64_t d0, int64_t d1) const {
  const Tensor& x = *this;
  d0 = wrap_dim("transpose", d0, x.dim());
  d1 = wrap_dim("transpose", d1, x.dim());
  std::vector<int64_t> dims(x.dim());
  for (int64_t d = 0; d < x.dim(); ++d) dims[d] = d;
  std::swap(dims[d0], dims[d1]);
  return x.permute(std::move(dims));
}

Tensor Tensor::t() const {
  const Tensor& x = *this;
  LINEA_CHECK(x.dim() == 2, "[t] expects a 2-d tensor, got shape {} (use transpose or permute)",
              shape_str(x.shape()));
  return x.transpose(0, 1);
}

Tensor Tensor::expand(Shape shape) const {
  const Tensor& x = *this;
  const int64_t nd = static_cast<int64_t>(shape.size()), lead = nd - x.dim();
  LINEA_CHECK(lead >= 0, "[expand] target shape {} has fewer dims than the tensor's shape {}", shape_str(shape),
              shape_str(x.shape()));
  Strides st(nd, 0);  // new leading dims and stretched size-1 dims read the same element: stride 0
  for (int64_t i = 0; i < nd; ++i) {
    if (i < lead) {
      LINEA_CHECK(shape[i] >= 0, "[expand] new leading dim {} must have a size >= 0, got {} in {}", i, shape[i],
                  shape_str(shape));
      continue;
    }
    const int64_t have = x.shape()[i - lead];
    if (shape[i] == -1) shape[i] = have;
    if (shape[i] == have) {
      st[i] = x.strides()[i - lead];
    } else {
      LINEA_CHECK(have == 1 && shape[i] >= 0, "[expand] cannot expand dim {} of size {} to {} (shape {} -> {}): "
                  "only size-1 dims can be expanded", i - lead, have, shape[i], shape_str(x.shape()),
                  shape_str(shape));
    }
  }
  Tensor out = x.as_strided(std::move(shape), std::move(st), x.offset());
  return record_view("expand", out, {x}, [in = x.shape()](const Tensor& g) -> std::vector<Tensor> {
    return {autograd::sum_to(g, in)};
  });
}

// ---- picking parts ----

Tensor Tensor::slice(int64_t d, int64_t start, int64_t end, int64_t step) const {
  const Tensor& x = *this;
  d = wrap_dim("slice", d, x.dim());
  LINEA_CHECK(step > 0, "[slice] step must be positive, got {}", step);
  const int64_t n = x.shape()[d];
  // Python slicing: negative bounds count from the end, then both are clamped to [0, n].
  auto clamp = [n](int64_t i) { return std::clamp<int64_t>(i < 0 ? i + n : i, 0, n); };
  start = clamp(start);
  end = std::max(clamp(end), start);
  Shape s = x.shape();
  Strides st = x.strides();
  s[d] = (end - start + step - 1) / step;
  st[d] *= step;
  Tensor out = x.as_strided(std::move(s), std::move(st), x.offset() + start * x.strides()[d]);
  return record_view("slice", out, {x},
                     [in = x.shape(), d, start, end, step](const Tensor& g) -> std::vector<Tensor> {
                       return {into_zeros(g, in, [=](const Tensor& z) { return z.slice(d, start, end, step); })};
                     });
}

Tensor Tensor::narrow(int64_t d, int64_t start, int64_t length) const {
  const Tensor& x = *this;
  d = wrap_dim("narrow", d, x.dim());
  const int64_t n = x.shape()[d];
  if (start < 0) start += n;
  LINEA_CHECK(start >= 0 && length >= 0 && start + length <= n,
              "[narrow] start {} and length {} do not fit in dim {} of size {} (shape {})", start, length, d, n,
              shape_str(x.shape()));
  return x.slice(d, start, start + length);
}

Tensor Tensor::select(int64_t d, int64_t index) const {
  const Tensor& x = *this;
  d = wrap_dim("select", d, x.dim());
  const int64_t n = x.shape()[d];
  LINEA_CHECK(index >= -n && index < n, "[select] index {} out of range for dim {} of size {}", index, d, n);
  if (index < 0) index += n;
  Shape s = x.shape();
  Strides st = x.strides();
  s.erase(s.begin() + d);
  st.erase(st.begin() + d);
  Tensor out = x.as_strided(std::move(s), std::move(st), x.offset() + index * x.strides()[d]);
  return record_view("select", out, {x}, [in = x.shape(), d, index](const Tensor& g) -> std::vector<Tensor> {
    return {into_zeros(g, in, [=](const Tensor& z) { return z.select(d, index); })};
  });
}

std::vector<Tensor> Tensor::split(int64_t split_size, int64_t d) const {
  const Tensor& x = *this;
  d = wrap_dim("split", d, x.dim());
  const int64_t n = x.shape()[d];
  LINEA_CHECK(split_size > 0 || (split_size == 0 && n == 0), "[split] split_size must be positive, got {}",
              split_size);
  if (n == 0) return {x.narrow(d, 0, 0)};
  std::vector<Tensor> parts;
  for (int64_t start = 0; start < n; start += split_size)
    parts.push_back(x.narrow(d, start, std::min(split_size, n - start)));
  return parts;
}

std::vector<Tensor> Tensor::chunk(int64_t chunks, int64_t d) const {
  const Tensor& x = *this;
  LINEA_CHECK(chunks > 0, "[chunk] chunks must be positive, got {}", chunks);
  d = wrap_dim("chunk", d, x.dim());
  // Like PyTorch: chunks of ceil(n / chunks), so there may be fewer than `chunks` of them.
  return x.split((x.shape()[d] + chunks - 1) / chunks, d);
}

// ---- copies ----

Tensor Tensor::contiguous() const { return is_contiguous() ? *this : copy_of("contiguous", *this); }

Tensor Tensor::clone() const { return copy_of("clone", *this); }

Tensor Tensor::to(DType t) const {
  const Tensor& x = *this;
  if (t == x.dtype()) return x;
  Tensor out = empty(x.shape(), t, x.device());
  backend(x.device()).copy(x, out);  // the copy kernel converts between dtypes
  if (!is_floating(t)) return out;     // integer/bool results carry no gradient
  return record("to", out, {x}, [from = x.dtype()](const Tensor& g) -> std::vector<Tensor> { return {g.to(from)}; });
}

Tensor Tensor::to(Device dev) const {
  const Tensor& x = *this;
  if (dev == x.device()) return x;
  Backend& dst = backend(dev);  // throws a clear error for a device without a backend (CUDA in a CPU build)
  // Devices only share the host, so the bytes travel through a host buffer.
  Tensor src = x.detach().contiguous();
  const size_t nbytes = static_cast<size_t>(x.numel()) * itemsize(x.dtype());
  std::vector<char> host(nbytes);
  if (nbytes)
    backend(x.device()).copy_to_host(host.data(), *src.storage(), src.offset() * itemsize(x.dtype()), nbytes);
  Tensor out = empty(x.shape(), x.dtype(), dev);
  if (nbytes) dst.copy_from_host(*out.storage(), 0, host.data(), nbytes);
  return record_view("to", out, {x},
                     [from = x.device()](const Tensor& g) -> std::vector<Tensor> { return {g.to(from)}; });
}

}  // namespace linea
