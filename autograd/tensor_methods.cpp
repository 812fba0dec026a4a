// Views and copies: the members of Tensor declared under "views and copies" in tensor/tensor.h.
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

namespace linea {

namespace {

using autograd::record;

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
  return record(op, out, {x}, [in = x.shape()](const Tensor& g) -> std::vector<Tensor> { return {g.reshape(in)}; });
}

// The gradient of a view that picks part of its input: g written into the same part of zeros.
Tensor into_zeros(const Tensor& g, const Shape& in_shape, const std::function<Tensor(const Tensor&)>& part) {
  Tensor z = zeros(in_shape, {g.dtype(), g.device()});
  backend(g.device()).copy(g, part(z));
  return z;
}

// dst <- src through the backend (any strides), recorded with an identity backward.
Tensor copy_of(const char* op, const Tensor& x) {
  Tensor out = empty(x.shape(), x.dtype(), x.device());
  backend(x.device()).copy(x, out);
  return record(op, out, {x}, [](const Tensor& g) -> std::vector<Tensor> { return {g}; });
}

}  // namespace

// ---- reshaping ----

Tensor Tensor::view(Shape shape) const {
  shape = infer_shape("view", std::move(shape), numel());
  std::optional<Strides> st = view_strides(*this, shape);
  LINEA_CHECK(st.has_value(),
              "[view] cannot view a tensor of shape {} with strides {} as {}: the shape spans dims that are not "
              "contiguous with each other; use reshape() (which copies) instead",
              shape_str(this->shape()), shape_str(strides()), shape_str(shape));
  return same_order_view("view", *this, std::move(shape), std::move(*st));
}

Tensor Tensor::reshape(Shape shape) const {
  shape = infer_shape("reshape", std::move(shape), numel());
  if (std::optional<Strides> st = view_strides(*this, shape))
    return same_order_view("reshape", *this, std::move(shape), std::move(*st));
  return contiguous().view(std::move(shape));
}

Tensor Tensor::flatten(int64_t start, int64_t end) const {
  if (dim() == 0) return reshape({1});
  start = wrap_dim("flatten", start, dim());
  end = wrap_dim("flatten", end, dim());
  LINEA_CHECK(start <= end, "[flatten] start dim {} comes after end dim {} (shape {})", start, end, shape_str(shape()));
  Shape s(shape().begin(), shape().begin() + start);
  int64_t n = 1;
  for (int64_t d = start; d <= end; ++d) n *= shape()[d];
  s.push_back(n);
  s.insert(s.end(), shape().begin() + end + 1, shape().end());
  return reshape(std::move(s));
}

Tensor Tensor::unflatten(int64_t d, Shape sizes) const {
  d = wrap_dim("unflatten", d, dim());
  LINEA_CHECK(!sizes.empty(), "[unflatten] sizes must not be empty");
  sizes = infer_shape("unflatten", std::move(sizes), shape()[d]);
  Shape s(shape().begin(), shape().begin() + d);
  s.insert(s.end(), sizes.begin(), sizes.end());
  s.insert(s.end(), shape().begin() + d + 1, shape().end());
  return view(std::move(s));  // splitting one dim is always a valid view
}

Tensor Tensor::unsqueeze(int64_t d) const {
  d = wrap_dim("unsqueeze", d, dim() + 1);
  Shape s = shape();
  Strides st = strides();
  // Any stride works for a size-1 dim; this one keeps a contiguous tensor contiguous.
  int64_t stride = d < dim() ? s[d] * st[d] : 1;
  s.insert(s.begin() + d, 1);
  st.insert(st.begin() + d, stride);
  return same_order_view("unsqueeze", *this, std::move(s), std::move(st));
}

Tensor Tensor::squeeze(int64_t d) const {
  d = wrap_dim("squeeze", d, dim());
  Shape s = shape();
  Strides st = strides();
  if (dim() > 0 && s[d] == 1) {  // like PyTorch, squeezing a dim that is not 1 leaves it alone
    s.erase(s.begin() + d);
    st.erase(st.begin() + d);
  }
  return same_order_view("squeeze", *this, std::move(s), std::move(st));
}

