#include "linea/tensor/tensor.h"

#include <cstring>

#include "linea/tensor/backend.h"
#include "linea/tensor/error.h"

namespace linea {

TensorImpl& Tensor::impl() const {
  LINEA_CHECK(impl_ != nullptr, "[tensor] use of an undefined tensor (default-constructed or an absent grad)");
  return *impl_;
}

int64_t Tensor::size(int64_t d) const { return shape()[wrap_dim("size", d, dim())]; }

bool Tensor::is_contiguous() const {
  if (numel() == 0) return true;  // no element to be out of place (and a 0 size would break the walk)
  const auto& sh = shape();
  const auto& st = strides();
  int64_t expected = 1;
  for (size_t i = sh.size(); i-- > 0;) {
    if (sh[i] == 1) continue;
    if (st[i] != expected) return false;
    expected *= sh[i];
  }
  return true;
}

void Tensor::check_dtype(DType want) const {
  LINEA_CHECK(want == dtype(), "[data] tensor has dtype {}, asked for {}", dtype(), want);
}

void* Tensor::data_ptr() const {
  return static_cast<char*>(storage()->data) + offset() * static_cast<int64_t>(itemsize(dtype()));
}

Tensor Tensor::as_strided(Shape shape, Strides strides, int64_t offset) const {
  LINEA_CHECK(shape.size() == strides.size(), "[as_strided] shape {} and strides {} differ in length",
              shape_str(shape), shape_str(strides));
  // The furthest element the view can touch must lie inside the storage.
  int64_t lo = offset, hi = offset;
  bool empty_view = false, overflow = false;  // hostile strides must not wrap around into range
  for (size_t i = 0; i < shape.size(); ++i) {
    LINEA_CHECK(shape[i] >= 0, "[as_strided] negative size in shape {}", shape_str(shape));
    if (shape[i] == 0) empty_view = true;
    int64_t span = 0;
    overflow |= __builtin_mul_overflow(std::max<int64_t>(shape[i] - 1, 0), strides[i], &span);
    int64_t& end = span >= 0 ? hi : lo;
    overflow |= __builtin_add_overflow(end, span, &end);
  }
  const int64_t cap = static_cast<int64_t>(storage()->nbytes / itemsize(dtype()));
  LINEA_CHECK(empty_view || (!overflow && lo >= 0 && hi < cap),
              "[as_strided] view shape {} strides {} offset {} reaches outside a storage of {} elements",
              shape_str(shape), shape_str(strides), offset, cap);
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = storage();
  impl->shape = std::move(shape);
  impl->strides = std::move(strides);
  impl->offset = offset;
  impl->dtype = dtype();
  return Tensor(std::move(impl));
}

Tensor empty(Shape shape, DType dtype, Device device) {
  for (int64_t s : shape) LINEA_CHECK(s >= 0, "[empty] negative size in shape {}", shape_str(shape));
  const std::optional<int64_t> nbytes = checked_nbytes(shape, itemsize(dtype));
  LINEA_CHECK(nbytes.has_value(), "[empty] shape {} of {} is too large: its size in bytes overflows int64",
              shape_str(shape), dtype);
  auto impl = std::make_shared<TensorImpl>();
  try {
    impl->storage = backend(device).allocate(static_cast<size_t>(*nbytes));
  } catch (const Error& e) {  // the allocator knows only the byte count; say which tensor it was
    throw Error(fmt::format("[empty] shape {} of {} on {}: {}", shape_str(shape), dtype, device, e.what()));
  }
  impl->strides = contiguous_strides(shape);
  impl->shape = std::move(shape);
  impl->dtype = dtype;
  return Tensor(std::move(impl));
}

std::vector<double> Tensor::to_vector() const {
  // Gather into a contiguous host buffer of the same dtype, then widen to double.
  Tensor src = *this;
  if (!is_contiguous()) {
    src = empty(shape(), dtype(), device());
    backend(device()).copy(*this, src);
  }
  const size_t n = static_cast<size_t>(numel());
  std::vector<char> bytes(n * itemsize(dtype()));
  if (n) backend(device()).copy_to_host(bytes.data(), *src.storage(), src.offset() * itemsize(dtype()), bytes.size());
  std::vector<double> out(n);
  dispatch(dtype(), [&]<class T>() {
    const T* p = reinterpret_cast<const T*>(bytes.data());
    for (size_t i = 0; i < n; ++i) out[i] = static_cast<double>(p[i]);
  });
  return out;
}

double Tensor::item() const {
  LINEA_CHECK(numel() == 1, "[item] needs a tensor with one element, got shape {}", shape_str(shape()));
  return to_vector()[0];
}

double Tensor::at(std::initializer_list<int64_t> idx) const {
  LINEA_CHECK(static_cast<int64_t>(idx.size()) == dim(), "[at] {} indices for a tensor of shape {}", idx.size(),
              shape_str(shape()));
  int64_t off = offset(), d = 0;
  for (int64_t i : idx) {
    int64_t n = shape()[d];
    LINEA_CHECK(i >= -n && i < n, "[at] index {} out of range for dim {} of size {}", i, d, n);
    off += (i < 0 ? i + n : i) * strides()[d];
    ++d;
  }
  double v = 0;
  dispatch(dtype(), [&]<class T>() {
    T x;
    backend(device()).copy_to_host(&x, *storage(), off * sizeof(T), sizeof(T));
    v = static_cast<double>(x);
  });
  return v;
}

}  // namespace linea
