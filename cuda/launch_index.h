// Launchers of the indexing kernels (index.cu), called by cuda_index.cpp. Values are float32,
// float64 or int64 (checked by the caller), indices int64 and already range-checked with
// launch_check_indices; `dim` is the indexed dim.
#pragma once
#include <cstdint>

#include "linea/cuda/cuda_backend.h"

namespace linea::cuda {

// slot: two int64s on the device, zeroed by the caller. If some element of idx lies outside
// [0, size), slot[0] becomes 1 and slot[1] one offending value (whichever thread got there first).
void launch_check_indices(const TensorArg& idx, int64_t size, int64_t* slot);

// out = x with `dim` replaced by the n entries of the 0-d or 1-d idx: out[.., i, ..] = x[.., idx[i], ..].
void launch_index_select(const TensorArg& x, int dim, const TensorArg& idx, const TensorArg& out);
// out[.., idx[i], ..] += src[.., i, ..], repeated indices accumulating (atomics).
void launch_index_add(const TensorArg& out, int dim, const TensorArg& idx, const TensorArg& src);
// out[p] = x[p with p[dim] = idx[p]] for every position p of idx (out has idx's shape).
void launch_gather(const TensorArg& x, int dim, const TensorArg& idx, const TensorArg& out);
// out[p with p[dim] = idx[p]] += src[p] for every position p of idx (src has idx's shape).
void launch_scatter_add(const TensorArg& out, int dim, const TensorArg& idx, const TensorArg& src);

}  // namespace linea::cuda