Tensor Tensor::squeeze() const {
  Shape s;
  Strides st;
  for (int64_t d = 0; d < dim(); ++d)
    if (shape()[d] != 1) {
      s.push_back(shape()[d]);
      st.push_back(strides()[d]);
    }
  return same_order_view("squeeze", *this, std::move(s), std::move(st));
}

// ---- reordering and broadcasting ----

Tensor Tensor::permute(std::vector<int64_t> dims) const {
  LINEA_CHECK(static_cast<int64_t>(dims.size()) == dim(), "[permute] got {} dims {} for a tensor of shape {}",
              dims.size(), shape_str(dims), shape_str(shape()));
  std::vector<int64_t> inverse(dims.size(), -1);
  Shape s(dims.size());
  Strides st(dims.size());
  for (size_t i = 0; i < dims.size(); ++i) {
    int64_t d = wrap_dim("permute", dims[i], dim());
    LINEA_CHECK(inverse[d] < 0, "[permute] dim {} appears twice in {}", d, shape_str(dims));
    inverse[d] = static_cast<int64_t>(i);
    s[i] = shape()[d];
    st[i] = strides()[d];
  }
  Tensor out = as_strided(std::move(s), std::move(st), offset());
  return record("permute", out, {*this},
                [inverse](const Tensor& g) -> std::vector<Tensor> { return {g.permute(inverse)}; });
}

Tensor Tensor::transpose(int64_t d0, int64_t d1) const {
  d0 = wrap_dim("transpose", d0, dim());
  d1 = wrap_dim("transpose", d1, dim());
  std::vector<int64_t> dims(dim());
  for (int64_t d = 0; d < dim(); ++d) dims[d] = d;
  std::swap(dims[d0], dims[d1]);
  return permute(std::move(dims));
}

Tensor Tensor::t() const {
  LINEA_CHECK(dim() == 2, "[t] expects a 2-d tensor, got shape {} (use transpose or permute)", shape_str(shape()));
  return transpose(0, 1);
}

Tensor Tensor::expand(Shape shape) const {
  const int64_t nd = static_cast<int64_t>(shape.size()), lead = nd - dim();
  LINEA_CHECK(lead >= 0, "[expand] target shape {} has fewer dims than the tensor's shape {}", shape_str(shape),
              shape_str(this->shape()));
  Strides st(nd, 0);  // new leading dims and stretched size-1 dims read the same element: stride 0
  for (int64_t i = 0; i < nd; ++i) {
    if (i < lead) {
      LINEA_CHECK(shape[i] >= 0, "[expand] new leading dim {} must have a size >= 0, got {} in {}", i, shape[i],
                  shape_str(shape));
      continue;
    }
    const int64_t have = this->shape()[i - lead];
    if (shape[i] == -1) shape[i] = have;
    if (shape[i] == have) {
      st[i] = strides()[i - lead];
    } else {
      LINEA_CHECK(have == 1 && shape[i] >= 0, "[expand] cannot expand dim {} of size {} to {} (shape {} -> {}): "
                  "only size-1 dims can be expanded", i - lead, have, shape[i], shape_str(this->shape()),
                  shape_str(shape));
    }
  }
  Tensor out = as_strided(std::move(shape), std::move(st), offset());
  return record("expand", out, {*this}, [in = this->shape()](const Tensor& g) -> std::vector<Tensor> {
    return {autograd::sum_to(g, in)};
  });
}

// ---- picking parts ----

Tensor Tensor::slice(int64_t d, int64_t start, int64_t end, int64_t step) const {
  d = wrap_dim("slice", d, dim());
  LINEA_CHECK(step > 0, "[slice] step must be positive, got {}", step);
  const int64_t n = shape()[d];
  // Python slicing: negative bounds count from the end, then both are clamped to [0, n].
  auto clamp = [n](int64_t i) { return std::clamp<int64_t>(i < 0 ? i + n : i, 0, n); };
  start = clamp(start);
  end = std::max(clamp(end), start);
  Shape s = shape();
  Strides st = strides();
  s[d] = (end - start + step - 1) / step;
  st[d] *= step;
  Tensor out = as_strided(std::move(s), std::move(st), offset() + start * strides()[d]);
  return record("slice", out, {*this}, [in = shape(), d, start, end, step](const Tensor& g) -> std::vector<Tensor> {
    return {into_zeros(g, in, [&](const Tensor& z) { return z.slice(d, start, end, step); })};
  });
}

