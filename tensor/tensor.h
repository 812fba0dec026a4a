// Tensor: a small handle (one shared_ptr) over TensorImpl = storage + shape + strides + offset +
// dtype. Copying a Tensor copies the handle, not the data; views share the Storage.
//
// tensor/ knows nothing of autograd: TensorImpl only carries an opaque pointer that autograd/
// fills in, and the autograd and view members below are declared here, with the rest of Tensor,
// and defined in autograd/tensor_methods.cpp (one library: the linker joins the two layers).
#pragma once
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <vector>

#include "linea/tensor/device.h"
#include "linea/tensor/dtype.h"
#include "linea/tensor/shape.h"
#include "linea/tensor/storage.h"

namespace linea {

namespace autograd {
struct Meta;  // defined in autograd/graph.h
}

struct TensorImpl {
  std::shared_ptr<Storage> storage;
  Shape shape;
  Strides strides;
  int64_t offset = 0;  // in elements
  DType dtype = DType::Float32;
  std::shared_ptr<autograd::Meta> autograd;  // null unless the tensor takes part in autograd
};

class Tensor {
 public:
  Tensor() = default;
  explicit Tensor(std::shared_ptr<TensorImpl> impl) : impl_(std::move(impl)) {}

  // ---- metadata ----
  bool defined() const { return impl_ != nullptr; }
  const Shape& shape() const { return impl().shape; }
  const Strides& strides() const { return impl().strides; }
  int64_t offset() const { return impl().offset; }
  DType dtype() const { return impl().dtype; }
  Device device() const { return impl().storage->device; }
  int64_t dim() const { return static_cast<int64_t>(impl().shape.size()); }
  int64_t size(int64_t d) const;  // negative d counts from the end
  int64_t numel() const { return linea::numel(impl().shape); }
  bool is_contiguous() const;
  const std::shared_ptr<Storage>& storage() const { return impl().storage; }
  TensorImpl& impl() const;
  const std::shared_ptr<TensorImpl>& impl_ptr() const { return impl_; }
  bool same(const Tensor& o) const { return impl_ == o.impl_; }

  // Raw pointer to element 0 of this view (storage base + offset). data<T>() checks the dtype.
  void* data_ptr() const;
  // Throws naming both dtypes unless this tensor has dtype `want` (out of line: tensor.h has no
  // fmt, so nvcc can read it).
  void check_dtype(DType want) const;
  template <class T>
  T* data() const {
    check_dtype(dtype_v<T>);
    return static_cast<T*>(data_ptr());
  }

  // A new handle on the same storage with the given geometry (no autograd). Checked against the
  // storage size, so a bad view throws instead of reading out of bounds.
  Tensor as_strided(Shape shape, Strides strides, int64_t offset) const;

  // ---- small-tensor element access (copies to the host when needed) ----
  double item() const;                            // the value of a one-element tensor
  double at(std::initializer_list<int64_t> idx) const;
  std::vector<double> to_vector() const;          // all elements, row-major, as double
  template <class T>
  std::vector<T> to_vector_as() const {
    std::vector<double> v = to_vector();
    return std::vector<T>(v.begin(), v.end());
  }

  // ---- autograd (defined in autograd/tensor_methods.cpp: tensor/ declares them, autograd/ implements) ----
  bool requires_grad() const;
  Tensor& requires_grad_(bool on = true);  // only on leaves
  bool is_leaf() const;
  Tensor grad() const;                     // undefined until a backward reaches this leaf
  void zero_grad();                        // drops the accumulated gradient
  // Backward from this tensor. Scalars may omit `gradient`; other shapes must pass one of the
  // same shape. The graph is freed afterwards unless retain_graph is set.
  void backward(const Tensor& gradient = Tensor(), bool retain_graph = false) const;
  Tensor detach() const { return as_strided(shape(), strides(), offset()); }  // same storage, no graph

  // ---- views and copies (defined in autograd/tensor_methods.cpp); views never copy ----
  Tensor view(Shape shape) const;          // one dim may be -1; requires compatible strides
  Tensor reshape(Shape shape) const;       // a view when possible, else a copy
  Tensor permute(std::vector<int64_t> dims) const;
  Tensor transpose(int64_t d0, int64_t d1) const;
  Tensor t() const;                        // transpose of a 2-d tensor
  Tensor unsqueeze(int64_t d) const;
  Tensor squeeze(int64_t d) const;
  Tensor squeeze() const;
  Tensor expand(Shape shape) const;        // -1 keeps a dim
  Tensor narrow(int64_t dim, int64_t start, int64_t length) const;
  Tensor slice(int64_t dim, int64_t start, int64_t end, int64_t step = 1) const;
  Tensor select(int64_t dim, int64_t index) const;
  Tensor flatten(int64_t start = 0, int64_t end = -1) const;
  Tensor unflatten(int64_t dim, Shape sizes) const;
  std::vector<Tensor> chunk(int64_t chunks, int64_t dim = 0) const;
  std::vector<Tensor> split(int64_t split_size, int64_t dim = 0) const;
  Tensor contiguous() const;               // returns *this when already contiguous
  Tensor clone() const;
  Tensor to(DType dtype) const;
  Tensor to(Device device) const;

 private:
  std::shared_ptr<TensorImpl> impl_;
};

// A fresh, uninitialised, contiguous tensor (tensor/tensor.cpp); the building block of creation.
Tensor empty(Shape shape, DType dtype = DType::Float32, Device device = Device::cpu());

}  // namespace linea
