// Joining and indexing. Index tensors are int64; out-of-range indices throw a linea::Error.
#pragma once
#include <vector>

#include "linea/tensor/tensor.h"

namespace linea {

Tensor cat(const std::vector<Tensor>& xs, int64_t dim = 0);
Tensor stack(const std::vector<Tensor>& xs, int64_t dim = 0);
// Rows of x along `dim` picked by the 1-d idx: out.shape[dim] = idx.numel().
Tensor index_select(const Tensor& x, int64_t dim, const Tensor& idx);
// out[i][j] = x[idx[i][j]][j] (dim 0); idx has x's number of dims.
Tensor gather(const Tensor& x, int64_t dim, const Tensor& idx);
// Out-of-place: a copy of x with src added at idx along dim (repeated indices accumulate).
Tensor scatter_add(const Tensor& x, int64_t dim, const Tensor& idx, const Tensor& src);
// weight: [num_embeddings, dim], idx: any int64 shape -> idx.shape + [dim].
Tensor embedding(const Tensor& weight, const Tensor& idx);
Tensor one_hot(const Tensor& idx, int64_t num_classes, DType dtype = DType::Int64);

}  // namespace linea
