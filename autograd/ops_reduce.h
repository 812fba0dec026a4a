// Reductions and softmax. `dims` empty means "all dims"; negative dims count from the end.
// All are numerically stable: logsumexp/softmax shift by the max; var uses the two-pass form.
#pragma once
#include <vector>

#include "linea/tensor/tensor.h"

namespace linea {

Tensor sum(const Tensor& x, std::vector<int64_t> dims = {}, bool keepdim = false);
Tensor mean(const Tensor& x, std::vector<int64_t> dims = {}, bool keepdim = false);
// correction = 1 is the unbiased estimator (PyTorch's default), 0 the population variance.
Tensor var(const Tensor& x, std::vector<int64_t> dims = {}, bool keepdim = false, int64_t correction = 1);
Tensor max(const Tensor& x, std::vector<int64_t> dims = {}, bool keepdim = false);
Tensor min(const Tensor& x, std::vector<int64_t> dims = {}, bool keepdim = false);
Tensor argmax(const Tensor& x, int64_t dim, bool keepdim = false);  // int64; first index on ties
Tensor logsumexp(const Tensor& x, std::vector<int64_t> dims, bool keepdim = false);
Tensor softmax(const Tensor& x, int64_t dim = -1);
Tensor log_softmax(const Tensor& x, int64_t dim = -1);

}  // namespace linea
