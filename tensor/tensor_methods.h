// The members of Tensor that autograd/ implements: requires_grad, grad, backward and the views
// and copies (each view records the backward that takes the gradient back to the viewed shape).
//
// tensor/ knows nothing of autograd. It declares this interface, Tensor's members forward to it
// (tensor/tensor.cpp), and autograd/ installs its one implementation before main runs (the
// installer is an inline variable in autograd/graph.h, which every autograd/ header and
// <linea/linea.h> include). PyTorch's core reaches its autograd the same way
// (VariableHooksInterface).
#pragma once
#include <cstdint>
#include <vector>

#include "linea/tensor/tensor.h"

namespace linea {

class TensorMethods {
 public:
  virtual ~TensorMethods() = default;

  // autograd: see the members of the same names in tensor.h
  virtual bool requires_grad(const Tensor& x) const = 0;
  virtual void set_requires_grad(const Tensor& x, bool on) const = 0;
  virtual bool is_leaf(const Tensor& x) const = 0;
  virtual Tensor grad(const Tensor& x) const = 0;
  virtual void zero_grad(const Tensor& x) const = 0;
  virtual void backward(const Tensor& x, const Tensor& gradient, bool retain_graph) const = 0;

  // views and copies
  virtual Tensor view(const Tensor& x, Shape shape) const = 0;
  virtual Tensor reshape(const Tensor& x, Shape shape) const = 0;
  virtual Tensor permute(const Tensor& x, std::vector<int64_t> dims) const = 0;
  virtual Tensor transpose(const Tensor& x, int64_t d0, int64_t d1) const = 0;
  virtual Tensor t(const Tensor& x) const = 0;
  virtual Tensor unsqueeze(const Tensor& x, int64_t d) const = 0;
  virtual Tensor squeeze(const Tensor& x, int64_t d) const = 0;
  virtual Tensor squeeze(const Tensor& x) const = 0;
  virtual Tensor expand(const Tensor& x, Shape shape) const = 0;
  virtual Tensor narrow(const Tensor& x, int64_t dim, int64_t start, int64_t length) const = 0;
  virtual Tensor slice(const Tensor& x, int64_t dim, int64_t start, int64_t end, int64_t step) const = 0;
  virtual Tensor select(const Tensor& x, int64_t dim, int64_t index) const = 0;
  virtual Tensor flatten(const Tensor& x, int64_t start, int64_t end) const = 0;
  virtual Tensor unflatten(const Tensor& x, int64_t dim, Shape sizes) const = 0;
  virtual std::vector<Tensor> chunk(const Tensor& x, int64_t chunks, int64_t dim) const = 0;
  virtual std::vector<Tensor> split(const Tensor& x, int64_t split_size, int64_t dim) const = 0;
  virtual Tensor contiguous(const Tensor& x) const = 0;
  virtual Tensor clone(const Tensor& x) const = 0;
  virtual Tensor to(const Tensor& x, DType dtype) const = 0;
  virtual Tensor to(const Tensor& x, Device device) const = 0;
};

// Installs the implementation (autograd/ calls this once; the object must outlive every tensor).
// Returns true, so that it can initialise a variable.
bool install_tensor_methods(const TensorMethods& methods);

// The installed implementation; throws a linea::Error naming `op` when none is installed (a
// program that reaches Tensor's autograd members without linking autograd/, or before static
// initialisation has installed it).
const TensorMethods& tensor_methods(const char* op);

}  // namespace linea
