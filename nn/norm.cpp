#include "linea/nn/norm.h"

#include "linea/autograd/ops_norm.h"
#include "linea/tensor/creation.h"
#include "linea/tensor/error.h"

namespace linea::nn {

namespace {
void check_last_dim(std::string_view op, const Tensor& x, int64_t dim) {
  LINEA_CHECK(x.dim() >= 1 && x.size(-1) == dim, "[{}] expected input [..., {}], got {}", op, dim,
              shape_str(x.shape()));
}
}  // namespace

LayerNorm::LayerNorm(int64_t dim, double eps, bool affine) : Module("LayerNorm"), dim_(dim), eps_(eps) {
  LINEA_CHECK(dim > 0 && eps >= 0, "[LayerNorm] need dim > 0 and eps >= 0, got dim {}, eps {}", dim, eps);
  if (affine) {
    weight = register_parameter("weight", ones({dim}));
    bias = register_parameter("bias", zeros({dim}));
  }
}

Tensor LayerNorm::forward(const Tensor& x) {
  check_last_dim("LayerNorm", x, dim_);
  return layer_norm(x, weight, bias, eps_);
}

RMSNorm::RMSNorm(int64_t dim, double eps, bool affine) : Module("RMSNorm"), dim_(dim), eps_(eps) {
  LINEA_CHECK(dim > 0 && eps >= 0, "[RMSNorm] need dim > 0 and eps >= 0, got dim {}, eps {}", dim, eps);
  if (affine) weight = register_parameter("weight", ones({dim}));
}

Tensor RMSNorm::forward(const Tensor& x) {
  check_last_dim("RMSNorm", x, dim_);
  return rms_norm(x, weight, eps_);
}

}  // namespace linea::nn
