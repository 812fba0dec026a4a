// Tensor: a small handle (one shared_ptr) over TensorImpl = storage + shape + strides + offset +
// dtype. Copying a Tensor copies the handle, not the data; views share the Storage.
//
// tensor/ knows nothing of autograd: TensorImpl only carries an opaque pointer that autograd/
// fills in, and the autograd, view and math members below are declared here, with the rest of
// Tensor, and defined in autograd/tensor_methods.cpp and autograd/tensor_math.cpp (one library:
// the linker joins the two layers).
#pragma once
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <optional>
#include <tuple>
#include <type_traits>
#include <vector>

#include "linea/tensor/device.h"
#include "linea/tensor/dtype.h"
#include "linea/tensor/shape.h"
#include "linea/tensor/storage.h"

namespace linea {

namespace autograd {
struct Meta;  // defined in autograd/graph.h
struct Node;
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
  template <class T>
  T item() const {  // libtorch's item<float>(), item<int64_t>(): item() converted (exact to 2^53)
    static_assert(std::is_arithmetic_v<T>, "item<T>() needs an arithmetic T");
    return static_cast<T>(item());
  }
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
  // same shape. The graph is freed afterwards unless retain_graph is set (by default it is kept
  // exactly when create_graph is). With create_graph the backward pass is itself recorded, so the
  // .grad it leaves can be differentiated again (docs/autograd.md); without it .grad is a constant.
  void backward(const Tensor& gradient = Tensor(), std::optional<bool> retain_graph = std::nullopt,
                bool create_graph = false) const;
  Tensor detach() const { return as_strided(shape(), strides(), offset()); }  // same storage, no graph
  // The node that made this tensor (null for a leaf); grad_fn()->name() is PyTorch's name for it
  // ("MulBackward0"). Include <linea/autograd/graph.h> (or <linea/linea.h>) to use it.
  std::shared_ptr<autograd::Node> grad_fn() const;

  // ---- in place (defined in autograd/tensor_math.cpp), as libtorch's: the result is written into
  // this tensor's storage, so every handle and view on it sees the change. Under grad mode, a leaf
  // that requires grad refuses (update it under NoGradGuard, as optimizers do), and so does a view
  // that is part of a graph; any other tensor joins the graph of the op. A backward that needs a
  // value written over since its forward throws (autograd/graph.h, Node::versions).
  Tensor& operator+=(const Tensor& b);
  Tensor& operator-=(const Tensor& b);
  Tensor& operator*=(const Tensor& b);
  Tensor& operator/=(const Tensor& b);
  Tensor& operator+=(double b);
  Tensor& operator-=(double b);
  Tensor& operator*=(double b);
  Tensor& operator/=(double b);
  Tensor& zero_();
  Tensor& fill_(double value);

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

  // ---- libtorch's method spellings of the free functions (autograd/tensor_math.cpp); each is the
  // free function of the same name (x.sum(1) is sum(x, {1})), documented in autograd/ops_*.h ----
  const Shape& sizes() const { return shape(); }
  Tensor operator[](int64_t i) const;         // select(0, i)
  Tensor operator[](const Tensor& idx) const; // index_select(0, idx), idx int64 of at most 1 dim
  Tensor sum() const;
  Tensor sum(int64_t dim, bool keepdim = false) const;
  Tensor sum(std::vector<int64_t> dims, bool keepdim = false) const;
  Tensor sum(std::initializer_list<int64_t> dims, bool keepdim = false) const;  // so that sum({}) is all dims
  Tensor mean() const;
  Tensor mean(int64_t dim, bool keepdim = false) const;
  Tensor mean(std::vector<int64_t> dims, bool keepdim = false) const;
  Tensor mean(std::initializer_list<int64_t> dims, bool keepdim = false) const;  // so that mean({}) is all dims
  Tensor var() const;  // unbiased, as libtorch's
  Tensor max() const;  // over all elements
  Tensor min() const;
  std::tuple<Tensor, Tensor> max(int64_t dim, bool keepdim = false) const;  // (values, int64 indices)
  std::tuple<Tensor, Tensor> min(int64_t dim, bool keepdim = false) const;
  Tensor max(const Tensor& other) const;  // maximum(x, other)
  Tensor min(const Tensor& other) const;  // minimum(x, other)
  Tensor argmax() const;                   // the flat index of the largest element
  Tensor argmax(int64_t dim, bool keepdim = false) const;
  Tensor norm(double p = 2) const;         // the p-norm over all elements; p may be infinity
  Tensor all() const;                      // 0-d bool: every element is nonzero
  Tensor any() const;                      // 0-d bool: some element is nonzero
  Tensor softmax(int64_t dim) const;
  Tensor log_softmax(int64_t dim) const;
  Tensor pow(double exponent) const;
  Tensor pow(const Tensor& exponent) const;
  Tensor mm(const Tensor& b) const;        // 2-d @ 2-d only, as libtorch's
  Tensor matmul(const Tensor& b) const;
  Tensor add(const Tensor& b) const;
  Tensor sub(const Tensor& b) const;
  Tensor mul(const Tensor& b) const;
  Tensor div(const Tensor& b) const;
  Tensor eq(const Tensor& b) const;
  Tensor ne(const Tensor& b) const;
  Tensor lt(const Tensor& b) const;
  Tensor le(const Tensor& b) const;
  Tensor gt(const Tensor& b) const;
  Tensor ge(const Tensor& b) const;
  Tensor eq(double b) const;  // b in this tensor's dtype
  Tensor ne(double b) const;
  Tensor lt(double b) const;
  Tensor le(double b) const;
  Tensor gt(double b) const;
  Tensor ge(double b) const;
  Tensor neg() const;
  Tensor abs() const;
  Tensor exp() const;
  Tensor log() const;
  Tensor sqrt() const;
  Tensor tanh() const;
  Tensor sin() const;
  Tensor cos() const;
  Tensor sigmoid() const;
  Tensor relu() const;
  Tensor clamp(double lo, double hi) const;
  Tensor index_select(int64_t dim, const Tensor& idx) const;
  Tensor gather(int64_t dim, const Tensor& idx) const;
  Tensor expand_as(const Tensor& other) const { return expand(other.shape()); }
  Tensor view_as(const Tensor& other) const { return view(other.shape()); }
  Tensor reshape_as(const Tensor& other) const { return reshape(other.shape()); }

 private:
  std::shared_ptr<TensorImpl> impl_;
};

// A fresh, uninitialised, contiguous tensor (tensor/tensor.cpp); the building block of creation.
Tensor empty(Shape shape, DType dtype = DType::Float32, Device device = Device::cpu());

}  // namespace linea
