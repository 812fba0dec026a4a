// Joining (cat, stack) and indexing (index_select, gather, scatter_add, embedding, one_hot).
//
// The backward of an op that picks elements (index_select, gather, embedding) adds the gradient
// back at the picked places of zeros (index_add / scatter_add), so an element picked twice
// receives both gradients.
#include "linea/autograd/ops_index.h"

#include "linea/autograd/function.h"
#include "linea/tensor/backend.h"
#include "linea/tensor/creation.h"
#include "linea/tensor/error.h"

namespace linea {

namespace {

using autograd::record;

// Tensors joined by cat/stack: a non-empty list, one dtype, one device.
void check_joinable(const char* op, const std::vector<Tensor>& xs) {
  LINEA_CHECK(!xs.empty(), "[{}] expects a non-empty list of tensors", op);
  for (size_t i = 0; i < xs.size(); ++i) {
    LINEA_CHECK(xs[i].defined(), "[{}] tensor {} is undefined", op, i);
    LINEA_CHECK(xs[i].dtype() == xs[0].dtype() && xs[i].device() == xs[0].device(),
                "[{}] tensor {} is {} on {} but tensor 0 is {} on {}", op, i, xs[i].dtype(), xs[i].device(),
                xs[0].dtype(), xs[0].device());
  }
}

void check_index(const char* op, const Tensor& idx, const Tensor& x) {
  LINEA_CHECK(idx.dtype() == DType::Int64, "[{}] index must be int64, got {}", op, idx.dtype());
  LINEA_CHECK(idx.device() == x.device(), "[{}] index is on {} but the tensor is on {}", op, idx.device(), x.device());
}

// gather/scatter_add: idx has x's number of dims and is no larger than x off `dim`.
int64_t check_gather_shapes(const char* op, const Tensor& x, int64_t dim, const Tensor& idx) {
  LINEA_CHECK(x.dim() > 0 && idx.dim() == x.dim(), "[{}] index of shape {} must have as many dims as {}", op,
              shape_str(idx.shape()), shape_str(x.shape()));
  dim = wrap_dim(op, dim, x.dim());
  for (int64_t d = 0; d < x.dim(); ++d)
    LINEA_CHECK(d == dim || idx.shape()[d] <= x.shape()[d], "[{}] index shape {} is larger than {} in dim {}", op,
                shape_str(idx.shape()), shape_str(x.shape()), d);
  return dim;
}

// Runs a kernel; the error it throws for a bad index gets `op` in front, so the message names the
// op the user called rather than the kernel it happens to use.
template <class F>
void as_op(const char* op, F&& kernel) {
  try {
    kernel();
  } catch (const Error& e) {
    throw Error(fmt::format("[{}] {}", op, e.what()));
  }
}

}  // namespace

Tensor cat(const std::vector<Tensor>& xs, int64_t dim) {
  check_joinable("cat", xs);
  const Tensor& x0 = xs[0];
  LINEA_CHECK(x0.dim() > 0, "[cat] cannot concatenate 0-d tensors (stack them instead)");
  dim = wrap_dim("cat", dim, x0.dim());
  Shape shape = x0.shape();
  shape[dim] = 0;
  std::vector<int64_t> sizes;
  for (size_t i = 0; i < xs.size(); ++i) {
    const Shape& s = xs[i].shape();
    bool fits = xs[i].dim() == x0.dim();
    for (int64_t d = 0; fits && d < x0.dim(); ++d) fits = d == dim || s[d] == x0.shape()[d];
    LINEA_CHECK(fits, "[cat] tensor {} has shape {} but tensor 0 has shape {}: shapes must match except in dim {}", i,
                shape_str(s), shape_str(x0.shape()), dim);
    shape[dim] += s[dim];
    sizes.push_back(s[dim]);
  }
  Tensor out = empty(shape, x0.dtype(), x0.device());
  int64_t start = 0;
  for (size_t i = 0; i < xs.size(); ++i) {
    backend(out.device()).copy(xs[i], out.narrow(dim, start, sizes[i]));  // each input into its slot
    start += sizes[i];
  }
  return record("cat", out, xs, [dim, sizes](const Tensor& g) {
    std::vector<Tensor> gs;
    int64_t at = 0;
    for (int64_t n : sizes) {
      gs.push_back(g.narrow(dim, at, n));
      at += n;
    }
    return gs;
  });
}

Tensor stack(const std::vector<Tensor>& xs, int64_t dim) {
  check_joinable("stack", xs);
  dim = wrap_dim("stack", dim, xs[0].dim() + 1);
  std::vector<Tensor> parts;
  for (size_t i = 0; i < xs.size(); ++i) {
    LINEA_CHECK(xs[i].shape() == xs[0].shape(), "[stack] tensor {} has shape {} but tensor 0 has shape {}", i,
                shape_str(xs[i].shape()), shape_str(xs[0].shape()));
    parts.push_back(xs[i].unsqueeze(dim));
  }
  return cat(parts, dim);
}

namespace {
// A 1-d index along `dim` spread over `shape` (scatter_add's index form of index_add): what the
// index ops' backwards use under create_graph, where the scatter must be recorded.
Tensor along(const Tensor& idx, int64_t dim, const Shape& shape) {
  Shape s(shape.size(), 1);
  s[dim] = idx.numel();
  return idx.reshape(s).expand(shape).contiguous();
}
}  // namespace

Tensor index_select(const Tensor& x, int64_t dim, const Tensor& idx) {
  check_index("index_select", idx, x);
  LINEA_CHECK(x.dim() > 0, "[index_select] needs a tensor with at least one dim");
  LINEA_CHECK(idx.dim() <= 1, "[index_select] index must be 1-d, got shape {}", shape_str(idx.shape()));
  dim = wrap_dim("index_select", dim, x.dim());
  Shape shape = x.shape();
  shape[dim] = idx.numel();
  Tensor out = empty(shape, x.dtype(), x.device());
  backend(x.device()).index_select(x, dim, idx, out);
  return record("index_select", out, {x},
                [idx = idx.detach(), dim, in = x.shape()](const Tensor& g) -> std::vector<Tensor> {
                  Tensor gx = zeros(in, {g.dtype(), g.device()});
                  if (autograd::grad_enabled()) return {scatter_add(gx, dim, along(idx, dim, g.shape()), g)};
                  backend(g.device()).index_add(gx, dim, idx, g);
                  return {gx};
                });
}

Tensor gather(const Tensor& x, int64_t dim, const Tensor& idx) {
  check_index("gather", idx, x);
  dim = check_gather_shapes("gather", x, dim, idx);
  Tensor out = empty(idx.shape(), x.dtype(), x.device());
  backend(x.device()).gather(x, dim, idx, out);
  return record("gather", out, {x}, [idx = idx.detach(), dim, in = x.shape()](const Tensor& g) -> std::vector<Tensor> {
    Tensor gx = zeros(in, {g.dtype(), g.device()});
    if (autograd::grad_enabled()) return {scatter_add(gx, dim, idx, g)};  // create_graph: recorded
    backend(g.device()).scatter_add(gx, dim, idx, g);
    return {gx};
  });
}

Tensor scatter_add(const Tensor& x, int64_t dim, const Tensor& idx, const Tensor& src) {
  check_index("scatter_add", idx, x);
  dim = check_gather_shapes("scatter_add", x, dim, idx);
  LINEA_CHECK(src.shape() == idx.shape() && src.dtype() == x.dtype() && src.device() == x.device(),
              "[scatter_add] src {} {} on {} must have the index's shape {} and x's dtype {} and device {}",
              shape_str(src.shape()), src.dtype(), src.device(), shape_str(idx.shape()), x.dtype(), x.device());
  Tensor out = empty(x.shape(), x.dtype(), x.device());
  backend(x.device()).copy(x, out);
  backend(x.device()).scatter_add(out, dim, idx, src);
  // d out / d x is the identity; src[i] went to out[idx[i]], so its gradient is read back from there.
  return record("scatter_add", out, {x, src}, [idx = idx.detach(), dim](const Tensor& g) -> std::vector<Tensor> {
    return {g, gather(g, dim, idx)};
  });
}

Tensor embedding(const Tensor& weight, const Tensor& idx) {
  check_index("embedding", idx, weight);
  LINEA_CHECK(weight.dim() == 2, "[embedding] weight must be 2-d [num_embeddings, dim], got shape {}",
              shape_str(weight.shape()));
  const int64_t n = idx.numel(), d = weight.shape()[1];
  Tensor flat = idx.reshape({n});
  Shape shape = idx.shape();
  shape.push_back(d);
  Tensor out = empty(shape, weight.dtype(), weight.device());
  as_op("embedding", [&] { backend(weight.device()).index_select(weight, 0, flat, out.view({n, d})); });
  // Backward: each token's gradient row is added into its row of the table (repeats accumulate).
  return record("embedding", out, {weight},
                [flat = flat.detach(), in = weight.shape()](const Tensor& g) -> std::vector<Tensor> {
                  Tensor gw = zeros(in, {g.dtype(), g.device()});
                  const Tensor rows = g.reshape({flat.numel(), in[1]});
                  if (autograd::grad_enabled()) return {scatter_add(gw, 0, along(flat, 0, rows.shape()), rows)};
                  backend(g.device()).index_add(gw, 0, flat, rows);
                  return {gw};
                });
}

Tensor one_hot(const Tensor& idx, int64_t num_classes, DType dtype) {
  LINEA_CHECK(idx.dtype() == DType::Int64, "[one_hot] index must be int64, got {}", idx.dtype());
  LINEA_CHECK(num_classes > 0, "[one_hot] num_classes must be positive, got {}", num_classes);
  const int64_t n = idx.numel();
  Shape shape = idx.shape();
  shape.push_back(num_classes);
  // A 1 scattered into each row of [n, num_classes] zeros, at the row's class.
  Tensor out = zeros(shape, {DType::Int64, idx.device()});
  Tensor one = ones({1, 1}, {DType::Int64, idx.device()}).expand({n, 1});
  as_op("one_hot", [&] {
    backend(idx.device()).scatter_add(out.view({n, num_classes}), 1, idx.reshape({n, 1}), one);
  });
  return out.to(dtype);
}

}  // namespace linea