Tensor Tensor::narrow(int64_t d, int64_t start, int64_t length) const {
  d = wrap_dim("narrow", d, dim());
  const int64_t n = shape()[d];
  if (start < 0) start += n;
  LINEA_CHECK(start >= 0 && length >= 0 && start + length <= n,
              "[narrow] start {} and length {} do not fit in dim {} of size {} (shape {})", start, length, d, n,
              shape_str(shape()));
  return slice(d, start, start + length);
}

Tensor Tensor::select(int64_t d, int64_t index) const {
  d = wrap_dim("select", d, dim());
  const int64_t n = shape()[d];
  LINEA_CHECK(index >= -n && index < n, "[select] index {} out of range for dim {} of size {}", index, d, n);
  if (index < 0) index += n;
  Shape s = shape();
  Strides st = strides();
  s.erase(s.begin() + d);
  st.erase(st.begin() + d);
  Tensor out = as_strided(std::move(s), std::move(st), offset() + index * strides()[d]);
  return record("select", out, {*this}, [in = shape(), d, index](const Tensor& g) -> std::vector<Tensor> {
    return {into_zeros(g, in, [&](const Tensor& z) { return z.select(d, index); })};
  });
}

std::vector<Tensor> Tensor::split(int64_t split_size, int64_t d) const {
  d = wrap_dim("split", d, dim());
  const int64_t n = shape()[d];
  LINEA_CHECK(split_size > 0 || (split_size == 0 && n == 0), "[split] split_size must be positive, got {}",
              split_size);
  if (n == 0) return {narrow(d, 0, 0)};
  std::vector<Tensor> parts;
  for (int64_t start = 0; start < n; start += split_size) parts.push_back(narrow(d, start, std::min(split_size, n - start)));
  return parts;
}

std::vector<Tensor> Tensor::chunk(int64_t chunks, int64_t d) const {
  LINEA_CHECK(chunks > 0, "[chunk] chunks must be positive, got {}", chunks);
  d = wrap_dim("chunk", d, dim());
  // Like PyTorch: chunks of ceil(n / chunks), so there may be fewer than `chunks` of them.
  return split((shape()[d] + chunks - 1) / chunks, d);
}

// ---- copies ----

Tensor Tensor::contiguous() const { return is_contiguous() ? *this : copy_of("contiguous", *this); }

Tensor Tensor::clone() const { return copy_of("clone", *this); }

Tensor Tensor::to(DType t) const {
  if (t == dtype()) return *this;
  Tensor out = empty(shape(), t, device());
  backend(device()).copy(*this, out);  // the copy kernel converts between dtypes
  if (!is_floating(t)) return out;     // integer/bool results carry no gradient
  return record("to", out, {*this}, [from = dtype()](const Tensor& g) -> std::vector<Tensor> { return {g.to(from)}; });
}

Tensor Tensor::to(Device dev) const {
  if (dev == device()) return *this;
  Backend& dst = backend(dev);  // throws a clear error for a device without a backend (CUDA in a CPU build)
  // Devices only share the host, so the bytes travel through a host buffer.
  Tensor src = detach().contiguous();
  const size_t nbytes = static_cast<size_t>(numel()) * itemsize(dtype());
  std::vector<char> host(nbytes);
  if (nbytes) backend(device()).copy_to_host(host.data(), *src.storage(), src.offset() * itemsize(dtype()), nbytes);
  Tensor out = empty(shape(), dtype(), dev);
  if (nbytes) dst.copy_from_host(*out.storage(), 0, host.data(), nbytes);
  return record("to", out, {*this}, [from = device()](const Tensor& g) -> std::vector<Tensor> { return {g.to(from)}; });
}

}  // namespace linea
